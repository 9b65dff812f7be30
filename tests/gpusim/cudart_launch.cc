// CUDA runtime entry points of gpusim's libcudart.so.13 for code: fat-binary registration (the
// calls nvcc's generated host code makes at load time), kernel launches (<<<>>> through
// __cudaPushCallConfiguration / __cudaPopCallConfiguration / __cudaGetKernel /
// __cudaLaunchKernel, and the cudaLaunchKernel* API), host functions, function attributes,
// stream capture and graphs.
//
// The registration and call-configuration functions are internal to nvcc's generated code and
// are not reported to the observer; every other entry point is. A <<<>>> launch is reported as
// CUDA 13's runtime reports it: __cudaLaunchKernel (cbid
// CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, or the _ptsz one), with the kernel's
// mangled name as symbol name. CUDA 13 publishes no params struct for that cbid; gpusim passes
// the call's arguments in cudaLaunchKernel_v7000_params layout (func = the cudaKernel_t handle).
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <cstdlib>
#include <vector>

#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::Kernel;
using gpusim::Op;
using gpusim::Stream;

namespace {

struct CallConfiguration {
  dim3 grid;
  dim3 block;
  size_t shared_mem;
  cudaStream_t stream;
};

std::vector<CallConfiguration>& ConfigStack() {
  thread_local std::vector<CallConfiguration> stack;
  return stack;
}

cudaError_t EnqueueKernel(ApiCall& api, Kernel* k, dim3 grid, dim3 block, size_t shared_mem,
                          cudaStream_t stream, bool pt) {
  if (k == nullptr) return cudaErrorInvalidDeviceFunction;
  uint64_t threads_per_block = static_cast<uint64_t>(block.x) * block.y * block.z;
  uint64_t blocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
  if (threads_per_block == 0 || threads_per_block > 1024 || blocks == 0 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535) {
    return cudaErrorInvalidConfiguration;
  }
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = new Op();
  op->action = Op::kKernel;
  op->report = true;
  op->rec.kind = GPUSIM_OP_KERNEL;
  op->rec.name = k->demangled.c_str();
  op->rec.mangled_name = k->mangled.c_str();
  op->rec.correlation_id = api.corr();
  op->rec.grid[0] = grid.x;
  op->rec.grid[1] = grid.y;
  op->rec.grid[2] = grid.z;
  op->rec.block[0] = block.x;
  op->rec.block[1] = block.y;
  op->rec.block[2] = block.z;
  op->rec.shared_mem = static_cast<uint32_t>(shared_mem);
  op->duration_ns = k->cost.DurationNs(threads_per_block * blocks);
  gpusim::Enqueue(s, op);
  return cudaSuccess;
}

cudaError_t LaunchImpl(const ApiInfo& info, const void* func, dim3 grid, dim3 block,
                       void** args, size_t shared_mem, cudaStream_t stream, bool pt) {
  Kernel* k = gpusim::FindKernel(func);
  // `func` as the caller passed it: a host stub, or a cudaKernel_t handle (__cudaLaunchKernel).
  cudaLaunchKernel_v7000_params params{func, grid, block, args, shared_mem, stream};
  ApiCall api(info, &params, k != nullptr ? k->mangled.c_str() : nullptr);
  return api.Return(EnqueueKernel(api, k, grid, block, shared_mem, stream, pt));
}

cudaError_t LaunchExImpl(const ApiInfo& info, const cudaLaunchConfig_t* config,
                         const void* func, void** args, bool pt) {
  Kernel* k = gpusim::FindKernel(func);
  cudaLaunchKernelExC_v11060_params params{config, func, args};
  ApiCall api(info, &params, k != nullptr ? k->mangled.c_str() : nullptr);
  if (config == nullptr) return api.Return(cudaErrorInvalidValue);
  return api.Return(EnqueueKernel(api, k, config->gridDim, config->blockDim,
                                  config->dynamicSmemBytes, config->stream, pt));
}

cudaError_t HostFnImpl(const ApiInfo& info, cudaStream_t stream, cudaHostFn_t fn,
                       cudaStreamCallback_t callback, void* user_data, bool pt) {
  cudaLaunchHostFunc_v10000_params params{stream, fn, user_data};
  ApiCall api(info, fn != nullptr ? &params : nullptr);
  if (fn == nullptr && callback == nullptr) return api.Return(cudaErrorInvalidValue);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  Op* op = new Op();
  op->action = fn != nullptr ? Op::kHostFn : Op::kStreamCallback;
  op->report = true;
  op->rec.kind = GPUSIM_OP_HOSTFN;
  op->rec.correlation_id = api.corr();
  op->host_fn = fn;
  op->stream_callback = callback;
  op->user_data = user_data;
  op->callback_stream = stream;
  gpusim::Enqueue(s, op);
  return api.Return(cudaSuccess);
}

cudaError_t BeginCaptureImpl(const ApiInfo& info, cudaStream_t stream,
                             cudaStreamCaptureMode mode, bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (s->legacy) return api.Return(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture_graph != nullptr) return api.Return(cudaErrorIllegalState);
  gpusim::Graph* g = gpusim::CreateGraph(false);
  g->capturing_streams.push_back(s);
  s->capture_graph = g;
  s->capture_mode = mode;
  s->capture_origin = true;
  return api.Return(cudaSuccess);
}

cudaError_t EndCaptureImpl(const ApiInfo& info, cudaStream_t stream, cudaGraph_t* graph,
                           bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (graph == nullptr) return api.Return(cudaErrorInvalidValue);
  gpusim::Graph* g;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    g = s->capture_graph;
    if (g == nullptr || !s->capture_origin) return api.Return(cudaErrorIllegalState);
  }
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    streams.swap(g->capturing_streams);
  }
  for (Stream* t : streams) {
    std::lock_guard<std::mutex> lock(t->mu);
    if (t->capture_graph == g) {
      t->capture_graph = nullptr;
      t->capture_origin = false;
    }
  }
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return api.Return(cudaSuccess);
}

