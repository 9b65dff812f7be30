// CUDA runtime entry points of gpusim's libcudart.so.13 for code: fat-binary registration (the
// calls nvcc's generated host code makes at load time), kernel launches (<<<>>> through
// __cudaPushCallConfiguration / __cudaPopCallConfiguration / __cudaGetKernel /
// __cudaLaunchKernel, and the cudaLaunchKernel* API), host functions, function attributes and
// stream capture. Graphs (building, instantiating, launching) are in cudart_graph.cc.
//
// The registration and call-configuration functions are internal to nvcc's generated code and
// are not reported to the observer; every other entry point is. A <<<>>> launch is reported as
// CUDA 13's runtime reports it: __cudaLaunchKernel (cbid
// CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, or the _ptsz one), with the kernel's
// mangled name as symbol name. CUDA 13 publishes no params struct for that cbid; gpusim passes
// the call's arguments in cudaLaunchKernel_v7000_params layout (func = the cudaKernel_t handle).
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
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
  // More dynamic shared memory than the kernel may use (48 KiB unless it opted in with
  // cudaFuncAttributeMaxDynamicSharedMemorySize): refused, as the hardware would.
  if (shared_mem > size_t(k->max_dynamic_shared_bytes.load())) return cudaErrorInvalidValue;
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = new Op();
  gpusim::InitKernelOp(op, k, grid, block, shared_mem);
  op->rec.correlation_id = api.corr();
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

// Checks that `deps` (n handles) are live nodes of `g` (GraphMutex() held) and appends the new
// ones to `out`.
bool AddCaptureDepsLocked(gpusim::Graph* g, const cudaGraphNode_t* deps, size_t n,
                          std::vector<gpusim::GraphNode*>* out) {
  if (n > 0 && deps == nullptr) return false;
  for (size_t i = 0; i < n; ++i) {
    auto* d = reinterpret_cast<gpusim::GraphNode*>(deps[i]);
    if (!gpusim::IsLiveNodeLocked(d) || d->graph != g) return false;
  }
  for (size_t i = 0; i < n; ++i) {
    auto* d = reinterpret_cast<gpusim::GraphNode*>(deps[i]);
    if (std::find(out->begin(), out->end(), d) == out->end()) out->push_back(d);
  }
  return true;
}

// cudaStreamBeginCapture, or, with `to_graph`, cudaStreamBeginCaptureToGraph: the capture adds
// to the graph `into`, its first node depending on `deps` (their edge data is not kept: captured
// edges have default data).
cudaError_t BeginCaptureImpl(const ApiInfo& info, cudaStream_t stream,
                             cudaStreamCaptureMode mode, bool pt, bool to_graph = false,
                             cudaGraph_t into = nullptr, const cudaGraphNode_t* deps = nullptr,
                             size_t num_deps = 0) {
  // The callback parameters (the _ptsz structs have the same layout).
  cudaStreamBeginCapture_v10000_params params{stream, mode};
  cudaStreamBeginCaptureToGraph_v12030_params to_graph_params{stream, into, deps, nullptr,
                                                              num_deps, mode};
  ApiCall api(info, to_graph ? static_cast<const void*>(&to_graph_params) : &params);
  if (to_graph && into == nullptr) return api.Return(cudaErrorInvalidValue);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (s->legacy) return api.Return(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture_graph != nullptr) return api.Return(cudaErrorIllegalState);
  gpusim::Graph* g = reinterpret_cast<gpusim::Graph*>(into);
  std::vector<gpusim::GraphNode*> first_deps;
  if (g == nullptr) g = gpusim::CreateGraph(false);
  {
    std::lock_guard<std::mutex> glock(gpusim::GraphMutex());
    if (into != nullptr && (!gpusim::IsLiveGraphLocked(g, false) ||
                            !AddCaptureDepsLocked(g, deps, num_deps, &first_deps))) {
      return api.Return(cudaErrorInvalidValue);
    }
    g->capturing_streams.push_back(s);
  }
  s->capture_graph = g;
  s->capture_mode = mode;
  s->capture_origin = true;
  s->capture_deps = first_deps;
  return api.Return(cudaSuccess);
}

