// A CUPTI tool that correlates graph nodes with the API calls that made them, as NVIDIA's
// cuda_graphs_trace sample does, and a graph workload; run against gpusim's libcupti.so.13 by
// cupti_sim_test. It subscribes to runtime- and driver-API callbacks and to the resource
// callbacks GRAPHNODE_CREATED / GRAPHNODE_CLONED, enables kernel, memcpy and memset records, and
// prints one line per observation on stdout, in the order they happened:
//   MARK <phase>
//   CB <enter|exit> <domain> <cbid> <corr> <function> <symbol|->
//   RES <cbid> <encl_domain> <encl_cbid> <encl_corr> <encl_function> <graph> <original_graph>
//       <node> <original_node> <node_type> <graph_exec> <node_id> <original_node_id> <ctx_id>
//     (one line; the enclosing call is the innermost API call in progress on the thread, "0 0 0
//     -" if none; handles as pointers, 0 for NULL; ids from cuptiGetGraphNodeId, 0 if it failed;
//     ctx_id from cuptiGetContextId of the callback's context)
//   HANDLE <label> <pointer>           (graphs, execs and nodes the program made)
//   NODEID <label> <cuptiGetGraphNodeId> (for a node the program made)
//   KERNEL <corr> <graphId> <graphNodeId> <name>
//   MEMCPY <corr> <graphId> <graphNodeId> <bytes>
//   MEMSET <corr> <graphId> <graphNodeId> <bytes>
//   RESULT <what> <code>
// Modes (argv[1]): "cbids" (default) enables the two cbids with cuptiEnableCallback; "domain"
// enables the whole resource domain; "created" only GRAPHNODE_CREATED; "off" no resource cbid.
//
// Phases: capture (<<<>>> kA, cudaLaunchKernel kB, cudaLaunchKernelExC kC, cudaMemcpyAsync);
// instantiate; launch (twice); clone (of the captured graph); instantiate_clone; launch_clone;
// manual (cudaGraphAddKernelNode kD, cudaGraphAddMemsetNode after it, two empty nodes in a
// cycle in another graph); instantiate_manual; launch_manual; failed_instantiate (the cycle);
// misc (capture of cudaMemsetAsync, cudaLaunchHostFunc, a fork to s2 through events with
// cudaLaunchCooperativeKernel kE, joined back); nccl (capture of a one-rank ncclAllReduce);
// instantiate_nccl; launch_nccl; ids (cuptiGetGraphNodeId with bad arguments); done.
#include <cuda_runtime.h>
#include <cupti.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

namespace {

struct Frame {
  int domain;
  unsigned cbid;
  unsigned corr;
  const char* func;
};
std::vector<Frame> g_frames;  // API calls in progress (one host thread)

unsigned long long P(const void* p) { return reinterpret_cast<unsigned long long>(p); }

uint64_t NodeId(CUgraphNode node) {
  uint64_t id = 0;
  if (node == nullptr || cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS) return 0;
  return id;
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
    Frame f = g_frames.empty() ? Frame{0, 0, 0, "-"} : g_frames.back();
    uint32_t ctx_id = 0;
    if (rd->context != nullptr) cuptiGetContextId(rd->context, &ctx_id);
    printf("RES %u %d %u %u %s %llx %llx %llx %llx %d %llx %llu %llu %u\n", cbid, f.domain, f.cbid,
           f.corr, f.func, P(gd->graph), P(gd->originalGraph), P(gd->node), P(gd->originalNode),
           int(gd->nodeType), P(gd->graphExec), (unsigned long long)NodeId(gd->node),
           (unsigned long long)NodeId(gd->originalNode), ctx_id);
    return;
  }
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  bool enter = cb->callbackSite == CUPTI_API_ENTER;
  printf("CB %s %d %u %u %s %s\n", enter ? "enter" : "exit", int(domain), cbid, cb->correlationId,
         cb->functionName, cb->symbolName != nullptr ? cb->symbolName : "-");
  if (enter) {
    g_frames.push_back(Frame{int(domain), cbid, cb->correlationId, cb->functionName});
  } else if (!g_frames.empty()) {
    g_frames.pop_back();
  }
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 64 * 1024;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      printf("KERNEL %u %u %llu %s\n", k->correlationId, k->graphId,
             (unsigned long long)k->graphNodeId, k->name);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      printf("MEMCPY %u %u %llu %llu\n", m->correlationId, m->graphId,
             (unsigned long long)m->graphNodeId, (unsigned long long)m->bytes);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      printf("MEMSET %u %u %llu %llu\n", m->correlationId, m->graphId,
             (unsigned long long)m->graphNodeId, (unsigned long long)m->bytes);
    }
  }
  free(buffer);
}