cudaError_t CaptureStatusImpl(const ApiInfo& info, cudaStream_t stream,
                              cudaStreamCaptureStatus* status, unsigned long long* id,
                              cudaGraph_t* graph, bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (status == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(s->mu);
  gpusim::Graph* g = s->capture_graph;
  *status = g != nullptr ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id != nullptr && g != nullptr) *id = g->id;
  if (graph != nullptr) *graph = reinterpret_cast<cudaGraph_t>(g);
  return api.Return(cudaSuccess);
}

cudaError_t GraphLaunchImpl(const ApiInfo& info, cudaGraphExec_t exec, cudaStream_t stream,
                            bool pt) {
  cudaGraphLaunch_v10000_params params{exec, stream};
  ApiCall api(info, &params);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(exec);
  if (!gpusim::IsLiveGraph(g, /*exec=*/true)) return api.Return(cudaErrorInvalidValue);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  std::vector<Op> nodes;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    nodes = g->nodes;
  }
  uint64_t now = gpusim::NowNs();
  for (const Op& node : nodes) {
    Op* op = new Op(node);
    op->rec.correlation_id = api.corr();
    op->rec.graph_id = g->id;
    op->rec.queued_ns = now;
    gpusim::Enqueue(s, op);
  }
  return api.Return(cudaSuccess);
}

cudaError_t InstantiateImpl(const ApiInfo& info, cudaGraphExec_t* exec, cudaGraph_t graph) {
  ApiCall api(info);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(graph);
  if (exec == nullptr || !gpusim::IsLiveGraph(g, /*exec=*/false)) {
    return api.Return(cudaErrorInvalidValue);
  }
  gpusim::Graph* e = gpusim::CreateGraph(/*exec=*/true);
  e->id = g->id;  // ops of a launch carry the id of the graph they were instantiated from
  {
    std::lock_guard<std::mutex> lock(g->mu);
    e->nodes = g->nodes;
  }
  *exec = reinterpret_cast<cudaGraphExec_t>(e);
  return api.Return(cudaSuccess);
}

}  // namespace

extern "C" {

// ---- Registration (called by nvcc-generated code at load time; not reported) ---------------

void** __cudaRegisterFatBinary(void* fat_cubin) {
  static void* handle_storage = nullptr;
  (void)fat_cubin;
  return &handle_storage;
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void**) {}

void __cudaRegisterFunction(void**, const char* host_fun, char* device_fun,
                            const char* device_name, int, uint3*, uint3*, dim3*, dim3*, int*) {
  gpusim::RegisterKernel(host_fun, device_name != nullptr ? device_name : device_fun);
}

void __cudaRegisterVar(void**, char* host_var, char*, const char*, int, size_t size, int,
                       int) {
  gpusim::RegisterSymbol(host_var, size);
}

void __cudaRegisterManagedVar(void**, void** host_var_ptr_address, char*, const char*, int,
                              size_t size, int, int) {
  void* p = calloc(1, size == 0 ? 1 : size);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kManaged, 0);
  if (host_var_ptr_address != nullptr) *host_var_ptr_address = p;
}