// cudaStreamAddCaptureDependencies (0) adds `deps` to the stream's capture dependencies,
// cudaStreamSetCaptureDependencies (1) replaces them.
cudaError_t UpdateCaptureDepsImpl(const ApiInfo& info, cudaStream_t stream,
                                  const cudaGraphNode_t* deps, size_t num_deps, unsigned flags,
                                  bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (flags != cudaStreamAddCaptureDependencies && flags != cudaStreamSetCaptureDependencies) {
    return api.Return(cudaErrorInvalidValue);
  }
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture_graph == nullptr) return api.Return(cudaErrorIllegalState);
  std::vector<gpusim::GraphNode*> updated;
  if (flags == cudaStreamAddCaptureDependencies) updated = s->capture_deps;
  std::lock_guard<std::mutex> glock(gpusim::GraphMutex());
  if (!AddCaptureDepsLocked(s->capture_graph, deps, num_deps, &updated)) {
    return api.Return(cudaErrorInvalidValue);
  }
  s->capture_deps = updated;
  return api.Return(cudaSuccess);
}

cudaError_t EndCaptureImpl(const ApiInfo& info, cudaStream_t stream, cudaGraph_t* graph,
                           bool pt) {
  cudaStreamEndCapture_v10000_params params{stream, graph};
  ApiCall api(info, &params);
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
    std::lock_guard<std::mutex> lock(gpusim::GraphMutex());
    streams.swap(g->capturing_streams);
  }
  for (Stream* t : streams) {
    std::lock_guard<std::mutex> lock(t->mu);
    if (t->capture_graph == g) {
      t->capture_graph = nullptr;
      t->capture_origin = false;
      t->capture_deps.clear();
    }
  }
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return api.Return(cudaSuccess);
}

// cudaStreamIsCapturing / cudaStreamGetCaptureInfo. The dependency array returned is the
// stream's own (valid until the next capture on the stream, as CUDA documents); every edge has
// default data.
cudaError_t CaptureStatusImpl(const ApiInfo& info, cudaStream_t stream,
                              cudaStreamCaptureStatus* status, unsigned long long* id,
                              cudaGraph_t* graph, const cudaGraphNode_t** deps,
                              const cudaGraphEdgeData** edges, size_t* num_deps, bool pt) {
  ApiCall api(info);
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (status == nullptr) return api.Return(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(s->mu);
  gpusim::Graph* g = s->capture_graph;
  *status = g != nullptr ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id != nullptr && g != nullptr) *id = g->id;
  if (graph != nullptr) *graph = reinterpret_cast<cudaGraph_t>(g);
  if (g != nullptr) {
    if (deps != nullptr) {
      *deps = reinterpret_cast<const cudaGraphNode_t*>(s->capture_deps.data());
    }
    if (edges != nullptr) {
      thread_local std::vector<cudaGraphEdgeData> default_edges;
      default_edges.assign(s->capture_deps.size(), cudaGraphEdgeData{});
      *edges = default_edges.data();
    }
    if (num_deps != nullptr) *num_deps = s->capture_deps.size();
  }
  return api.Return(cudaSuccess);
}

// The simulated SM (H100-class): shared memory per SM, the opt-in limit per block, the
// runtime's reservation per block, and resident blocks and threads.
constexpr int kSharedPerSm = 228 << 10;
constexpr int kSharedPerBlockOptin = 227 << 10;
constexpr int kReservedSharedPerBlock = 1 << 10;
constexpr int kMaxBlocksPerSm = 32;
constexpr int kMaxThreadsPerSm = 2048;

int BlocksByThreads(int block_size) {
  int n = kMaxThreadsPerSm / block_size;
  return n < kMaxBlocksPerSm ? n : kMaxBlocksPerSm;
}

// Resident blocks per SM, limited by threads and by shared memory (dynamic plus the runtime's
// reservation per block).
int ResidentBlocksPerSm(int block_size, size_t dynamic_smem) {
  size_t n = static_cast<size_t>(BlocksByThreads(block_size));
  size_t by_smem = static_cast<size_t>(kSharedPerSm) / (dynamic_smem + kReservedSharedPerBlock);
  return static_cast<int>(by_smem < n ? by_smem : n);
}

cudaError_t OccupancyImpl(const ApiInfo& info, int* num_blocks, const void* func, int block_size,
                          size_t dynamic_smem) {
  ApiCall api(info);
  if (num_blocks == nullptr || block_size <= 0 || block_size > 1024) {
    return api.Return(cudaErrorInvalidValue);
  }
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  *num_blocks = ResidentBlocksPerSm(block_size, dynamic_smem);
  return api.Return(cudaSuccess);
}