__global__ void kA(float* x) { x[threadIdx.x] += 1.0f; }
__global__ void kB(float* x) { x[threadIdx.x] *= 2.0f; }
__global__ void kC(float* x) { x[threadIdx.x] -= 1.0f; }
__global__ void kD(float* x) { x[threadIdx.x] = 0.0f; }
__global__ void kE(float* x) { x[threadIdx.x] = 3.0f; }

void CUDART_CB HostFn(void*) {}

void Mark(const char* phase) { printf("MARK %s\n", phase); }

void Result(const char* what, int code) { printf("RESULT %s %d\n", what, code); }

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "cbids";
  CUpti_SubscriberHandle sub = nullptr;
  Result("subscribe",
         cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(&OnCallback), nullptr));
  Result("register", cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted));
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  if (strcmp(mode, "cbids") == 0 || strcmp(mode, "created") == 0) {
    Result("enable_created", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                                 CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
  }
  if (strcmp(mode, "cbids") == 0) {
    Result("enable_cloned", cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                                CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
  }
  if (strcmp(mode, "domain") == 0) {
    Result("enable_domain", cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE));
  }
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);

  float *dev = nullptr, *dev2 = nullptr;
  cudaMalloc(&dev, 4096);
  cudaMalloc(&dev2, 4096);
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  void* args[] = {&dev};

  // ---- Stream capture: three launch entry points and a copy ----
  Mark("capture");
  cudaGraph_t graph = nullptr;
  Result("begin_capture", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  kA<<<1, 32, 0, s1>>>(dev);
  Result("launch_kB",
         cudaLaunchKernel(reinterpret_cast<void*>(kB), dim3(2), dim3(32), args, 0, s1));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(3);
  cfg.blockDim = dim3(32);
  cfg.stream = s1;
  Result("launch_kC", cudaLaunchKernelExC(&cfg, reinterpret_cast<void*>(kC), args));
  Result("memcpy", cudaMemcpyAsync(dev2, dev, 4096, cudaMemcpyDeviceToDevice, s1));
  Result("end_capture", cudaStreamEndCapture(s1, &graph));
  printf("HANDLE graph %llx\n", P(graph));

  Mark("instantiate");
  cudaGraphExec_t exec = nullptr;
  Result("instantiate", cudaGraphInstantiate(&exec, graph, 0));
  printf("HANDLE exec %llx\n", P(exec));

  Mark("launch");
  Result("launch1", cudaGraphLaunch(exec, s1));
  Result("launch2", cudaGraphLaunch(exec, s1));
  Result("sync", cudaStreamSynchronize(s1));

  // ---- Clone, and an executable graph of the clone ----
  Mark("clone");
  cudaGraph_t clone = nullptr;
  Result("clone", cudaGraphClone(&clone, graph));
  printf("HANDLE clone %llx\n", P(clone));
  Mark("instantiate_clone");
  cudaGraphExec_t clone_exec = nullptr;
  Result("instantiate_clone", cudaGraphInstantiate(&clone_exec, clone, 0));
  printf("HANDLE clone_exec %llx\n", P(clone_exec));
  Mark("launch_clone");
  Result("launch_clone", cudaGraphLaunch(clone_exec, s1));
  Result("sync_clone", cudaStreamSynchronize(s1));

  // ---- A graph built by hand ----
  Mark("manual");
  cudaGraph_t manual = nullptr;
  Result("create_manual", cudaGraphCreate(&manual, 0));
  printf("HANDLE manual %llx\n", P(manual));
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(kD);
  kp.gridDim = dim3(4);
  kp.blockDim = dim3(32);
  kp.kernelParams = args;
  cudaGraphNode_t kernel_node = nullptr, set_node = nullptr;
  Result("add_kernel", cudaGraphAddKernelNode(&kernel_node, manual, nullptr, 0, &kp));
  printf("HANDLE manual_kernel %llx\n", P(kernel_node));
  printf("NODEID manual_kernel %llu\n", (unsigned long long)NodeId(kernel_node));
  cudaMemsetParams sp = {};
  sp.dst = dev2;
  sp.value = 0;
  sp.elementSize = 4;
  sp.width = 64;
  sp.height = 1;
  Result("add_memset", cudaGraphAddMemsetNode(&set_node, manual, &kernel_node, 1, &sp));
  printf("HANDLE manual_memset %llx\n", P(set_node));
  printf("NODEID manual_memset %llu\n", (unsigned long long)NodeId(set_node));
  cudaGraph_t cyclic = nullptr;
  cudaGraphCreate(&cyclic, 0);
  cudaGraphNode_t e1 = nullptr, e2 = nullptr;
  cudaGraphAddEmptyNode(&e1, cyclic, nullptr, 0);
  cudaGraphAddEmptyNode(&e2, cyclic, &e1, 1);
  Result("add_cycle", cudaGraphAddDependencies(cyclic, &e2, &e1, nullptr, 1));
  Mark("instantiate_manual");
  cudaGraphExec_t manual_exec = nullptr;
  Result("instantiate_manual", cudaGraphInstantiateWithFlags(&manual_exec, manual, 0));
  printf("HANDLE manual_exec %llx\n", P(manual_exec));
  Mark("launch_manual");
  Result("launch_manual", cudaGraphLaunch(manual_exec, s1));
  Result("sync_manual", cudaStreamSynchronize(s1));
  Mark("failed_instantiate");
  cudaGraphExec_t cyclic_exec = nullptr;
  Result("instantiate_cycle", cudaGraphInstantiate(&cyclic_exec, cyclic, 0));
  cudaGetLastError();

  // ---- Capture of a set, a host function and a forked branch ----
  Mark("misc");
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  cudaGraph_t misc = nullptr;
  Result("begin_capture_misc", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  Result("memset", cudaMemsetAsync(dev, 0, 256, s1));
  Result("host_fn", cudaLaunchHostFunc(s1, HostFn, nullptr));
  Result("record_fork", cudaEventRecord(fork, s1));
  Result("wait_fork", cudaStreamWaitEvent(s2, fork, 0));
  Result("launch_kE",
         cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kE), dim3(1), dim3(32), args, 0, s2));
  Result("record_join", cudaEventRecord(join, s2));
  Result("wait_join", cudaStreamWaitEvent(s1, join, 0));
  Result("end_capture_misc", cudaStreamEndCapture(s1, &misc));
  printf("HANDLE misc %llx\n", P(misc));

  // ---- NCCL: a captured collective is a kernel node made inside its driver launch ----
  Mark("nccl");
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  Result("ncclinit", ncclCommInitRank(&comm, 1, id, 0));
  cudaGraph_t nccl_graph = nullptr;
  Result("begin_capture_nccl", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  Result("allreduce", ncclAllReduce(dev, dev, 256, ncclFloat, ncclSum, comm, s1));
  Result("end_capture_nccl", cudaStreamEndCapture(s1, &nccl_graph));
  printf("HANDLE nccl_graph %llx\n", P(nccl_graph));
  Mark("instantiate_nccl");
  cudaGraphExec_t nccl_exec = nullptr;
  Result("instantiate_nccl", cudaGraphInstantiate(&nccl_exec, nccl_graph, 0));
  Mark("launch_nccl");
  Result("launch_nccl", cudaGraphLaunch(nccl_exec, s1));
  Result("sync_nccl", cudaStreamSynchronize(s1));

  Mark("ids");
  uint64_t node_id = 0;
  Result("nodeid_null_node", cuptiGetGraphNodeId(nullptr, &node_id));
  Result("nodeid_null_out",
         cuptiGetGraphNodeId(reinterpret_cast<CUgraphNode>(kernel_node), nullptr));
  Result("nodeid_not_a_node",
         cuptiGetGraphNodeId(reinterpret_cast<CUgraphNode>(&node_id), &node_id));
  // A node's id outlives its graph (the records of its launches still carry ids).
  cudaGraphExecDestroy(manual_exec);
  cudaGraphDestroy(manual);
  printf("NODEID manual_kernel_after_destroy %llu\n",
         (unsigned long long)NodeId(reinterpret_cast<CUgraphNode>(kernel_node)));

  Mark("done");
  cudaDeviceSynchronize();
  Result("flush", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  cuptiUnsubscribe(sub);
  return 0;
}
