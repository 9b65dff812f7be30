// gpusim graph scenario, modelled on what NVIDIA's samples simpleCudaGraphs (a graph built by
// hand, cloned, instantiated and launched) and jacobiCudaGraphs (a captured graph whose kernel
// node changes through cudaGraphExecKernelNodeSetParams and cudaGraphExecUpdate) do.
// cudart_sim_test runs it with a GPUSIM_COSTS file and checks the ground truth; the program
// itself checks what the API returns, that bytes really moved, and what gpusim's observer
// interface (gpusim_internal.h, used by the simulated CUPTI) saw: every graph call reported at
// enter and exit with its CUPTI runtime cbid, every op of a launch with the graph's id, its
// node's id and the cudaGraphLaunch's correlation id; and the graph node events
// (gpusim_set_graph_observer): instantiation gives every node a copy with an id of its own
// (child graphs flattened), a child graph is cloned in. Prints one "ok <check>" line per passed
// check, "FAIL <check>: ..." otherwise, "host_node_runs <n>", "exec_node_first <id>" and
// "clone_node_first <id>" (the ids of gk_first's node in the executable graph and in the graph it
// was instantiated from) and "failures <n>"; exit code = number of failures.
//
// Kernels (their names are unique so the test finds them in the truth):
// - main graph, 6 launches: gk_first and gk_second, grid 64 (launches 1-3), gk_first grid 256
//   (launch 4, cudaGraphExecKernelNodeSetParams), gk_second grid 512 and gk_first back to 64
//   (launches 5 and 6, cudaGraphExecUpdate); launch 6 goes to another stream.
// - child graph: gk_child_a (grid 3) and gk_child_b, then gk_after (not in a graph) waits for
//   the graph's event record node.
// - event wait node: gk_waiter (in a graph on s1) waits for gk_long on s2.
// - captured graph: gk_captured, launched with grid 32, then 48 after cudaGraphExecUpdate.
// - cudaGraphAddNode: gk_generic (grid 5) disabled in the first of two launches.
// - cudaStreamBeginCaptureToGraph: gk_tograph captured into a graph built by hand.
#include <cuda_runtime.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/gpusim/gpusim_internal.h"

__global__ void gk_first(float* a, int n) {
  if (threadIdx.x < n) a[threadIdx.x] += 1.0f;
}
__global__ void gk_second(float* a, int n) {
  if (threadIdx.x < n) a[threadIdx.x] *= 2.0f;
}
__global__ void gk_child_a() {}
__global__ void gk_child_b() {}
__global__ void gk_after() {}
__global__ void gk_long() {}
__global__ void gk_waiter() {}
__global__ void gk_generic() {}
__global__ void gk_tograph() {}
__global__ void gk_captured(double* sum) {
  if (threadIdx.x == 0) *sum = 1.0;
}

static int failures = 0;

// What the observer saw.
struct ApiRec {
  int cbid;
  std::string func;
  uint32_t corr;
  int is_exit;
  int ret;
};
struct OpRec {
  int kind;
  uint32_t corr, graph, node;
};
static std::mutex g_mu;
static std::vector<ApiRec> g_api;
static std::vector<OpRec> g_ops;
static std::vector<GpusimGraphNodeEvent> g_node_events;

static void OnApi(void*, int domain, int is_exit, int cbid, const char* func, const char*,
                  uint32_t corr, const void*, const void* ret) {
  if (domain != GPUSIM_DOMAIN_RUNTIME) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_api.push_back(ApiRec{cbid, func, corr, is_exit, ret ? *static_cast<const int*>(ret) : -1});
}

static void OnOp(void*, const GpusimOpRecord* rec) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_ops.push_back(OpRec{rec->kind, rec->correlation_id, rec->graph_id, rec->graph_node_id});
}

static void OnGraphNode(void*, const GpusimGraphNodeEvent* ev) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_node_events.push_back(*ev);
}

// The CLONED events of the instantiation of `exec`: original node -> exec node id.
static std::map<const void*, uint64_t> ExecNodesOf(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::map<const void*, uint64_t> m;
  for (const GpusimGraphNodeEvent& ev : g_node_events) {
    if (ev.what == GPUSIM_GRAPHNODE_CLONED && ev.graph_exec == exec) {
      m[ev.original_node] = ev.node_id;
    }
  }
  return m;
}

static void Check(bool ok, const char* what, const char* detail = "") {
  if (ok) {
    printf("ok %s\n", what);
  } else {
    printf("FAIL %s: %s\n", what, detail);
    ++failures;
  }
}

static void CheckCall(cudaError_t e, const char* what) {
  Check(e == cudaSuccess, what, cudaGetErrorName(e));
}

constexpr int kN = 1024;

// State the host node sees: it runs after both device-to-host copies of its launch, so the
// bytes must be there; it then scribbles over them so the next launch has to copy again.
struct HostState {
  const float* in;
  float* out;
  const float* set;
  int runs;
  int bad;
};

void CUDART_CB HostNode(void* arg) {
  HostState* st = static_cast<HostState*>(arg);
  ++st->runs;
  if (memcmp(st->in, st->out, kN * sizeof(float)) != 0) ++st->bad;
  for (int i = 0; i < kN; ++i) {
    if (st->set[i] != 1.0f) {
      ++st->bad;
      break;
    }
  }
  for (int i = 0; i < kN; ++i) st->out[i] = -1.0f;
}

