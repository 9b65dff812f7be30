// CUDA runtime entry points of gpusim's libcudart.so.13: errors, devices, streams and events.
// Memory and copies are in cudart_memory.cc; launches, registration and capture in
// cudart_launch.cc; graphs in cudart_graph.cc. Every entry point reports itself to the observer
// (ApiCall) and records its error as the thread's last.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "tests/gpusim/cudart_unsupported.h"
#include "tests/gpusim/sim_device.h"
#include "tests/gpusim/sim_pool.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::Op;
using gpusim::Stream;

namespace gpusim {

int ReportUnsupported(const char* name, UnsupportedOnce* once) {
  if (!once->reported.exchange(true)) fprintf(stderr, "gpusim: %s is not supported\n", name);
  SetError(cudaErrorNotSupported);
  return cudaErrorNotSupported;
}

}  // namespace gpusim

namespace {

struct ErrorEntry {
  int code;
  const char* name;
};
const ErrorEntry kErrors[] = {
#include "tests/gpusim/cudart_error_table.inc"
};

// cudaGetErrorString's text for the codes programs meet most (NVIDIA's wording).
const char* KnownErrorString(int code) {
  switch (code) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorIllegalState: return "the operation would make the legacy stream depend on "
                                       "a capturing blocking stream";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is "
                                                   "capturing";
    case cudaErrorUnknown: return "unknown error";
    default: return nullptr;
  }
}

const ErrorEntry* FindError(int code) {
  for (const ErrorEntry& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// "cudaErrorLaunchTimeout" -> "launch timeout", computed once per code.
const char* DerivedErrorString(const ErrorEntry& e) {
  static std::mutex mu;
  static std::string* strings = new std::string[sizeof(kErrors) / sizeof(kErrors[0])];
  std::lock_guard<std::mutex> lock(mu);
  std::string& s = strings[&e - kErrors];
  if (s.empty()) {
    const char* p = e.name + strlen("cudaError");
    for (; *p != '\0'; ++p) {
      if (isupper(static_cast<unsigned char>(*p)) && !s.empty()) s.push_back(' ');
      s.push_back(static_cast<char>(tolower(static_cast<unsigned char>(*p))));
    }
  }
  return s.c_str();
}

gpusim::Event* AsEvent(cudaEvent_t e) { return reinterpret_cast<gpusim::Event*>(e); }

// Device limits behind stream attributes (H100's values).
constexpr int kPersistingL2MaxBytes = 30 << 20;
constexpr int kAccessPolicyMaxWindowBytes = 134213632;
constexpr int kMemSyncDomains = 4;

// ---- Implementations shared by the plain and _ptsz entry points --------------------------

cudaError_t StreamSynchronizeImpl(const ApiInfo& info, cudaStream_t stream, bool pt) {
  cudaStreamSynchronize_v3020_params params{stream};
  ApiCall api(info, &params);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture_graph != nullptr) return api.Return(cudaErrorStreamCaptureUnsupported);
  }
  gpusim::SynchronizeStream(s);
  gpusim::ReleaseAfterSynchronize();
  return api.Return(cudaSuccess);
}