// A cooperative launch needs all its blocks resident at once: more than the device's SMs hold
// is cudaErrorCooperativeLaunchTooLarge (the launch does not happen).
constexpr int kSmCount = 132;
cudaError_t CooperativeImpl(const ApiInfo& info, const void* func, dim3 grid, dim3 block,
                            void** args, size_t shared_mem, cudaStream_t stream, bool pt) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  Kernel* k = gpusim::FindKernel(func);
  if (threads > 0 && threads <= 1024 && k != nullptr &&
      blocks > uint64_t(ResidentBlocksPerSm(int(threads), shared_mem)) * kSmCount) {
    cudaLaunchKernel_v7000_params params{func, grid, block, args, shared_mem, stream};
    ApiCall api(info, &params, k->mangled.c_str());
    return api.Return(cudaErrorCooperativeLaunchTooLarge);
  }
  return LaunchImpl(info, func, grid, block, args, shared_mem, stream, pt);
}

// Thread block clusters (sm_90): the largest portable cluster is 8 blocks; a kernel that set
// cudaFuncAttributeNonPortableClusterSizeAllowed gets 16. A cluster's blocks are resident at
// once, so the device holds (resident blocks per SM x SMs) / cluster size clusters. Neither
// function launches anything.
int ClusterSizeOf(const cudaLaunchConfig_t& config) {
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    if (config.attrs != nullptr && config.attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& d = config.attrs[i].val.clusterDim;
      return int(d.x * d.y * d.z);
    }
  }
  return 0;  // unspecified
}

// Checks the arguments both cluster functions take; sets the kernel and its resident blocks per
// SM with the configuration's block size and dynamic shared memory.
cudaError_t CheckClusterConfig(const void* func, const cudaLaunchConfig_t* config,
                               gpusim::Kernel** kernel, int* per_sm) {
  if (config == nullptr) return cudaErrorInvalidValue;
  *kernel = gpusim::FindKernel(func);
  if (*kernel == nullptr) return cudaErrorInvalidDeviceFunction;
  const uint64_t threads = uint64_t(config->blockDim.x) * config->blockDim.y * config->blockDim.z;
  if (threads == 0 || threads > 1024) return cudaErrorInvalidValue;
  *per_sm = ResidentBlocksPerSm(int(threads), config->dynamicSmemBytes);
  return cudaSuccess;
}

cudaError_t FuncSetAttributeImpl(const ApiInfo& info, const void* func, cudaFuncAttribute attr,
                                 int value) {
  ApiCall api(info);
  Kernel* k = gpusim::FindKernel(func);
  if (k == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || value > kSharedPerBlockOptin) return api.Return(cudaErrorInvalidValue);
      k->max_dynamic_shared_bytes = value;
      break;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      if (value < -1 || value > 100) return api.Return(cudaErrorInvalidValue);
      k->preferred_carveout = value;
      break;
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
      k->non_portable_cluster = value != 0;
      break;
    default:
      if (attr < 0 || attr >= cudaFuncAttributeMax) return api.Return(cudaErrorInvalidValue);
      break;
  }
  return api.Return(cudaSuccess);
}

}  // namespace