char __cudaInitModule(void**) { return 1; }

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* func) {
  Kernel* k = gpusim::FindKernel(func);
  if (kernel == nullptr || k == nullptr) return gpusim::SetError(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(k);
  return cudaSuccess;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_mem,
                                     struct CUstream_st* stream) {
  ConfigStack().push_back(CallConfiguration{grid, block, shared_mem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared_mem,
                                       void* stream) {
  std::vector<CallConfiguration>& stack = ConfigStack();
  if (stack.empty()) return gpusim::SetError(cudaErrorMissingConfiguration);
  const CallConfiguration& c = stack.back();
  *grid = c.grid;
  *block = c.block;
  *shared_mem = c.shared_mem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  stack.pop_back();
  return cudaSuccess;
}

// ---- Launches -------------------------------------------------------------------------------

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shared_mem, cudaStream_t stream) {
  static const ApiInfo kInfo("__cudaLaunchKernel");
  return LaunchImpl(kInfo, kernel, grid, block, args, shared_mem, stream, false);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t shared_mem, cudaStream_t stream) {
  static const ApiInfo kInfo("__cudaLaunchKernel_ptsz");
  return LaunchImpl(kInfo, kernel, grid, block, args, shared_mem, stream, true);
}
cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                             size_t shared_mem, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaLaunchKernel");
  return LaunchImpl(kInfo, func, grid, block, args, shared_mem, stream, false);
}
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                  size_t shared_mem, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaLaunchKernel_ptsz");
  return LaunchImpl(kInfo, func, grid, block, args, shared_mem, stream, true);
}
cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args,
                                        size_t shared_mem, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaLaunchCooperativeKernel");
  return LaunchImpl(kInfo, func, grid, block, args, shared_mem, stream, false);
}
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block,
                                             void** args, size_t shared_mem,
                                             cudaStream_t stream) {
  static const ApiInfo kInfo("cudaLaunchCooperativeKernel_ptsz");
  return LaunchImpl(kInfo, func, grid, block, args, shared_mem, stream, true);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                void** args) {
  static const ApiInfo kInfo("cudaLaunchKernelExC");
  return LaunchExImpl(kInfo, config, func, args, false);
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                     void** args) {
  static const ApiInfo kInfo("cudaLaunchKernelExC_ptsz");
  return LaunchExImpl(kInfo, config, func, args, true);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  static const ApiInfo kInfo("cudaLaunchHostFunc");
  return HostFnImpl(kInfo, stream, fn, nullptr, user_data, false);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  static const ApiInfo kInfo("cudaLaunchHostFunc_ptsz");
  return HostFnImpl(kInfo, stream, fn, nullptr, user_data, true);
}
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void* user_data, unsigned int) {
  static const ApiInfo kInfo("cudaStreamAddCallback");
  return HostFnImpl(kInfo, stream, nullptr, callback, user_data, false);
}
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                       void* user_data, unsigned int) {
  static const ApiInfo kInfo("cudaStreamAddCallback_ptsz");
  return HostFnImpl(kInfo, stream, nullptr, callback, user_data, true);
}

// ---- Functions ------------------------------------------------------------------------------

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  static const ApiInfo kInfo("cudaFuncGetName");
  ApiCall api(kInfo);
  Kernel* k = gpusim::FindKernel(func);
  if (name == nullptr) return api.Return(cudaErrorInvalidValue);
  if (k == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  *name = k->mangled.c_str();
  return api.Return(cudaSuccess);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  static const ApiInfo kInfo("cudaFuncGetAttributes");
  ApiCall api(kInfo);
  Kernel* k = gpusim::FindKernel(func);
  if (attr == nullptr) return api.Return(cudaErrorInvalidValue);
  if (k == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  *attr = cudaFuncAttributes();
  attr->maxThreadsPerBlock = 1024;
  attr->numRegs = 32;
  attr->ptxVersion = 80;
  attr->binaryVersion = 80;
  attr->maxDynamicSharedSizeBytes = 48 << 10;
  attr->preferredShmemCarveout = -1;
  return api.Return(cudaSuccess);
}

cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute, int) {
  static const ApiInfo kInfo("cudaFuncSetAttribute");
  ApiCall api(kInfo);
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  return api.Return(cudaSuccess);
}