cudaError_t StreamQueryImpl(const ApiInfo& info, cudaStream_t stream, bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  return api.Return(gpusim::StreamIdle(s) ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t StreamWaitEventImpl(const ApiInfo& info, cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags, bool pt) {
  cudaStreamWaitEvent_v3020_params params{stream, event, flags};
  ApiCall api(info, &params);
  Stream* s = gpusim::ResolveStream(stream, pt);
  gpusim::Event* e = AsEvent(event);
  if (s == nullptr || !gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  Stream* after = nullptr;
  uint64_t seq = 0;
  gpusim::Graph* captured = nullptr;
  std::vector<gpusim::GraphNode*> captured_nodes;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    after = e->stream;
    seq = e->seq;
    captured = e->capture_graph;
    if (captured != nullptr) captured_nodes = e->capture_nodes;
  }
  if (captured != nullptr) {
    // A stream joins the capture (fork), or a capturing stream gains the nodes captured before
    // the record as dependencies of its next node (join).
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture_graph == nullptr) {
      s->capture_graph = captured;
      s->capture_deps = captured_nodes;
      std::lock_guard<std::mutex> glock(gpusim::GraphMutex());
      captured->capturing_streams.push_back(s);
    } else if (s->capture_graph == captured) {
      for (gpusim::GraphNode* n : captured_nodes) {
        if (std::find(s->capture_deps.begin(), s->capture_deps.end(), n) ==
            s->capture_deps.end()) {
          s->capture_deps.push_back(n);
        }
      }
    }
    return api.Return(cudaSuccess);
  }
  if (after == nullptr || after == s) return api.Return(cudaSuccess);
  Op* op = new Op();
  op->action = Op::kWaitOnly;
  op->rec.correlation_id = api.corr();
  op->waits.emplace_back(after, seq);
  gpusim::Enqueue(s, op);
  return api.Return(cudaSuccess);
}

cudaError_t EventRecordImpl(const ApiInfo& info, cudaEvent_t event, cudaStream_t stream,
                            bool pt) {
  cudaEventRecord_v3020_params params{event, stream};
  ApiCall api(info, &params);
  Stream* s = gpusim::ResolveStream(stream, pt);
  gpusim::Event* e = AsEvent(event);
  if (s == nullptr || !gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  Op* op = new Op();
  op->rec.correlation_id = api.corr();
  gpusim::RecordEvent(s, e, op);
  return api.Return(cudaSuccess);
}

cudaError_t StreamGetImpl(const ApiInfo& info, cudaStream_t stream, bool pt,
                                 unsigned* flags, int* priority, unsigned long long* id,
                                 int* device) {
  ApiCall api(info);
  // Each entry point passes exactly one output pointer: all null means the caller's was null.
  if (flags == nullptr && priority == nullptr && id == nullptr && device == nullptr) {
    return api.Return(cudaErrorInvalidValue);
  }
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (flags != nullptr) *flags = s->flags;
  if (priority != nullptr) *priority = s->priority;
  if (id != nullptr) *id = s->id;
  if (device != nullptr) *device = s->device;
  return api.Return(cudaSuccess);
}

// Whether `v` is a value CUDA accepts for stream attribute `attr` (the ids valid for streams;
// any other id is cudaErrorInvalidValue). The priority is clamped, not refused.
cudaError_t CheckStreamAttribute(cudaLaunchAttributeID attr, const cudaLaunchAttributeValue& v) {
  bool ok = true;
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: {
      const cudaAccessPolicyWindow& w = v.accessPolicyWindow;
      auto valid = [](cudaAccessProperty p) {
        return p == cudaAccessPropertyNormal || p == cudaAccessPropertyStreaming ||
               p == cudaAccessPropertyPersisting;
      };
      ok = w.num_bytes <= static_cast<size_t>(kAccessPolicyMaxWindowBytes) &&
           w.hitRatio >= 0.0f && w.hitRatio <= 1.0f && valid(w.hitProp) && valid(w.missProp) &&
           w.missProp != cudaAccessPropertyPersisting;
      break;
    }
    case cudaLaunchAttributeSynchronizationPolicy:
      ok = v.syncPolicy >= cudaSyncPolicyAuto && v.syncPolicy <= cudaSyncPolicyBlockingSync;
      break;
    case cudaLaunchAttributePriority:
      break;
    case cudaLaunchAttributeMemSyncDomainMap:
      ok = v.memSyncDomainMap.default_ < kMemSyncDomains &&
           v.memSyncDomainMap.remote < kMemSyncDomains;
      break;
    case cudaLaunchAttributeMemSyncDomain:
      ok = v.memSyncDomain == cudaLaunchMemSyncDomainDefault ||
           v.memSyncDomain == cudaLaunchMemSyncDomainRemote;
      break;
    case cudaLaunchAttributeNvlinkUtilCentricScheduling:
      ok = v.nvlinkUtilCentricScheduling <= 1;
      break;
    default:
      ok = false;
      break;
  }
  return ok ? cudaSuccess : cudaErrorInvalidValue;
}

int ClampPriority(int priority) { return priority > 0 ? 0 : (priority < -5 ? -5 : priority); }

// With s->mu held.
void StoreStreamAttribute(Stream* s, cudaLaunchAttributeID attr,
                          const cudaLaunchAttributeValue& v) {
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: s->access_policy = v.accessPolicyWindow; break;
    case cudaLaunchAttributeSynchronizationPolicy: s->sync_policy = v.syncPolicy; break;
    case cudaLaunchAttributePriority: s->priority = ClampPriority(v.priority); break;
    case cudaLaunchAttributeMemSyncDomainMap: s->mem_sync_domain_map = v.memSyncDomainMap; break;
    case cudaLaunchAttributeMemSyncDomain: s->mem_sync_domain = v.memSyncDomain; break;
    case cudaLaunchAttributeNvlinkUtilCentricScheduling:
      s->nvlink_util_centric_scheduling = v.nvlinkUtilCentricScheduling;
      break;
    default:
      break;
  }
}