extern "C" {

// ---- Registration (called by nvcc-generated code at load time; not reported) ---------------

// Each fat binary is a module: the handle nvcc's code passes back to __cudaRegisterFunction
// leads to the code image the simulated device (compute capability 9.0) would run, whose
// architecture cudaFuncGetAttributes reports (CUB dispatches on it).
void** __cudaRegisterFatBinary(void* fat_cubin) {
  return &gpusim::RegisterModule(fat_cubin)->handle;
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void**) {}

void __cudaRegisterFunction(void** module, const char* host_fun, char* device_fun,
                            const char* device_name, int, uint3*, uint3*, dim3*, dim3*, int*) {
  gpusim::RegisterKernel(host_fun, device_name != nullptr ? device_name : device_fun,
                         gpusim::ModuleOf(module));
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
  return CooperativeImpl(kInfo, func, grid, block, args, shared_mem, stream, false);
}
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block,
                                             void** args, size_t shared_mem,
                                             cudaStream_t stream) {
  static const ApiInfo kInfo("cudaLaunchCooperativeKernel_ptsz");
  return CooperativeImpl(kInfo, func, grid, block, args, shared_mem, stream, true);
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

// The handle of a registered kernel (the Kernel itself, as __cudaGetKernel gives it): accepted by
// the launch, name and attribute functions in place of the host stub.
cudaError_t cudaGetKernel(cudaKernel_t* kernel, const void* entry) {
  static const ApiInfo kInfo("cudaGetKernel");
  ApiCall api(kInfo);
  Kernel* k = gpusim::FindKernel(entry);
  if (kernel == nullptr) return api.Return(cudaErrorInvalidValue);
  if (k == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(k);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t* function, const void* symbol) {
  static const ApiInfo kInfo("cudaGetFuncBySymbol");
  ApiCall api(kInfo);
  Kernel* k = gpusim::FindKernel(symbol);
  if (function == nullptr) return api.Return(cudaErrorInvalidValue);
  if (k == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  *function = reinterpret_cast<cudaFunction_t>(k);
  return api.Return(cudaSuccess);
}

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
  attr->ptxVersion = k->ptx_version;
  attr->binaryVersion = k->binary_version;
  attr->maxDynamicSharedSizeBytes = k->max_dynamic_shared_bytes.load();
  attr->preferredShmemCarveout = k->preferred_carveout.load();
  return api.Return(cudaSuccess);
}

// Dynamic shared memory up to the opt-in limit per block and a carveout of -1 (no preference)
// to 100 percent are stored and read back by cudaFuncGetAttributes; the cluster attributes are
// accepted. Launches are not checked against them.
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  static const ApiInfo kInfo("cudaFuncSetAttribute");
  return FuncSetAttributeImpl(kInfo, func, attr, value);
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
  return OccupancyImpl(kInfo, num_blocks, func, block_size, dynamic_smem);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks, const void* func,
                                                          int block_size,
                                                          size_t dynamic_smem) {
  static const ApiInfo kInfo("cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return OccupancyImpl(kInfo, num_blocks, func, block_size, dynamic_smem);
}

cudaError_t cudaOccupancyMaxPotentialClusterSize(int* clusterSize, const void* func,
                                                 const cudaLaunchConfig_t* launchConfig) {
  static const ApiInfo kInfo("cudaOccupancyMaxPotentialClusterSize");
  cudaOccupancyMaxPotentialClusterSize_v11070_params params{clusterSize, func, launchConfig};
  ApiCall api(kInfo, &params);
  if (clusterSize == nullptr) return api.Return(cudaErrorInvalidValue);
  Kernel* k = nullptr;
  int per_sm = 0;
  if (cudaError_t err = CheckClusterConfig(func, launchConfig, &k, &per_sm); err != cudaSuccess) {
    return api.Return(err);
  }
  *clusterSize = per_sm == 0 ? 0 : k->non_portable_cluster ? 16 : 8;
  return api.Return(cudaSuccess);
}

cudaError_t cudaOccupancyMaxActiveClusters(int* numClusters, const void* func,
                                           const cudaLaunchConfig_t* launchConfig) {
  static const ApiInfo kInfo("cudaOccupancyMaxActiveClusters");
  cudaOccupancyMaxActiveClusters_v11070_params params{numClusters, func, launchConfig};
  ApiCall api(kInfo, &params);
  if (numClusters == nullptr) return api.Return(cudaErrorInvalidValue);
  Kernel* k = nullptr;
  int per_sm = 0;
  if (cudaError_t err = CheckClusterConfig(func, launchConfig, &k, &per_sm); err != cudaSuccess) {
    return api.Return(err);
  }
  // The cluster size comes from the launch configuration. Left unspecified, CUDA takes the
  // kernel's compile-time cluster dimensions (__cluster_dims__), which the simulator cannot read
  // from the fatbinary: it counts clusters of 1 block then, rather than fail a program that is
  // right on hardware.
  int cluster = ClusterSizeOf(*launchConfig);
  if (cluster == 0) cluster = 1;
  if (cluster < 0 || cluster > (k->non_portable_cluster ? 16 : 8)) {
    return api.Return(cudaErrorInvalidClusterSize);
  }
  *numClusters = per_sm * kSmCount / cluster;
  return api.Return(cudaSuccess);
}

// A kernel handle's attribute on one device: the simulated devices are alike, so it is the
// kernel's attribute (cudaFuncSetAttribute's rules).
cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr,
                                            int value, int device) {
  static const ApiInfo kInfo("cudaKernelSetAttributeForDevice");
  if (device < 0 || device >= gpusim::DeviceCount()) {
    ApiCall api(kInfo);
    return api.Return(cudaErrorInvalidDevice);
  }
  return FuncSetAttributeImpl(kInfo, reinterpret_cast<const void*>(kernel), attr, value);
}

// The most dynamic shared memory per block with which `num_blocks` blocks of `block_size`
// threads fit on one SM (0 when that many blocks never fit), within the per-block opt-in limit.
cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamic_smem, const void* func,
                                                      int num_blocks, int block_size) {
  static const ApiInfo kInfo("cudaOccupancyAvailableDynamicSMemPerBlock");
  cudaOccupancyAvailableDynamicSMemPerBlock_v10200_params params{dynamic_smem, func,
                                                                  num_blocks, block_size};
  ApiCall api(kInfo, &params);
  if (dynamic_smem == nullptr || num_blocks <= 0 || block_size <= 0 || block_size > 1024) {
    return api.Return(cudaErrorInvalidValue);
  }
  if (gpusim::FindKernel(func) == nullptr) return api.Return(cudaErrorInvalidDeviceFunction);
  size_t available = 0;
  if (num_blocks <= BlocksByThreads(block_size)) {
    size_t share = static_cast<size_t>(kSharedPerSm) / static_cast<size_t>(num_blocks);
    if (share > static_cast<size_t>(kReservedSharedPerBlock)) {
      available = share - kReservedSharedPerBlock;
    }
    if (available > static_cast<size_t>(kSharedPerBlockOptin)) available = kSharedPerBlockOptin;
  }
  *dynamic_smem = available;
  return api.Return(cudaSuccess);
}