cudaError_t cudaFuncSetCacheConfig(const void* func, enum cudaFuncCache) {
  static const ApiInfo kInfo("cudaFuncSetCacheConfig");
  ApiCall api(kInfo);
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  return api.Return(cudaSuccess);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* num_blocks,
                                                                   const void* func,
                                                                   int block_size,
                                                                   size_t dynamic_smem,
                                                                   unsigned int) {
  static const ApiInfo kInfo("cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  ApiCall api(kInfo);
  if (num_blocks == nullptr || block_size <= 0 || block_size > 1024) {
    return api.Return(cudaErrorInvalidValue);
  }
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  int n = 2048 / block_size;
  if (n > 32) n = 32;
  if (dynamic_smem > 0) {
    size_t by_smem = (228u << 10) / dynamic_smem;
    if (by_smem < static_cast<size_t>(n)) n = static_cast<int>(by_smem);
  }
  *num_blocks = n;
  return api.Return(cudaSuccess);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, const void* func,
                                                          int block_size,
                                                          size_t dynamic_smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num_blocks, func, block_size,
                                                                dynamic_smem, 0);
}

// ---- Capture and graphs ---------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCapture");
  return BeginCaptureImpl(kInfo, stream, mode, false);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCapture_ptsz");
  return BeginCaptureImpl(kInfo, stream, mode, true);
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  static const ApiInfo kInfo("cudaStreamEndCapture");
  return EndCaptureImpl(kInfo, stream, graph, false);
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  static const ApiInfo kInfo("cudaStreamEndCapture_ptsz");
  return EndCaptureImpl(kInfo, stream, graph, true);
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  static const ApiInfo kInfo("cudaStreamIsCapturing");
  return CaptureStatusImpl(kInfo, stream, status, nullptr, nullptr, false);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus* status) {
  static const ApiInfo kInfo("cudaStreamIsCapturing_ptsz");
  return CaptureStatusImpl(kInfo, stream, status, nullptr, nullptr, true);
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                     size_t* num_deps) {
  static const ApiInfo kInfo("cudaStreamGetCaptureInfo");
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  return CaptureStatusImpl(kInfo, stream, status, id, graph, false);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                          enum cudaStreamCaptureStatus* status,
                                          unsigned long long* id, cudaGraph_t* graph,
                                          const cudaGraphNode_t** deps,
                                          const cudaGraphEdgeData** edges, size_t* num_deps) {
  static const ApiInfo kInfo("cudaStreamGetCaptureInfo_ptsz");
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  return CaptureStatusImpl(kInfo, stream, status, id, graph, true);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  static const ApiInfo kInfo("cudaThreadExchangeStreamCaptureMode");
  ApiCall api(kInfo);
  thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  if (mode == nullptr) return api.Return(cudaErrorInvalidValue);
  cudaStreamCaptureMode old = current;
  current = *mode;
  *mode = old;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int) {
  static const ApiInfo kInfo("cudaGraphCreate");
  ApiCall api(kInfo);
  if (graph == nullptr) return api.Return(cudaErrorInvalidValue);
  *graph = reinterpret_cast<cudaGraph_t>(gpusim::CreateGraph(false));
  return api.Return(cudaSuccess);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  static const ApiInfo kInfo("cudaGraphInstantiate");
  return InstantiateImpl(kInfo, exec, graph);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long) {
  static const ApiInfo kInfo("cudaGraphInstantiateWithFlags");
  return InstantiateImpl(kInfo, exec, graph);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphLaunch");
  return GraphLaunchImpl(kInfo, exec, stream, false);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaGraphLaunch_ptsz");
  return GraphLaunchImpl(kInfo, exec, stream, true);
}
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t) {
  static const ApiInfo kInfo("cudaGraphUpload");
  ApiCall api(kInfo);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(exec);
  return api.Return(gpusim::IsLiveGraph(g, true) ? cudaSuccess : cudaErrorInvalidValue);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  static const ApiInfo kInfo("cudaGraphExecDestroy");
  ApiCall api(kInfo);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(exec);
  if (!gpusim::IsLiveGraph(g, true)) return api.Return(cudaErrorInvalidValue);
  gpusim::DestroyGraph(g);
  return api.Return(cudaSuccess);
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  static const ApiInfo kInfo("cudaGraphDestroy");
  ApiCall api(kInfo);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(graph);
  if (!gpusim::IsLiveGraph(g, false)) return api.Return(cudaErrorInvalidValue);
  gpusim::DestroyGraph(g);
  return api.Return(cudaSuccess);
}

}  // extern "C"