// With s->mu held.
void LoadStreamAttribute(const Stream* s, cudaLaunchAttributeID attr,
                         cudaLaunchAttributeValue* v) {
  memset(v, 0, sizeof(*v));
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: v->accessPolicyWindow = s->access_policy; break;
    case cudaLaunchAttributeSynchronizationPolicy: v->syncPolicy = s->sync_policy; break;
    case cudaLaunchAttributePriority: v->priority = s->priority; break;
    case cudaLaunchAttributeMemSyncDomainMap: v->memSyncDomainMap = s->mem_sync_domain_map; break;
    case cudaLaunchAttributeMemSyncDomain: v->memSyncDomain = s->mem_sync_domain; break;
    case cudaLaunchAttributeNvlinkUtilCentricScheduling:
      v->nvlinkUtilCentricScheduling = s->nvlink_util_centric_scheduling;
      break;
    default:
      break;
  }
}

constexpr cudaLaunchAttributeID kStreamAttributes[] = {
    cudaLaunchAttributeAccessPolicyWindow, cudaLaunchAttributeSynchronizationPolicy,
    cudaLaunchAttributePriority,           cudaLaunchAttributeMemSyncDomainMap,
    cudaLaunchAttributeMemSyncDomain,      cudaLaunchAttributeNvlinkUtilCentricScheduling};

cudaError_t StreamSetAttributeImpl(const ApiInfo& info, cudaStream_t stream,
                                   cudaLaunchAttributeID attr,
                                   const cudaLaunchAttributeValue* value, bool pt) {
  cudaStreamSetAttribute_v11000_params params{stream, attr, value};
  ApiCall api(info, &params);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (value == nullptr) return api.Return(cudaErrorInvalidValue);
  cudaError_t err = CheckStreamAttribute(attr, *value);
  if (err != cudaSuccess) return api.Return(err);
  std::lock_guard<std::mutex> lock(s->mu);
  StoreStreamAttribute(s, attr, *value);
  return api.Return(cudaSuccess);
}

cudaError_t StreamGetAttributeImpl(const ApiInfo& info, cudaStream_t stream,
                                   cudaLaunchAttributeID attr, cudaLaunchAttributeValue* value,
                                   bool pt) {
  cudaStreamGetAttribute_v11000_params params{stream, attr, value};
  ApiCall api(info, &params);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (value == nullptr ||
      std::find(std::begin(kStreamAttributes), std::end(kStreamAttributes), attr) ==
          std::end(kStreamAttributes)) {
    return api.Return(cudaErrorInvalidValue);
  }
  std::lock_guard<std::mutex> lock(s->mu);
  LoadStreamAttribute(s, attr, value);
  return api.Return(cudaSuccess);
}

// Every stream attribute of `src` onto `dst`; both on one device (CUDA: one context).
cudaError_t StreamCopyAttributesImpl(const ApiInfo& info, cudaStream_t dst, cudaStream_t src,
                                     bool pt) {
  cudaStreamCopyAttributes_v11000_params params{dst, src};
  ApiCall api(info, &params);
  Stream* to = gpusim::ResolveStream(dst, pt);
  Stream* from = gpusim::ResolveStream(src, pt);
  if (to == nullptr || from == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (to->device != from->device) return api.Return(cudaErrorInvalidValue);
  if (to == from) return api.Return(cudaSuccess);
  cudaLaunchAttributeValue values[sizeof(kStreamAttributes) / sizeof(kStreamAttributes[0])];
  {
    std::lock_guard<std::mutex> lock(from->mu);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
      LoadStreamAttribute(from, kStreamAttributes[i], &values[i]);
    }
  }
  std::lock_guard<std::mutex> lock(to->mu);
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
    StoreStreamAttribute(to, kStreamAttributes[i], values[i]);
  }
  return api.Return(cudaSuccess);
}

}  // namespace

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t stream, cudaLaunchAttributeID attr,
                                        const cudaLaunchAttributeValue* value);
cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t stream, cudaLaunchAttributeID attr,
                                        cudaLaunchAttributeValue* value);
cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src);

// ---- Errors ---------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  static const ApiInfo kInfo("cudaGetLastError");
  ApiCall api(kInfo);
  cudaError_t e = gpusim::LastError();
  gpusim::LastError() = cudaSuccess;
  api.Return(cudaSuccess);  // the observer sees success: reading the error is not an error
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  static const ApiInfo kInfo("cudaPeekAtLastError");
  ApiCall api(kInfo);
  cudaError_t e = gpusim::LastError();
  api.Return(cudaSuccess);
  return e;
}

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorEntry* e = FindError(error);
  return e != nullptr ? e->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  const char* known = KnownErrorString(error);
  if (known != nullptr) return known;
  const ErrorEntry* e = FindError(error);
  return e != nullptr ? DerivedErrorString(*e) : "unrecognized error code";
}