// The graph's nodes, in creation order (as cudaGraphGetNodes returns them).
struct MainNodes {
  cudaGraphNode_t memset, htod, first, second, dtoh, set_dtoh, host;
};

cudaKernelNodeParams KernelParams(void* func, unsigned grid, void** args) {
  cudaKernelNodeParams p = {};
  p.func = func;
  p.gridDim = dim3(grid, 1, 1);
  p.blockDim = dim3(256, 1, 1);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  return p;
}

size_t CountNodes(cudaGraph_t g) {
  size_t n = 0;
  cudaGraphGetNodes(g, nullptr, &n);
  return n;
}

size_t CountEdges(cudaGraph_t g) {
  size_t n = 0;
  cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n);
  return n;
}

int main() {
  auto set_observer = reinterpret_cast<decltype(&gpusim_set_observer)>(
      dlsym(RTLD_DEFAULT, "gpusim_set_observer"));
  Check(set_observer != nullptr, "observer_interface");
  if (set_observer != nullptr) set_observer(OnApi, OnOp, nullptr);
  auto set_graph_observer = reinterpret_cast<decltype(&gpusim_set_graph_observer)>(
      dlsym(RTLD_DEFAULT, "gpusim_set_graph_observer"));
  auto graph_node_id = reinterpret_cast<decltype(&gpusim_graph_node_id)>(
      dlsym(RTLD_DEFAULT, "gpusim_graph_node_id"));
  Check(set_graph_observer != nullptr && graph_node_id != nullptr, "graph_observer_interface");
  if (set_graph_observer != nullptr) set_graph_observer(OnGraphNode, nullptr);
  cudaStream_t s1, s2;
  CheckCall(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream_s1");
  CheckCall(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream_s2");
  float *d_a = nullptr, *d_b = nullptr;
  CheckCall(cudaMalloc(&d_a, kN * sizeof(float)), "malloc_a");
  CheckCall(cudaMalloc(&d_b, kN * sizeof(float)), "malloc_b");
  // Pageable host buffers: a memcpy node reads its source when the launch executes it.
  std::vector<float> h_in(kN), h_out(kN, -1.0f), h_set(kN, 0.0f);
  HostState state = {h_in.data(), h_out.data(), h_set.data(), 0, 0};
  int n = kN;
  void* args[] = {&d_a, &n};

  // ---- A graph built by hand (simpleCudaGraphs) --------------------------------------------
  cudaGraph_t graph;
  CheckCall(cudaGraphCreate(&graph, 0), "graph_create");
  MainNodes m;
  cudaMemsetParams set = {};
  set.dst = d_b;
  set.value = 0x3f800000u;  // 1.0f
  set.elementSize = 4;
  set.width = kN;
  set.height = 1;
  CheckCall(cudaGraphAddMemsetNode(&m.memset, graph, nullptr, 0, &set), "add_memset");
  cudaMemcpy3DParms htod = {};
  htod.srcPtr = make_cudaPitchedPtr(h_in.data(), kN * sizeof(float), kN, 1);
  htod.dstPtr = make_cudaPitchedPtr(d_a, kN * sizeof(float), kN, 1);
  htod.extent = make_cudaExtent(kN * sizeof(float), 1, 1);
  htod.kind = cudaMemcpyHostToDevice;
  CheckCall(cudaGraphAddMemcpyNode(&m.htod, graph, nullptr, 0, &htod), "add_memcpy_htod");
  cudaGraphNode_t first_deps[] = {m.memset, m.htod};
  cudaKernelNodeParams k64 = KernelParams(reinterpret_cast<void*>(gk_first), 64, args);
  CheckCall(cudaGraphAddKernelNode(&m.first, graph, first_deps, 2, &k64), "add_kernel_first");
  cudaKernelNodeParams k2 = KernelParams(reinterpret_cast<void*>(gk_second), 64, args);
  CheckCall(cudaGraphAddKernelNode(&m.second, graph, &m.first, 1, &k2), "add_kernel_second");
  cudaMemcpy3DParms dtoh = {};
  dtoh.srcPtr = make_cudaPitchedPtr(d_a, kN * sizeof(float), kN, 1);
  dtoh.dstPtr = make_cudaPitchedPtr(h_out.data(), kN * sizeof(float), kN, 1);
  dtoh.extent = make_cudaExtent(kN * sizeof(float), 1, 1);
  dtoh.kind = cudaMemcpyDeviceToHost;
  CheckCall(cudaGraphAddMemcpyNode(&m.dtoh, graph, &m.second, 1, &dtoh), "add_memcpy_dtoh");
  CheckCall(cudaGraphAddMemcpyNode1D(&m.set_dtoh, graph, &m.second, 1, h_set.data(), d_b,
                                     kN * sizeof(float), cudaMemcpyDeviceToHost),
            "add_memcpy_1d");
  cudaHostNodeParams host = {HostNode, &state};
  cudaGraphNode_t host_deps[] = {m.dtoh, m.set_dtoh};
  CheckCall(cudaGraphAddHostNode(&m.host, graph, host_deps, 2, &host), "add_host");

  // Queries.
  cudaGraphNode_t nodes[8];
  size_t count = 8;
  CheckCall(cudaGraphGetNodes(graph, nodes, &count), "get_nodes");
  Check(count == 7 && nodes[0] == m.memset && nodes[2] == m.first && nodes[6] == m.host &&
            nodes[7] == nullptr,
        "get_nodes_order");
  count = 0;
  CheckCall(cudaGraphGetRootNodes(graph, nullptr, &count), "root_count");
  cudaGraphNode_t roots[2];
  CheckCall(cudaGraphGetRootNodes(graph, roots, &count), "roots");
  Check(count == 2 && roots[0] == m.memset && roots[1] == m.htod, "roots_are_memset_htod");
  Check(CountEdges(graph) == 7, "seven_edges");
  cudaGraphNode_t from[7], to[7];
  count = 7;
  CheckCall(cudaGraphGetEdges(graph, from, to, nullptr, &count), "get_edges");
  Check(count == 7 && from[0] == m.memset && to[0] == m.first && from[2] == m.first &&
            to[2] == m.second,
        "edges_content");
  cudaGraphNodeType type;
  CheckCall(cudaGraphNodeGetType(m.first, &type), "get_type");
  Check(type == cudaGraphNodeTypeKernel, "type_kernel");
  cudaGraphNodeGetType(m.htod, &type);
  Check(type == cudaGraphNodeTypeMemcpy, "type_memcpy");
  cudaGraphNodeGetType(m.memset, &type);
  Check(type == cudaGraphNodeTypeMemset, "type_memset");
  cudaGraphNodeGetType(m.host, &type);
  Check(type == cudaGraphNodeTypeHost, "type_host");
  cudaKernelNodeParams got = {};
  CheckCall(cudaGraphKernelNodeGetParams(m.first, &got), "kernel_get_params");
  Check(got.func == reinterpret_cast<void*>(gk_first) && got.gridDim.x == 64 &&
            got.blockDim.x == 256,
        "kernel_params_back");
  cudaMemsetParams got_set = {};
  CheckCall(cudaGraphMemsetNodeGetParams(m.memset, &got_set), "memset_get_params");
  Check(got_set.elementSize == 4 && got_set.width == kN && got_set.dst == d_b,
        "memset_params_back");
  cudaMemcpy3DParms got_copy = {};
  CheckCall(cudaGraphMemcpyNodeGetParams(m.set_dtoh, &got_copy), "memcpy_get_params");
  Check(got_copy.extent.width == kN * sizeof(float) && got_copy.dstPtr.ptr == h_set.data() &&
            got_copy.kind == cudaMemcpyDeviceToHost,
        "memcpy_1d_params_back");
  cudaHostNodeParams got_host = {};
  CheckCall(cudaGraphHostNodeGetParams(m.host, &got_host), "host_get_params");
  Check(got_host.fn == HostNode && got_host.userData == &state, "host_params_back");
  cudaGraphNode_t deps[2];
  count = 2;
  CheckCall(cudaGraphNodeGetDependencies(m.second, deps, nullptr, &count), "get_deps");
  Check(count == 1 && deps[0] == m.first && deps[1] == nullptr, "deps_of_second");
  count = 2;
  CheckCall(cudaGraphNodeGetDependentNodes(m.second, deps, nullptr, &count), "get_dependents");
  Check(count == 2 && deps[0] == m.dtoh && deps[1] == m.set_dtoh, "dependents_of_second");

  // Edges: an existing edge is refused; add one and remove it again.
  Check(cudaGraphAddDependencies(graph, &m.memset, &m.first, nullptr, 1) ==
            cudaErrorInvalidValue,
        "existing_edge_refused");
  cudaGetLastError();
  CheckCall(cudaGraphAddDependencies(graph, &m.memset, &m.second, nullptr, 1), "add_edge");
  Check(CountEdges(graph) == 8, "eight_edges");
  CheckCall(cudaGraphRemoveDependencies(graph, &m.memset, &m.second, nullptr, 1),
            "remove_edge");
  Check(CountEdges(graph) == 7, "seven_edges_again");
  Check(cudaGraphRemoveDependencies(graph, &m.memset, &m.second, nullptr, 1) ==
            cudaErrorInvalidValue,
        "remove_missing_edge_refused");

  // Errors: a host function is not a kernel; a destroyed node is an invalid handle; a copy
  // from an unknown CUDA array is refused (copies with arrays: sim_arrays).
  cudaGraphNode_t bad;
  cudaKernelNodeParams not_kernel = KernelParams(reinterpret_cast<void*>(HostNode), 1, nullptr);
  Check(cudaGraphAddKernelNode(&bad, graph, nullptr, 0, &not_kernel) ==
            cudaErrorInvalidDeviceFunction,
        "unknown_kernel_refused");
  Check(cudaGetLastError() == cudaErrorInvalidDeviceFunction, "unknown_kernel_last_error");
  cudaGraphNode_t empty;
  CheckCall(cudaGraphAddEmptyNode(&empty, graph, &m.host, 1), "add_empty");
  CheckCall(cudaGraphDestroyNode(empty), "destroy_node");
  Check(cudaGraphNodeGetType(empty, &type) == cudaErrorInvalidValue, "destroyed_node_invalid");
  Check(CountNodes(graph) == 7 && CountEdges(graph) == 7, "destroy_node_removed_edges");
  cudaGetLastError();
  cudaMemcpy3DParms from_array = {};
  from_array.srcArray = reinterpret_cast<cudaArray_t>(0x1000);
  from_array.dstPtr = make_cudaPitchedPtr(d_b, 64, 16, 8);
  from_array.extent = make_cudaExtent(16, 4, 2);
  from_array.kind = cudaMemcpyDeviceToDevice;
  Check(cudaGraphAddMemcpyNode(&bad, graph, nullptr, 0, &from_array) == cudaErrorInvalidValue,
        "memcpy_from_unknown_array_refused");
  cudaGetLastError();
  Check(CountNodes(graph) == 7, "failed_adds_add_nothing");

  // ---- Clone, instantiate, launch ------------------------------------------------------------
  cudaGraph_t clone;
  CheckCall(cudaGraphClone(&clone, graph), "clone");
  Check(CountNodes(clone) == 7 && CountEdges(clone) == 7, "clone_shape");
  MainNodes c;
  CheckCall(cudaGraphNodeFindInClone(&c.first, m.first, clone), "find_first_in_clone");
  CheckCall(cudaGraphNodeFindInClone(&c.second, m.second, clone), "find_second_in_clone");
  Check(c.first != m.first, "clone_has_new_nodes");
  // Editing the original does not change the clone.
  cudaKernelNodeParams k8 = KernelParams(reinterpret_cast<void*>(gk_first), 8, args);
  CheckCall(cudaGraphKernelNodeSetParams(m.first, &k8), "edit_original");
  CheckCall(cudaGraphKernelNodeGetParams(c.first, &got), "clone_get_params");
  Check(got.gridDim.x == 64, "clone_unchanged_by_original_edit");

  cudaGraphExec_t exec;
  CheckCall(cudaGraphInstantiate(&exec, clone, 0), "instantiate");
  // Each of the clone's 7 nodes has its exec node, with a new id.
  {
    std::map<const void*, uint64_t> exec_nodes = ExecNodesOf(exec);
    cudaGraphNode_t clone_nodes[7];
    size_t clone_count = 7;
    cudaGraphGetNodes(clone, clone_nodes, &clone_count);
    bool all = exec_nodes.size() == 7 && clone_count == 7;
    std::set<uint64_t> ids;
    for (size_t i = 0; all && i < clone_count; ++i) {
      auto it = exec_nodes.find(clone_nodes[i]);
      all = it != exec_nodes.end() && it->second != graph_node_id(clone_nodes[i]);
      if (all) ids.insert(it->second);
    }
    Check(all && ids.size() == 7, "instantiate_clones_every_node");
    printf("exec_node_first %llu\n", static_cast<unsigned long long>(exec_nodes[c.first]));
    printf("clone_node_first %llu\n", static_cast<unsigned long long>(graph_node_id(c.first)));
  }
  for (int launch = 1; launch <= 3; ++launch) {
    for (int i = 0; i < kN; ++i) h_in[i] = static_cast<float>(launch * 10000 + i);
    CheckCall(cudaGraphLaunch(exec, s1), "launch");
    CheckCall(cudaStreamSynchronize(s1), "sync");
  }
  Check(state.runs == 3 && state.bad == 0, "host_node_saw_bytes_three_launches");

  // Launch 4: gk_first with grid 256 through the executable graph; an edit of the clone after
  // instantiation (gk_second grid 512) does not reach the executable graph.
  cudaKernelNodeParams k256 = KernelParams(reinterpret_cast<void*>(gk_first), 256, args);
  CheckCall(cudaGraphExecKernelNodeSetParams(exec, c.first, &k256), "exec_set_params");
  Check(cudaGraphExecKernelNodeSetParams(exec, m.first, &k256) == cudaErrorInvalidValue,
        "exec_set_params_foreign_node");
  cudaGetLastError();
  cudaKernelNodeParams k512 = KernelParams(reinterpret_cast<void*>(gk_second), 512, args);
  CheckCall(cudaGraphKernelNodeSetParams(c.second, &k512), "edit_clone_after_instantiate");
  for (int i = 0; i < kN; ++i) h_in[i] = static_cast<float>(40000 + i);
  CheckCall(cudaGraphLaunch(exec, s1), "launch_4");
  CheckCall(cudaStreamSynchronize(s1), "sync_4");

  // cudaGraphExecUpdate with other topologies fails and changes nothing.
  cudaGraphExecUpdateResultInfo info;
  cudaGraph_t more;
  CheckCall(cudaGraphClone(&more, clone), "clone_more");
  cudaGraphNode_t extra;
  CheckCall(cudaGraphAddEmptyNode(&extra, more, nullptr, 0), "add_extra");
  Check(cudaGraphExecUpdate(exec, more, &info) == cudaErrorGraphExecUpdateFailure &&
            info.result == cudaGraphExecUpdateErrorTopologyChanged &&
            info.errorNode == nullptr,
        "update_node_count_changed");
  cudaGetLastError();
  cudaGraph_t retyped;
  CheckCall(cudaGraphClone(&retyped, clone), "clone_retyped");
  cudaGraphNode_t r_host, r_dtoh, r_set_dtoh, r_empty;
  // `retyped` was cloned from `clone`, not from `graph`.
  Check(cudaGraphNodeFindInClone(&r_host, m.host, retyped) == cudaErrorInvalidValue,
        "find_in_clone_of_other_graph");
  cudaGetLastError();
  count = 8;
  CheckCall(cudaGraphGetNodes(retyped, nodes, &count), "retyped_nodes");
  r_dtoh = nodes[4];
  r_set_dtoh = nodes[5];
  r_host = nodes[6];
  CheckCall(cudaGraphDestroyNode(r_host), "retyped_destroy_host");
  cudaGraphNode_t r_deps[] = {r_dtoh, r_set_dtoh};
  CheckCall(cudaGraphAddEmptyNode(&r_empty, retyped, r_deps, 2), "retyped_add_empty");
  Check(cudaGraphExecUpdate(exec, retyped, &info) == cudaErrorGraphExecUpdateFailure &&
            info.result == cudaGraphExecUpdateErrorNodeTypeChanged &&
            info.errorNode == r_empty,
        "update_node_type_changed");
  cudaGetLastError();
  cudaGraph_t rewired;
  CheckCall(cudaGraphClone(&rewired, clone), "clone_rewired");
  count = 8;
  CheckCall(cudaGraphGetNodes(rewired, nodes, &count), "rewired_nodes");
  CheckCall(cudaGraphRemoveDependencies(rewired, &nodes[2], &nodes[3], nullptr, 1),
            "rewired_remove");
  CheckCall(cudaGraphAddDependencies(rewired, &nodes[0], &nodes[3], nullptr, 1), "rewired_add");
  Check(cudaGraphExecUpdate(exec, rewired, &info) == cudaErrorGraphExecUpdateFailure &&
            info.result == cudaGraphExecUpdateErrorTopologyChanged &&
            info.errorNode == nodes[3] && info.errorFromNode == nodes[0],
        "update_dependency_changed");
  cudaGetLastError();

  // Launches 5 and 6: the update takes every parameter from the clone (gk_first 64 again,
  // gk_second 512). Launch 6 goes to s2 right after launch 5: it waits for launch 5.
  CheckCall(cudaGraphExecUpdate(exec, clone, &info), "exec_update");
  Check(info.result == cudaGraphExecUpdateSuccess && info.errorNode == nullptr,
        "exec_update_result");
  for (int i = 0; i < kN; ++i) h_in[i] = static_cast<float>(50000 + i);
  CheckCall(cudaGraphLaunch(exec, s1), "launch_5");
  CheckCall(cudaGraphLaunch(exec, s2), "launch_6");
  CheckCall(cudaStreamSynchronize(s2), "sync_6");
  CheckCall(cudaStreamSynchronize(s1), "sync_5");
  Check(state.runs == 6 && state.bad == 0, "host_node_saw_bytes_six_launches");
  printf("host_node_runs %d\n", state.runs);

  // ---- Child graph and event record node ----------------------------------------------------
  // child: 2D memset (16 two-byte elements x 4 rows, pitch 64) -> gk_child_a -> gk_child_b.
  uint16_t* d_c = nullptr;
  CheckCall(cudaMalloc(&d_c, 64 * 4), "malloc_c");
  CheckCall(cudaMemset(d_c, 0, 64 * 4), "clear_c");
  CheckCall(cudaDeviceSynchronize(), "clear_c_done");  // s2 does not wait for legacy work
  cudaGraph_t child;
  CheckCall(cudaGraphCreate(&child, 0), "child_create");
  cudaGraphNode_t ch_set, ch_a, ch_b;
  cudaMemsetParams set2d = {};
  set2d.dst = d_c;
  set2d.pitch = 64;
  set2d.value = 0xabcd;
  set2d.elementSize = 2;
  set2d.width = 16;
  set2d.height = 4;
  CheckCall(cudaGraphAddMemsetNode(&ch_set, child, nullptr, 0, &set2d), "child_memset");
  cudaKernelNodeParams ka = {};
  ka.func = reinterpret_cast<void*>(gk_child_a);
  ka.gridDim = dim3(3);
  ka.blockDim = dim3(32);
  CheckCall(cudaGraphAddKernelNode(&ch_a, child, &ch_set, 1, &ka), "child_kernel_a");
  cudaKernelNodeParams kb = ka;
  kb.func = reinterpret_cast<void*>(gk_child_b);
  CheckCall(cudaGraphAddKernelNode(&ch_b, child, &ch_a, 1, &kb), "child_kernel_b");
  cudaGraph_t parent;
  CheckCall(cudaGraphCreate(&parent, 0), "parent_create");
  cudaGraphNode_t p_root, p_child, p_record;
  CheckCall(cudaGraphAddEmptyNode(&p_root, parent, nullptr, 0), "parent_root");
  CheckCall(cudaGraphAddChildGraphNode(&p_child, parent, &p_root, 1, child), "add_child");
  cudaEvent_t done;
  CheckCall(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event_done");
  CheckCall(cudaGraphAddEventRecordNode(&p_record, parent, &p_child, 1, done), "add_record");
  // The child was cloned into the node: editing it afterwards changes nothing in `parent`.
  ka.gridDim = dim3(99);
  CheckCall(cudaGraphKernelNodeSetParams(ch_a, &ka), "edit_child_after_add");
  cudaGraph_t owned;
  CheckCall(cudaGraphChildGraphNodeGetGraph(p_child, &owned), "child_get_graph");
  Check(owned != child && CountNodes(owned) == 3, "child_is_a_copy");
  cudaGraphNodeGetType(p_child, &type);
  Check(type == cudaGraphNodeTypeGraph, "type_graph");
  // The child was cloned in: a CLONED event per node of the copy (from the child's nodes), then
  // the CREATED of the child graph node.
  {
    std::lock_guard<std::mutex> lock(g_mu);
    size_t n = g_node_events.size();
    bool ok = n >= 5;
    const void* originals[] = {ch_set, ch_a, ch_b};
    for (int i = 0; ok && i < 3; ++i) {
      const GpusimGraphNodeEvent& ev = g_node_events[n - 5 + i];
      ok = ev.what == GPUSIM_GRAPHNODE_CLONED && ev.graph == owned && ev.original_graph == child &&
           ev.original_node == originals[i];
    }
    const GpusimGraphNodeEvent& added = g_node_events[n - 2];
    ok = ok && added.what == GPUSIM_GRAPHNODE_CREATED && added.node == p_child &&
         added.graph == parent && added.node_type == cudaGraphNodeTypeGraph;
    const GpusimGraphNodeEvent& record = g_node_events[n - 1];
    ok = ok && record.node == p_record && record.node_type == cudaGraphNodeTypeEventRecord;
    Check(ok, "child_graph_cloned_in_events");
  }
  cudaGraphExec_t parent_exec;
  CheckCall(cudaGraphInstantiate(&parent_exec, parent, 0), "instantiate_parent");
  // The executable graph's nodes: the root, the child's three (flattened), the record node.
  {
    std::map<const void*, uint64_t> exec_nodes = ExecNodesOf(parent_exec);
    cudaGraphNode_t owned_nodes[3];
    size_t owned_count = 3;
    cudaGraphGetNodes(owned, owned_nodes, &owned_count);
    bool ok = exec_nodes.size() == 5 && owned_count == 3 && exec_nodes.count(p_root) == 1 &&
              exec_nodes.count(p_record) == 1 && exec_nodes.count(p_child) == 0;
    for (size_t i = 0; ok && i < owned_count; ++i) ok = exec_nodes.count(owned_nodes[i]) == 1;
    Check(ok, "instantiate_flattens_child_graph_nodes");
  }
  CheckCall(cudaGraphLaunch(parent_exec, s2), "launch_parent");
  CheckCall(cudaStreamWaitEvent(s1, done, 0), "wait_record_node");
  gk_after<<<1, 32, 0, s1>>>();
  CheckCall(cudaStreamSynchronize(s1), "sync_after");
  std::vector<uint16_t> c_back(32 * 4);
  CheckCall(cudaMemcpy(c_back.data(), d_c, 64 * 4, cudaMemcpyDeviceToHost), "copy_back_c");
  bool set_ok = true;
  for (int row = 0; row < 4; ++row) {
    for (int i = 0; i < 32; ++i) set_ok &= c_back[row * 32 + i] == (i < 16 ? 0xabcd : 0);
  }
  Check(set_ok, "memset_2d_element_size_2");

  // ---- Event wait node: gk_waiter (graph on s1) after gk_long (s2) --------------------------
  cudaEvent_t long_done;
  CheckCall(cudaEventCreateWithFlags(&long_done, cudaEventDisableTiming), "event_long");
  cudaGraph_t waiting;
  CheckCall(cudaGraphCreate(&waiting, 0), "waiting_create");
  cudaGraphNode_t w_wait, w_kernel;
  CheckCall(cudaGraphAddEventWaitNode(&w_wait, waiting, nullptr, 0, long_done), "add_wait");
  cudaKernelNodeParams kw = {};
  kw.func = reinterpret_cast<void*>(gk_waiter);
  kw.gridDim = dim3(1);
  kw.blockDim = dim3(32);
  CheckCall(cudaGraphAddKernelNode(&w_kernel, waiting, &w_wait, 1, &kw), "add_waiter");
  cudaGraphExec_t waiting_exec;
  CheckCall(cudaGraphInstantiate(&waiting_exec, waiting, 0), "instantiate_waiting");
  gk_long<<<1, 32, 0, s2>>>();
  CheckCall(cudaEventRecord(long_done, s2), "record_long");
  CheckCall(cudaGraphLaunch(waiting_exec, s1), "launch_waiting");
  CheckCall(cudaDeviceSynchronize(), "sync_waiting");

  // ---- A captured graph updated in place (jacobiCudaGraphs) ----------------------------------
  double* d_sum = nullptr;
  double* h_sum = nullptr;
  CheckCall(cudaMalloc(&d_sum, sizeof(double)), "malloc_sum");
  CheckCall(cudaMallocHost(&h_sum, sizeof(double)), "malloc_host_sum");
  cudaGraph_t captured[2];
  for (int i = 0; i < 2; ++i) {
    CheckCall(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), "begin_capture");
    CheckCall(cudaMemsetAsync(d_sum, 0, sizeof(double), s1), "capture_memset");
    gk_captured<<<16 + 32 * i, 128, 0, s1>>>(d_sum);
    CheckCall(cudaMemcpyAsync(h_sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost, s1),
              "capture_memcpy");
    CheckCall(cudaStreamEndCapture(s1, &captured[i]), "end_capture");
  }
  count = 8;
  CheckCall(cudaGraphGetNodes(captured[0], nodes, &count), "captured_nodes");
  Check(count == 3, "captured_three_nodes");
  cudaGraphNode_t captured_kernel = nullptr;
  for (size_t i = 0; i < count; ++i) {
    cudaGraphNodeGetType(nodes[i], &type);
    if (type == cudaGraphNodeTypeKernel) captured_kernel = nodes[i];
  }
  Check(captured_kernel == nodes[1], "captured_kernel_found");
  CheckCall(cudaGraphKernelNodeGetParams(captured_kernel, &got), "captured_get_params");
  Check(got.func == reinterpret_cast<void*>(gk_captured) && got.gridDim.x == 16 &&
            got.blockDim.x == 128,
        "captured_params");
  Check(CountEdges(captured[0]) == 2, "captured_chain_edges");
  count = 2;
  CheckCall(cudaGraphGetRootNodes(captured[0], roots, &count), "captured_roots");
  Check(count == 1 && roots[0] == nodes[0], "captured_root_is_memset");
  cudaGraphExec_t captured_exec;
  CheckCall(cudaGraphInstantiate(&captured_exec, captured[0], 0), "instantiate_captured");
  got.gridDim = dim3(32);
  CheckCall(cudaGraphExecKernelNodeSetParams(captured_exec, captured_kernel, &got),
            "captured_exec_set_params");
  *h_sum = -1.0;
  CheckCall(cudaGraphLaunch(captured_exec, s1), "launch_captured");
  CheckCall(cudaStreamSynchronize(s1), "sync_captured");
  Check(*h_sum == 0.0, "captured_memset_and_copy_ran");
  CheckCall(cudaGraphExecUpdate(captured_exec, captured[1], &info), "captured_update");
  CheckCall(cudaGraphLaunch(captured_exec, s1), "launch_captured_updated");
  CheckCall(cudaStreamSynchronize(s1), "sync_captured_updated");

  // ---- cudaGraphAddNode, enabling nodes, cycles ------------------------------------------------
  cudaGraph_t generic;
  CheckCall(cudaGraphCreate(&generic, 0), "generic_create");
  cudaGraphNodeParams gp = {};
  gp.type = cudaGraphNodeTypeMemset;
  gp.memset.dst = d_b;
  gp.memset.value = 7;
  gp.memset.elementSize = 1;
  gp.memset.width = 64;
  gp.memset.height = 1;
  cudaGraphNode_t g_set, g_kernel;
  CheckCall(cudaGraphAddNode(&g_set, generic, nullptr, nullptr, 0, &gp), "add_node_memset");
  gp = {};
  gp.type = cudaGraphNodeTypeKernel;
  gp.kernel.func = reinterpret_cast<void*>(gk_generic);
  gp.kernel.gridDim = dim3(5);
  gp.kernel.blockDim = dim3(32);
  CheckCall(cudaGraphAddNode(&g_kernel, generic, &g_set, nullptr, 1, &gp), "add_node_kernel");
  cudaGraphNodeGetType(g_kernel, &type);
  Check(type == cudaGraphNodeTypeKernel, "add_node_type");
  CheckCall(cudaGraphDebugDotPrint(generic, "/dev/null", 0), "dot_print");
  // A cycle is refused at instantiation.
  cudaGraphExec_t generic_exec;
  CheckCall(cudaGraphAddDependencies(generic, &g_kernel, &g_set, nullptr, 1), "add_cycle");
  Check(cudaGraphInstantiate(&generic_exec, generic, 0) == cudaErrorInvalidValue,
        "cycle_refused");
  cudaGetLastError();
  CheckCall(cudaGraphRemoveDependencies(generic, &g_kernel, &g_set, nullptr, 1), "undo_cycle");
  CheckCall(cudaGraphInstantiate(&generic_exec, generic, 0), "instantiate_generic");
  unsigned enabled = 7;
  CheckCall(cudaGraphNodeSetEnabled(generic_exec, g_kernel, 0), "disable_kernel");
  CheckCall(cudaGraphNodeGetEnabled(generic_exec, g_kernel, &enabled), "get_enabled");
  Check(enabled == 0, "kernel_disabled");
  CheckCall(cudaGraphLaunch(generic_exec, s1), "launch_generic_disabled");
  CheckCall(cudaGraphNodeSetEnabled(generic_exec, g_kernel, 1), "enable_kernel");
  CheckCall(cudaGraphLaunch(generic_exec, s1), "launch_generic_enabled");
  CheckCall(cudaStreamSynchronize(s1), "sync_generic");
  CheckCall(cudaGraphExecDestroy(generic_exec), "generic_exec_destroy");
  CheckCall(cudaGraphDestroy(generic), "generic_destroy");

  // ---- Capture into a graph built by hand, with updated capture dependencies -----------------
  cudaGraph_t into;
  CheckCall(cudaGraphCreate(&into, 0), "into_create");
  cudaGraphNode_t into_root;
  CheckCall(cudaGraphAddEmptyNode(&into_root, into, nullptr, 0), "into_root");
  CheckCall(cudaStreamBeginCaptureToGraph(s1, into, &into_root, nullptr, 1,
                                          cudaStreamCaptureModeGlobal),
            "begin_capture_to_graph");
  gk_tograph<<<2, 32, 0, s1>>>();
  cudaStreamCaptureStatus capture_status;
  const cudaGraphNode_t* capture_deps = nullptr;
  size_t num_capture_deps = 0;
  CheckCall(cudaStreamGetCaptureInfo(s1, &capture_status, nullptr, nullptr, &capture_deps,
                                     nullptr, &num_capture_deps),
            "capture_info");
  cudaGraphNode_t tograph_kernel = num_capture_deps == 1 ? capture_deps[0] : nullptr;
  cudaGraphNodeType tograph_type = cudaGraphNodeTypeEmpty;
  if (tograph_kernel != nullptr) cudaGraphNodeGetType(tograph_kernel, &tograph_type);
  Check(capture_status == cudaStreamCaptureStatusActive && tograph_type == cudaGraphNodeTypeKernel,
        "capture_info_dependency_is_the_kernel");
  CheckCall(cudaStreamUpdateCaptureDependencies(s1, &into_root, nullptr, 1,
                                                cudaStreamSetCaptureDependencies),
            "update_capture_deps");
  CheckCall(cudaMemsetAsync(d_b, 0, 256, s1), "capture_memset_after_root");
  cudaGraph_t into_out = nullptr;
  CheckCall(cudaStreamEndCapture(s1, &into_out), "end_capture_to_graph");
  Check(into_out == into && CountNodes(into) == 3 && CountEdges(into) == 2,
        "captured_into_the_graph");
  count = 8;
  CheckCall(cudaGraphGetNodes(into, nodes, &count), "into_nodes");
  cudaGraphNode_t into_deps[2];
  size_t num_into_deps = 2;
  CheckCall(cudaGraphNodeGetDependencies(nodes[2], into_deps, nullptr, &num_into_deps),
            "into_memset_deps");
  Check(num_into_deps == 1 && into_deps[0] == into_root, "memset_depends_on_root_only");
  cudaGraphExec_t into_exec;
  CheckCall(cudaGraphInstantiate(&into_exec, into, 0), "instantiate_into");
  CheckCall(cudaGraphLaunch(into_exec, s1), "launch_into");
  CheckCall(cudaStreamSynchronize(s1), "sync_into");
  CheckCall(cudaGraphExecDestroy(into_exec), "into_exec_destroy");
  CheckCall(cudaGraphDestroy(into), "into_destroy");

  // ---- What the observer saw -----------------------------------------------------------------
  if (set_observer != nullptr) set_observer(nullptr, nullptr, nullptr);
  std::map<uint32_t, std::vector<const ApiRec*>> calls;
  std::map<std::string, int> cbid_of;
  for (const ApiRec& a : g_api) {
    calls[a.corr].push_back(&a);
    cbid_of[a.func] = a.cbid;
  }
  bool pairs_ok = true;
  for (auto& kv : calls) {
    pairs_ok &= kv.second.size() == 2 && kv.second[0]->is_exit == 0 &&
                kv.second[1]->is_exit == 1 && kv.second[0]->cbid != 0;
  }
  Check(pairs_ok, "observer_enter_exit_pairs_with_cbids");
  Check(cbid_of["cudaGraphAddKernelNode"] ==
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000 &&
            cbid_of["cudaGraphAddMemcpyNode1D"] ==
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemcpyNode1D_v11010 &&
            cbid_of["cudaGraphGetEdges"] == CUPTI_RUNTIME_TRACE_CBID_cudaGraphGetEdges_v12030 &&
            cbid_of["cudaGraphClone"] == CUPTI_RUNTIME_TRACE_CBID_cudaGraphClone_v10000 &&
            cbid_of["cudaGraphExecKernelNodeSetParams"] ==
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010 &&
            cbid_of["cudaGraphExecUpdate"] ==
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020 &&
            cbid_of["cudaGraphLaunch"] == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        "observer_graph_cbids");
  bool failure_reported = false;
  for (const ApiRec& a : g_api) {
    failure_reported |= a.func == "cudaGraphExecUpdate" && a.is_exit == 1 &&
                        a.ret == cudaErrorGraphExecUpdateFailure;
  }
  Check(failure_reported, "observer_exit_carries_error");
  // Every op of a graph launch carries the launch's correlation id and a node id.
  bool ops_ok = true;
  std::set<uint32_t> launches_seen;
  for (const OpRec& op : g_ops) {
    if (op.graph == 0) continue;
    auto it = calls.find(op.corr);
    ops_ok &= it != calls.end() && it->second[0]->func == "cudaGraphLaunch" && op.node != 0;
    launches_seen.insert(op.corr);
  }
  // 6 main launches, the parent graph, the waiting graph, 2 captured, 2 generic launches, and
  // the graph captured into.
  Check(ops_ok && launches_seen.size() == 13, "observer_graph_ops_correlated");

  // ---- Clean-up ------------------------------------------------------------------------------
  CheckCall(cudaGraphExecDestroy(exec), "exec_destroy");
  Check(cudaGraphLaunch(exec, s1) == cudaErrorInvalidValue, "destroyed_exec_invalid");
  cudaGetLastError();
  CheckCall(cudaGraphExecDestroy(parent_exec), "parent_exec_destroy");
  CheckCall(cudaGraphExecDestroy(waiting_exec), "waiting_exec_destroy");
  CheckCall(cudaGraphExecDestroy(captured_exec), "captured_exec_destroy");
  Check(cudaGraphDestroy(owned) == cudaErrorInvalidValue, "owned_child_not_destroyable");
  cudaGetLastError();
  for (cudaGraph_t g : {graph, clone, more, retyped, rewired, child, parent, waiting,
                        captured[0], captured[1]}) {
    CheckCall(cudaGraphDestroy(g), "graph_destroy");
  }
  Check(cudaGraphNodeGetType(m.first, &type) == cudaErrorInvalidValue,
        "nodes_die_with_their_graph");
  cudaGetLastError();
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_c);
  cudaFree(d_sum);
  cudaFreeHost(h_sum);
  cudaEventDestroy(done);
  cudaEventDestroy(long_done);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  printf("failures %d\n", failures);
  return failures;
}