// ---- Capture --------------------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCapture");
  return BeginCaptureImpl(kInfo, stream, mode, false);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCapture_ptsz");
  return BeginCaptureImpl(kInfo, stream, mode, true);
}
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t* deps, const cudaGraphEdgeData*,
                                          size_t num_deps, enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCaptureToGraph");
  return BeginCaptureImpl(kInfo, stream, mode, false, true, graph, deps, num_deps);
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t* deps,
                                               const cudaGraphEdgeData*, size_t num_deps,
                                               enum cudaStreamCaptureMode mode) {
  static const ApiInfo kInfo("cudaStreamBeginCaptureToGraph_ptsz");
  return BeginCaptureImpl(kInfo, stream, mode, true, true, graph, deps, num_deps);
}
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t* deps,
                                                const cudaGraphEdgeData*, size_t num_deps,
                                                unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamUpdateCaptureDependencies");
  return UpdateCaptureDepsImpl(kInfo, stream, deps, num_deps, flags, false);
}
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream,
                                                     cudaGraphNode_t* deps,
                                                     const cudaGraphEdgeData*, size_t num_deps,
                                                     unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamUpdateCaptureDependencies_ptsz");
  return UpdateCaptureDepsImpl(kInfo, stream, deps, num_deps, flags, true);
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
  return CaptureStatusImpl(kInfo, stream, status, nullptr, nullptr, nullptr, nullptr, nullptr,
                           false);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus* status) {
  static const ApiInfo kInfo("cudaStreamIsCapturing_ptsz");
  return CaptureStatusImpl(kInfo, stream, status, nullptr, nullptr, nullptr, nullptr, nullptr,
                           true);
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                     size_t* num_deps) {
  static const ApiInfo kInfo("cudaStreamGetCaptureInfo");
  return CaptureStatusImpl(kInfo, stream, status, id, graph, deps, edges, num_deps, false);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                          enum cudaStreamCaptureStatus* status,
                                          unsigned long long* id, cudaGraph_t* graph,
                                          const cudaGraphNode_t** deps,
                                          const cudaGraphEdgeData** edges, size_t* num_deps) {
  static const ApiInfo kInfo("cudaStreamGetCaptureInfo_ptsz");
  return CaptureStatusImpl(kInfo, stream, status, id, graph, deps, edges, num_deps, true);
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

}  // extern "C"