// ---- Devices --------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  static const ApiInfo kInfo("cudaGetDeviceCount");
  ApiCall api(kInfo);
  if (count == nullptr) return api.Return(cudaErrorInvalidValue);
  *count = gpusim::DeviceCount();
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetDevice(int* device) {
  static const ApiInfo kInfo("cudaGetDevice");
  ApiCall api(kInfo);
  if (device == nullptr) return api.Return(cudaErrorInvalidValue);
  *device = gpusim::CurrentDevice();
  return api.Return(cudaSuccess);
}

cudaError_t cudaSetDevice(int device) {
  static const ApiInfo kInfo("cudaSetDevice");
  ApiCall api(kInfo);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  gpusim::CurrentDevice() = device;
  return api.Return(cudaSuccess);
}

cudaError_t cudaInitDevice(int device, unsigned int, unsigned int) {
  static const ApiInfo kInfo("cudaInitDevice");
  ApiCall api(kInfo);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  return api.Return(cudaSuccess);
}

cudaError_t cudaSetDeviceFlags(unsigned int) {
  static const ApiInfo kInfo("cudaSetDeviceFlags");
  ApiCall api(kInfo);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  static const ApiInfo kInfo("cudaGetDeviceFlags");
  ApiCall api(kInfo);
  if (flags == nullptr) return api.Return(cudaErrorInvalidValue);
  *flags = cudaDeviceMapHost;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize(void) {
  static const ApiInfo kInfo("cudaDeviceSynchronize");
  ApiCall api(kInfo);
  gpusim::SynchronizeDevice(gpusim::CurrentDevice());
  gpusim::ReleaseAfterSynchronize();
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceReset(void) {
  static const ApiInfo kInfo("cudaDeviceReset");
  ApiCall api(kInfo);
  gpusim::ResetDevice(gpusim::CurrentDevice());
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  static const ApiInfo kInfo("cudaGetDeviceProperties");
  ApiCall api(kInfo);
  if (prop == nullptr) return api.Return(cudaErrorInvalidValue);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof(*prop));
  snprintf(prop->name, sizeof(prop->name), "gpusim H100-class");
  for (int i = 0; i < 16; ++i) prop->uuid.bytes[i] = static_cast<char>(0x40 + i + device);
  prop->totalGlobalMem = gpusim::kDeviceMemoryBytes;
  prop->sharedMemPerBlock = 48 << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 64 << 10;
  prop->major = 9;
  prop->minor = 0;
  prop->textureAlignment = 512;
  prop->texturePitchAlignment = 32;
  // CUDA array limits of compute capability 9.0 (cudart_arrays.cc checks them).
  prop->maxTexture1D = 131072;
  prop->maxTexture1DMipmap = 32768;
  prop->maxTexture2D[0] = 131072;
  prop->maxTexture2D[1] = 65536;
  prop->maxTexture2DMipmap[0] = prop->maxTexture2DMipmap[1] = 32768;
  prop->maxTexture2DGather[0] = prop->maxTexture2DGather[1] = 32768;
  prop->maxTexture3D[0] = prop->maxTexture3D[1] = prop->maxTexture3D[2] = 16384;
  prop->maxTexture3DAlt[0] = prop->maxTexture3DAlt[1] = 8192;
  prop->maxTexture3DAlt[2] = 32768;
  prop->maxTextureCubemap = 32768;
  prop->maxTexture1DLayered[0] = 32768;
  prop->maxTexture1DLayered[1] = 2048;
  prop->maxTexture2DLayered[0] = prop->maxTexture2DLayered[1] = 32768;
  prop->maxTexture2DLayered[2] = 2048;
  prop->maxTextureCubemapLayered[0] = 32768;
  prop->maxTextureCubemapLayered[1] = 2046;
  prop->maxSurface1D = 32768;
  prop->maxSurface2D[0] = 131072;
  prop->maxSurface2D[1] = 65536;
  prop->maxSurface3D[0] = prop->maxSurface3D[1] = prop->maxSurface3D[2] = 16384;
  prop->maxSurface1DLayered[0] = 32768;
  prop->maxSurface1DLayered[1] = 2048;
  prop->maxSurface2DLayered[0] = prop->maxSurface2DLayered[1] = 32768;
  prop->maxSurface2DLayered[2] = 2048;
  prop->maxSurfaceCubemap = 32768;
  prop->maxSurfaceCubemapLayered[0] = 32768;
  prop->maxSurfaceCubemapLayered[1] = 2046;
  prop->multiProcessorCount = 132;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->pciBusID = 0x18 + device;
  prop->asyncEngineCount = 3;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = 5120;
  prop->l2CacheSize = 50 << 20;
  prop->persistingL2CacheMaxSize = kPersistingL2MaxBytes;
  prop->accessPolicyMaxWindowSize = kAccessPolicyMaxWindowBytes;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->streamPrioritiesSupported = 1;
  prop->globalL1CacheSupported = 1;
  prop->localL1CacheSupported = 1;
  prop->sharedMemPerMultiprocessor = 228 << 10;
  prop->regsPerMultiprocessor = 65536;
  prop->managedMemory = 1;
  prop->concurrentManagedAccess = 1;
  prop->computePreemptionSupported = 1;
  prop->cooperativeLaunch = 1;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->reservedSharedMemPerBlock = 1 << 10;
  prop->hostRegisterSupported = 1;
  prop->memoryPoolsSupported = 1;
  prop->clusterLaunch = 1;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  static const ApiInfo kInfo("cudaDeviceGetAttribute");
  ApiCall api(kInfo);
  if (value == nullptr) return api.Return(cudaErrorInvalidValue);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  int v = 0;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrMaxBlockDimX: v = 1024; break;
    case cudaDevAttrMaxBlockDimY: v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: v = 64; break;
    case cudaDevAttrMaxGridDimX: v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: v = 65535; break;
    case cudaDevAttrMaxGridDimZ: v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = 48 << 10; break;
    case cudaDevAttrTotalConstantMemory: v = 64 << 10; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: v = 65536; break;
    case cudaDevAttrMultiProcessorCount: v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: v = 0; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = 2048; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = 228 << 10; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = 227 << 10; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = 65536; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = 32; break;
    case cudaDevAttrL2CacheSize: v = 50 << 20; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = 5120; break;
    case cudaDevAttrPciBusId: v = 0x18 + device; break;
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrCooperativeLaunch:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrStreamPrioritiesSupported:
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrEccEnabled:
      v = 1;
      break;
    case cudaDevAttrAsyncEngineCount: v = 3; break;
    // An H100 SXM's figures (deviceQuery-style programs print them; 0 would divide by zero).
    case cudaDevAttrClockRate: v = 1980000; break;        // kHz
    case cudaDevAttrMemoryClockRate: v = 2619000; break;  // kHz
    case cudaDevAttrMaxPitch: v = 2147483647; break;
    case cudaDevAttrTextureAlignment: v = 512; break;
    case cudaDevAttrTexturePitchAlignment: v = 32; break;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: v = 2; break;
    case cudaDevAttrPciDeviceId: v = 0; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrGpuOverlap:
    case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported:
    case cudaDevAttrClusterLaunch:
    case cudaDevAttrComputePreemptionSupported:
      v = 1;
      break;
    case cudaDevAttrMaxPersistingL2CacheSize: v = kPersistingL2MaxBytes; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: v = kAccessPolicyMaxWindowBytes; break;
    case cudaDevAttrMemSyncDomainCount: v = kMemSyncDomains; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: v = 0; break;  // no IPC pools
    default: v = 0; break;
  }
  *value = v;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  static const ApiInfo kInfo("cudaDeviceGetStreamPriorityRange");
  ApiCall api(kInfo);
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  static const ApiInfo kInfo("cudaDeviceGetLimit");
  ApiCall api(kInfo);
  if (value == nullptr) return api.Return(cudaErrorInvalidValue);
  switch (limit) {
    case cudaLimitStackSize: *value = 1024; break;
    case cudaLimitPrintfFifoSize: *value = 1 << 20; break;
    case cudaLimitMallocHeapSize: *value = 8 << 20; break;
    default: *value = 0; break;
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit, size_t) {
  static const ApiInfo kInfo("cudaDeviceSetLimit");
  ApiCall api(kInfo);
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
  static const ApiInfo kInfo("cudaDeviceGetPCIBusId");
  ApiCall api(kInfo);
  if (pci_bus_id == nullptr || len <= 0) return api.Return(cudaErrorInvalidValue);
  if (device < 0 || device >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  snprintf(pci_bus_id, static_cast<size_t>(len), "0000:%02x:00.0", 0x18 + device);
  return api.Return(cudaSuccess);
}

// The inverse of cudaDeviceGetPCIBusId: "[domain:]bus:device.function" in hex, any case.
cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pci_bus_id) {
  static const ApiInfo kInfo("cudaDeviceGetByPCIBusId");
  ApiCall api(kInfo);
  if (device == nullptr || pci_bus_id == nullptr) return api.Return(cudaErrorInvalidValue);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  int used = 0;
  const bool with_domain =
      sscanf(pci_bus_id, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) == 4 &&
      pci_bus_id[used] == '\0';
  if (!with_domain) {
    domain = 0;
    used = 0;
    if (sscanf(pci_bus_id, "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3 || pci_bus_id[used] != '\0') {
      return api.Return(cudaErrorInvalidValue);
    }
  }
  const int index = int(bus) - 0x18;
  if (domain != 0 || dev != 0 || fn != 0 || index < 0 || index >= gpusim::DeviceCount()) {
    return api.Return(cudaErrorInvalidDevice);
  }
  *device = index;
  return api.Return(cudaSuccess);
}

// Every pair of distinct devices is linked alike (an NVLink-connected node): peer access,
// native atomics and CUDA array access supported, performance rank 0.
cudaError_t cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int src, int dst) {
  static const ApiInfo kInfo("cudaDeviceGetP2PAttribute");
  cudaDeviceGetP2PAttribute_v8000_params params{value, attr, src, dst};
  ApiCall api(kInfo, &params);
  if (value == nullptr) return api.Return(cudaErrorInvalidValue);
  const int n = gpusim::DeviceCount();
  if (src < 0 || src >= n || dst < 0 || dst >= n || src == dst) {
    return api.Return(cudaErrorInvalidDevice);
  }
  switch (attr) {
    case cudaDevP2PAttrPerformanceRank:
      *value = 0;
      break;
    case cudaDevP2PAttrAccessSupported:
    case cudaDevP2PAttrNativeAtomicSupported:
    case cudaDevP2PAttrCudaArrayAccessSupported:
      *value = 1;
      break;
    case cudaDevP2PAttrOnlyPartialNativeAtomicSupported:
      *value = 0;
      break;
    default:
      return api.Return(cudaErrorInvalidValue);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  static const ApiInfo kInfo("cudaDeviceCanAccessPeer");
  ApiCall api(kInfo);
  if (can == nullptr) return api.Return(cudaErrorInvalidValue);
  int n = gpusim::DeviceCount();
  if (device < 0 || device >= n || peer < 0 || peer >= n) {
    return api.Return(cudaErrorInvalidDevice);
  }
  *can = device != peer;
  return api.Return(cudaSuccess);
}

// Peer access from the current device to `peer`, as the runtime tracks it: enabling it twice is
// cudaErrorPeerAccessAlreadyEnabled, disabling it when not enabled cudaErrorPeerAccessNotEnabled,
// a device with itself cudaErrorInvalidDevice.
std::atomic<bool>& PeerEnabled(int from, int to) {
  static std::atomic<bool> enabled[gpusim::kMaxDevices][gpusim::kMaxDevices];
  return enabled[from][to];
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  static const ApiInfo kInfo("cudaDeviceEnablePeerAccess");
  ApiCall api(kInfo);
  const int self = gpusim::CurrentDevice();
  if (peer < 0 || peer >= gpusim::DeviceCount() || peer == self) {
    return api.Return(cudaErrorInvalidDevice);
  }
  if (flags != 0) return api.Return(cudaErrorInvalidValue);
  if (PeerEnabled(self, peer).exchange(true)) {
    return api.Return(cudaErrorPeerAccessAlreadyEnabled);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  static const ApiInfo kInfo("cudaDeviceDisablePeerAccess");
  ApiCall api(kInfo);
  const int self = gpusim::CurrentDevice();
  if (peer < 0 || peer >= gpusim::DeviceCount() || peer == self) {
    return api.Return(cudaErrorInvalidDevice);
  }
  if (!PeerEnabled(self, peer).exchange(false)) return api.Return(cudaErrorPeerAccessNotEnabled);
  return api.Return(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  static const ApiInfo kInfo("cudaRuntimeGetVersion");
  ApiCall api(kInfo);
  if (version == nullptr) return api.Return(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return api.Return(cudaSuccess);
}

cudaError_t cudaDriverGetVersion(int* version) {
  static const ApiInfo kInfo("cudaDriverGetVersion");
  ApiCall api(kInfo);
  if (version == nullptr) return api.Return(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  static const ApiInfo kInfo("cudaMemGetInfo");
  ApiCall api(kInfo);
  int device = gpusim::CurrentDevice();
  size_t used = gpusim::DeviceBytesInUse(device) + gpusim::PoolIdleBytes(device);
  size_t total = gpusim::kDeviceMemoryBytes;
  if (free_bytes != nullptr) *free_bytes = used < total ? total - used : 0;
  if (total_bytes != nullptr) *total_bytes = gpusim::kDeviceMemoryBytes;
  return api.Return(cudaSuccess);
}

cudaError_t cudaProfilerStart(void) {
  static const ApiInfo kInfo("cudaProfilerStart");
  ApiCall api(kInfo);
  return api.Return(cudaSuccess);
}

cudaError_t cudaProfilerStop(void) {
  static const ApiInfo kInfo("cudaProfilerStop");
  ApiCall api(kInfo);
  return api.Return(cudaSuccess);
}

// ---- Streams --------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags,
                                         int priority) {
  static const ApiInfo kInfo("cudaStreamCreateWithPriority");
  ApiCall api(kInfo);
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return api.Return(cudaErrorInvalidValue);
  }
  priority = ClampPriority(priority);  // clamped like CUDA
  *stream = reinterpret_cast<cudaStream_t>(
      gpusim::CreateStream(gpusim::CurrentDevice(), flags, priority));
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamCreateWithFlags");
  ApiCall api(kInfo);
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return api.Return(cudaErrorInvalidValue);
  }
  *stream = reinterpret_cast<cudaStream_t>(
      gpusim::CreateStream(gpusim::CurrentDevice(), flags, 0));
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  static const ApiInfo kInfo("cudaStreamCreate");
  ApiCall api(kInfo);
  if (stream == nullptr) return api.Return(cudaErrorInvalidValue);
  *stream = reinterpret_cast<cudaStream_t>(gpusim::CreateStream(gpusim::CurrentDevice(), 0, 0));
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  static const ApiInfo kInfo("cudaStreamDestroy");
  ApiCall api(kInfo);
  Stream* s = reinterpret_cast<Stream*>(stream);
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
      !gpusim::DestroyStream(s)) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  static const ApiInfo kInfo("cudaStreamSynchronize");
  return StreamSynchronizeImpl(kInfo, stream, false);
}
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  static const ApiInfo kInfo("cudaStreamSynchronize_ptsz");
  return StreamSynchronizeImpl(kInfo, stream, true);
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  static const ApiInfo kInfo("cudaStreamQuery");
  return StreamQueryImpl(kInfo, stream, false);
}
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) {
  static const ApiInfo kInfo("cudaStreamQuery_ptsz");
  return StreamQueryImpl(kInfo, stream, true);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamWaitEvent");
  return StreamWaitEventImpl(kInfo, stream, event, flags, false);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                     unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamWaitEvent_ptsz");
  return StreamWaitEventImpl(kInfo, stream, event, flags, true);
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  static const ApiInfo kInfo("cudaStreamGetFlags");
  return StreamGetImpl(kInfo, stream, false, flags, nullptr, nullptr, nullptr);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int* flags) {
  static const ApiInfo kInfo("cudaStreamGetFlags_ptsz");
  return StreamGetImpl(kInfo, stream, true, flags, nullptr, nullptr, nullptr);
}
cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  static const ApiInfo kInfo("cudaStreamGetPriority");
  return StreamGetImpl(kInfo, stream, false, nullptr, priority, nullptr, nullptr);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t stream, int* priority) {
  static const ApiInfo kInfo("cudaStreamGetPriority_ptsz");
  return StreamGetImpl(kInfo, stream, true, nullptr, priority, nullptr, nullptr);
}
cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  static const ApiInfo kInfo("cudaStreamGetId");
  return StreamGetImpl(kInfo, stream, false, nullptr, nullptr, id, nullptr);
}
cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  static const ApiInfo kInfo("cudaStreamGetId_ptsz");
  return StreamGetImpl(kInfo, stream, true, nullptr, nullptr, id, nullptr);
}
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  static const ApiInfo kInfo("cudaStreamGetDevice");
  return StreamGetImpl(kInfo, stream, false, nullptr, nullptr, nullptr, device);
}
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  static const ApiInfo kInfo("cudaStreamGetDevice_ptsz");
  return StreamGetImpl(kInfo, stream, true, nullptr, nullptr, nullptr, device);
}

// Stream attributes: stored per stream and returned (see Stream in sim_device.h).
cudaError_t cudaStreamSetAttribute(cudaStream_t stream, cudaLaunchAttributeID attr,
                                   const cudaLaunchAttributeValue* value) {
  static const ApiInfo kInfo("cudaStreamSetAttribute");
  return StreamSetAttributeImpl(kInfo, stream, attr, value, false);
}
cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t stream, cudaLaunchAttributeID attr,
                                        const cudaLaunchAttributeValue* value) {
  static const ApiInfo kInfo("cudaStreamSetAttribute_ptsz");
  return StreamSetAttributeImpl(kInfo, stream, attr, value, true);
}
cudaError_t cudaStreamGetAttribute(cudaStream_t stream, cudaLaunchAttributeID attr,
                                   cudaLaunchAttributeValue* value) {
  static const ApiInfo kInfo("cudaStreamGetAttribute");
  return StreamGetAttributeImpl(kInfo, stream, attr, value, false);
}
cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t stream, cudaLaunchAttributeID attr,
                                        cudaLaunchAttributeValue* value) {
  static const ApiInfo kInfo("cudaStreamGetAttribute_ptsz");
  return StreamGetAttributeImpl(kInfo, stream, attr, value, true);
}
cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) {
  static const ApiInfo kInfo("cudaStreamCopyAttributes");
  return StreamCopyAttributesImpl(kInfo, dst, src, false);
}
cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src) {
  static const ApiInfo kInfo("cudaStreamCopyAttributes_ptsz");
  return StreamCopyAttributesImpl(kInfo, dst, src, true);
}

// ---- Events ---------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  static const ApiInfo kInfo("cudaEventCreateWithFlags");
  ApiCall api(kInfo);
  if (event == nullptr) return api.Return(cudaErrorInvalidValue);
  *event = reinterpret_cast<cudaEvent_t>(gpusim::CreateEvent(flags));
  return api.Return(cudaSuccess);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  static const ApiInfo kInfo("cudaEventCreate");
  ApiCall api(kInfo);
  if (event == nullptr) return api.Return(cudaErrorInvalidValue);
  *event = reinterpret_cast<cudaEvent_t>(gpusim::CreateEvent(0));
  return api.Return(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  static const ApiInfo kInfo("cudaEventDestroy");
  ApiCall api(kInfo);
  gpusim::Event* e = AsEvent(event);
  if (!gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  gpusim::DestroyEvent(e);  // the Event object stays: a queued record op may still use it
  return api.Return(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaEventRecord");
  return EventRecordImpl(kInfo, event, stream, false);
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaEventRecord_ptsz");
  return EventRecordImpl(kInfo, event, stream, true);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int) {
  static const ApiInfo kInfo("cudaEventRecordWithFlags");
  return EventRecordImpl(kInfo, event, stream, false);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                          unsigned int) {
  static const ApiInfo kInfo("cudaEventRecordWithFlags_ptsz");
  return EventRecordImpl(kInfo, event, stream, true);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  static const ApiInfo kInfo("cudaEventQuery");
  ApiCall api(kInfo);
  gpusim::Event* e = AsEvent(event);
  if (!gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->stream == nullptr) return api.Return(cudaSuccess);
  return api.Return(e->stream->completed_seq.load() >= e->seq ? cudaSuccess
                                                                : cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  static const ApiInfo kInfo("cudaEventSynchronize");
  cudaEventSynchronize_v3020_params params{event};
  ApiCall api(kInfo, &params);
  gpusim::Event* e = AsEvent(event);
  if (!gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  Stream* s;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    s = e->stream;
    seq = e->seq;
  }
  if (s != nullptr) gpusim::WaitForSeq(s, seq);
  gpusim::ReleaseAfterSynchronize();
  return api.Return(cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  static const ApiInfo kInfo("cudaEventElapsedTime");
  ApiCall api(kInfo);
  gpusim::Event* a = AsEvent(start);
  gpusim::Event* b = AsEvent(end);
  if (ms == nullptr) return api.Return(cudaErrorInvalidValue);
  if (!gpusim::IsLiveEvent(a) || !gpusim::IsLiveEvent(b)) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  uint64_t t[2];
  gpusim::Event* ev[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    std::lock_guard<std::mutex> lock(ev[i]->mu);
    if ((ev[i]->flags & cudaEventDisableTiming) != 0 || ev[i]->stream == nullptr) {
      return api.Return(cudaErrorInvalidResourceHandle);
    }
    if (!ev[i]->timed) return api.Return(cudaErrorNotReady);
    t[i] = ev[i]->time_ns;
  }
  *ms = static_cast<float>((static_cast<double>(t[1]) - static_cast<double>(t[0])) / 1e6);
  return api.Return(cudaSuccess);
}

// ---- Miscellaneous --------------------------------------------------------------------------

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                   enum cudaChannelFormatKind f) {
  static const ApiInfo kInfo("cudaCreateChannelDesc");
  ApiCall api(kInfo);
  api.Return(cudaSuccess);
  struct cudaChannelFormatDesc d;
  d.x = x;
  d.y = y;
  d.z = z;
  d.w = w;
  d.f = f;
  return d;
}

}  // extern "C"
