// CUDA runtime entry points of gpusim's libcudart.so.13: errors, devices, memory, copies,
// streams and events. Launches, registration and graphs are in cudart_launch.cc. Every entry
// point reports itself to the observer (ApiCall) and records its error as the thread's last.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "tests/gpusim/cudart_unsupported.h"
#include "tests/gpusim/sim_device.h"

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

constexpr size_t kTotalDeviceMemory = 80ull << 30;  // an 80 GB device
constexpr size_t kAllocAlignment = 256;

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

void* AlignedAlloc(size_t size) {
  size_t rounded = (size + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
  void* p = aligned_alloc(kAllocAlignment, rounded == 0 ? kAllocAlignment : rounded);
  if (p != nullptr) memset(p, 0, rounded == 0 ? kAllocAlignment : rounded);
  return p;
}

bool ValidKind(int kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

Op* NewCopyOp(uint32_t corr, void* dst, size_t dpitch, const void* src, size_t spitch,
              size_t width, size_t height, int kind) {
  Op* op = new Op();
  op->action = Op::kCopy;
  op->report = true;
  op->rec.kind = GPUSIM_OP_MEMCPY;
  op->rec.correlation_id = corr;
  op->rec.copy_kind = gpusim::ResolveCopyKind(dst, src, kind);
  op->rec.bytes = static_cast<uint64_t>(width) * height;
  op->dst = dst;
  op->src = src;
  op->dpitch = dpitch;
  op->spitch = spitch;
  op->width = width;
  op->height = height;
  op->duration_ns = gpusim::Costs().CopyNs(op->rec.copy_kind, op->rec.bytes);
  return op;
}

Op* NewSetOp(uint32_t corr, void* dst, size_t pitch, int value, size_t width, size_t height) {
  Op* op = new Op();
  op->action = Op::kSet;
  op->report = true;
  op->rec.kind = GPUSIM_OP_MEMSET;
  op->rec.correlation_id = corr;
  op->rec.bytes = static_cast<uint64_t>(width) * height;
  op->dst = dst;
  op->dpitch = pitch;
  op->width = width;
  op->height = height;
  op->value = value;
  op->duration_ns = gpusim::Costs().MemsetNs(op->rec.bytes);
  return op;
}

// Enqueues a copy on the resolved stream; `sync` waits for it (cudaMemcpy semantics).
cudaError_t Copy(ApiCall& api, void* dst, size_t dpitch, const void* src, size_t spitch,
                 size_t width, size_t height, int kind, cudaStream_t stream, bool per_thread,
                 bool sync) {
  if (!ValidKind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || dpitch < width || spitch < width) {
    return cudaErrorInvalidValue;
  }
  Stream* s = gpusim::ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  uint64_t seq = gpusim::Enqueue(
      s, NewCopyOp(api.corr(), dst, dpitch, src, spitch, width, height, kind));
  if (sync && seq != 0) gpusim::WaitForSeq(s, seq);
  return cudaSuccess;
}

cudaError_t Set(ApiCall& api, void* dst, size_t pitch, int value, size_t width, size_t height,
                cudaStream_t stream, bool per_thread) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || pitch < width) return cudaErrorInvalidValue;
  Stream* s = gpusim::ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  gpusim::Enqueue(s, NewSetOp(api.corr(), dst, pitch, value, width, height));
  return cudaSuccess;
}

gpusim::Event* AsEvent(cudaEvent_t e) { return reinterpret_cast<gpusim::Event*>(e); }

// ---- Implementations shared by the plain and _ptsz / _ptds entry points ---------------------

cudaError_t MemcpyImpl(const ApiInfo& info, void* dst, const void* src, size_t count,
                       cudaMemcpyKind kind, bool pt) {
  cudaMemcpy_v3020_params params{dst, src, count, kind};
  ApiCall api(info, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, nullptr, pt, true));
}

cudaError_t MemcpyAsyncImpl(const ApiInfo& info, void* dst, const void* src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream, bool pt) {
  cudaMemcpyAsync_v3020_params params{dst, src, count, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, stream, pt, false));
}

cudaError_t Memcpy2DImpl(const ApiInfo& info, void* dst, size_t dpitch, const void* src,
                         size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
                         cudaStream_t stream, bool pt, bool sync) {
  ApiCall api(info);
  return api.Return(Copy(api, dst, dpitch, src, spitch, width, height, kind, stream, pt, sync));
}

// The device copy of a __device__ variable is its host shadow (device memory is host memory).
cudaError_t SymbolImpl(const ApiInfo& info, void* dst, const void* src, size_t count,
                       cudaMemcpyKind kind, cudaStream_t stream, bool pt, bool sync) {
  ApiCall api(info);
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, stream, pt, sync));
}

cudaError_t MemsetImpl(const ApiInfo& info, void* dst, size_t pitch, int value, size_t width,
                       size_t height, cudaStream_t stream, bool pt) {
  ApiCall api(info);
  return api.Return(Set(api, dst, pitch, value, width, height, stream, pt));
}

cudaError_t StreamSynchronizeImpl(const ApiInfo& info, cudaStream_t stream, bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture_graph != nullptr) return api.Return(cudaErrorStreamCaptureUnsupported);
  }
  gpusim::SynchronizeStream(s);
  return api.Return(cudaSuccess);
}

cudaError_t StreamQueryImpl(const ApiInfo& info, cudaStream_t stream, bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  return api.Return(gpusim::StreamIdle(s) ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t StreamWaitEventImpl(const ApiInfo& info, cudaStream_t stream, cudaEvent_t event,
                                bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  gpusim::Event* e = AsEvent(event);
  if (s == nullptr || !gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  Stream* after = nullptr;
  uint64_t seq = 0;
  gpusim::Graph* captured = nullptr;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    after = e->stream;
    seq = e->seq;
    captured = e->capture_graph;
  }
  if (captured != nullptr) {  // joins the capture (fork of a captured stream)
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture_graph == nullptr) {
      s->capture_graph = captured;
      std::lock_guard<std::mutex> glock(captured->mu);
      captured->capturing_streams.push_back(s);
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
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  gpusim::Event* e = AsEvent(event);
  if (s == nullptr || !gpusim::IsLiveEvent(e)) return api.Return(cudaErrorInvalidResourceHandle);
  Op* op = new Op();
  op->action = Op::kEventRecord;
  op->report = true;
  op->rec.kind = GPUSIM_OP_EVENT;
  op->rec.correlation_id = api.corr();
  op->event = e;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    op->event_generation = ++e->generation;
    e->timed = false;
    e->capture_graph = nullptr;
  }
  // Holding e->mu across Enqueue could deadlock with the worker; a concurrent query between
  // the two sections sees the previous record, as it would on a real device.
  uint64_t seq = gpusim::Enqueue(s, op);
  if (seq != 0) {
    std::lock_guard<std::mutex> lock(e->mu);
    e->stream = s;
    e->seq = seq;
  }
  return api.Return(cudaSuccess);
}

}  // namespace

extern "C" {

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
  prop->totalGlobalMem = kTotalDeviceMemory;
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
  prop->multiProcessorCount = 132;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->pciBusID = 0x18 + device;
  prop->asyncEngineCount = 3;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = 5120;
  prop->l2CacheSize = 50 << 20;
  prop->persistingL2CacheMaxSize = 30 << 20;
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

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
  static const ApiInfo kInfo("cudaDeviceEnablePeerAccess");
  ApiCall api(kInfo);
  if (peer < 0 || peer >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  static const ApiInfo kInfo("cudaDeviceDisablePeerAccess");
  ApiCall api(kInfo);
  if (peer < 0 || peer >= gpusim::DeviceCount()) return api.Return(cudaErrorInvalidDevice);
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
  size_t used = gpusim::DeviceBytesInUse(gpusim::CurrentDevice());
  if (free_bytes != nullptr) *free_bytes = used < kTotalDeviceMemory ? kTotalDeviceMemory - used : 0;
  if (total_bytes != nullptr) *total_bytes = kTotalDeviceMemory;
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

// ---- Memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  static const ApiInfo kInfo("cudaMalloc");
  cudaMalloc_v3020_params params{dev_ptr, size};
  ApiCall api(kInfo, &params);
  if (dev_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  int device = gpusim::CurrentDevice();
  if (size > kTotalDeviceMemory - gpusim::DeviceBytesInUse(device)) {
    *dev_ptr = nullptr;
    return api.Return(cudaErrorMemoryAllocation);
  }
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kDevice, device);
  *dev_ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaMallocManaged(void** dev_ptr, size_t size, unsigned int) {
  static const ApiInfo kInfo("cudaMallocManaged");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || size == 0) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kManaged, gpusim::CurrentDevice());
  *dev_ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaMallocPitch(void** dev_ptr, size_t* pitch, size_t width, size_t height) {
  static const ApiInfo kInfo("cudaMallocPitch");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || pitch == nullptr) return api.Return(cudaErrorInvalidValue);
  size_t p = (width + 511) / 512 * 512;
  void* mem = AlignedAlloc(p * height);
  if (mem == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(mem, p * height, gpusim::MemKind::kDevice, gpusim::CurrentDevice());
  *dev_ptr = mem;
  *pitch = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaFree(void* dev_ptr) {
  static const ApiInfo kInfo("cudaFree");
  cudaFree_v3020_params params{dev_ptr};
  ApiCall api(kInfo, &params);
  if (dev_ptr == nullptr) return api.Return(cudaSuccess);
  // cudaFree synchronizes the device before releasing memory, as on hardware.
  gpusim::SynchronizeDevice(gpusim::CurrentDevice());
  if (!gpusim::UntrackAllocation(dev_ptr, /*device_kinds=*/true)) {
    return api.Return(cudaErrorInvalidValue);
  }
  free(dev_ptr);
  return api.Return(cudaSuccess);
}

static cudaError_t MallocAsyncImpl(const ApiInfo& info, void** dev_ptr, size_t size,
                                   cudaStream_t stream, bool pt) {
  ApiCall api(info);
  if (dev_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kDevice, s->device);
  *dev_ptr = p;
  return api.Return(cudaSuccess);
}

static cudaError_t FreeAsyncImpl(const ApiInfo& info, void* dev_ptr, cudaStream_t stream,
                                 bool pt) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (dev_ptr == nullptr) return api.Return(cudaSuccess);
  if (!gpusim::UntrackAllocation(dev_ptr, true)) return api.Return(cudaErrorInvalidValue);
  Op* op = new Op();  // released when the stream reaches it
  op->action = Op::kFreeMemory;
  op->dst = dev_ptr;
  op->rec.correlation_id = api.corr();
  gpusim::Enqueue(s, op);
  return api.Return(cudaSuccess);
}

cudaError_t cudaMallocAsync(void** dev_ptr, size_t size, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocAsync");
  return MallocAsyncImpl(kInfo, dev_ptr, size, stream, false);
}
cudaError_t cudaMallocAsync_ptsz(void** dev_ptr, size_t size, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocAsync_ptsz");
  return MallocAsyncImpl(kInfo, dev_ptr, size, stream, true);
}
cudaError_t cudaFreeAsync(void* dev_ptr, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaFreeAsync");
  return FreeAsyncImpl(kInfo, dev_ptr, stream, false);
}
cudaError_t cudaFreeAsync_ptsz(void* dev_ptr, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaFreeAsync_ptsz");
  return FreeAsyncImpl(kInfo, dev_ptr, stream, true);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  static const ApiInfo kInfo("cudaMallocHost");
  ApiCall api(kInfo);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kHost, gpusim::CurrentDevice());
  *ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) {
  static const ApiInfo kInfo("cudaHostAlloc");
  ApiCall api(kInfo);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kHost, gpusim::CurrentDevice());
  *ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaFreeHost(void* ptr) {
  static const ApiInfo kInfo("cudaFreeHost");
  ApiCall api(kInfo);
  if (ptr == nullptr) return api.Return(cudaSuccess);
  gpusim::SynchronizeDevice(gpusim::CurrentDevice());
  if (!gpusim::UntrackAllocation(ptr, /*device_kinds=*/false)) {
    return api.Return(cudaErrorInvalidValue);
  }
  free(ptr);
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int) {
  static const ApiInfo kInfo("cudaHostRegister");
  ApiCall api(kInfo);
  if (ptr == nullptr || size == 0) return api.Return(cudaErrorInvalidValue);
  if (gpusim::FindAllocation(ptr, nullptr, nullptr)) {
    return api.Return(cudaErrorHostMemoryAlreadyRegistered);
  }
  gpusim::TrackAllocation(ptr, size, gpusim::MemKind::kRegistered, gpusim::CurrentDevice());
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostUnregister(void* ptr) {
  static const ApiInfo kInfo("cudaHostUnregister");
  ApiCall api(kInfo);
  gpusim::Allocation a;
  void* base = nullptr;
  if (!gpusim::FindAllocation(ptr, &base, &a) || base != ptr ||
      a.kind != gpusim::MemKind::kRegistered) {
    return api.Return(cudaErrorHostMemoryNotRegistered);
  }
  gpusim::UntrackAllocation(ptr, false);
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostGetDevicePointer(void** dev_ptr, void* host_ptr, unsigned int) {
  static const ApiInfo kInfo("cudaHostGetDevicePointer");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || host_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  *dev_ptr = host_ptr;
  return api.Return(cudaSuccess);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* ptr) {
  static const ApiInfo kInfo("cudaPointerGetAttributes");
  ApiCall api(kInfo);
  if (attr == nullptr) return api.Return(cudaErrorInvalidValue);
  memset(attr, 0, sizeof(*attr));
  gpusim::Allocation a;
  if (!gpusim::FindAllocation(ptr, nullptr, &a)) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    attr->hostPointer = const_cast<void*>(ptr);
    return api.Return(cudaSuccess);
  }
  switch (a.kind) {
    case gpusim::MemKind::kDevice: attr->type = cudaMemoryTypeDevice; break;
    case gpusim::MemKind::kManaged: attr->type = cudaMemoryTypeManaged; break;
    default: attr->type = cudaMemoryTypeHost; break;
  }
  attr->device = a.device;
  attr->devicePointer = const_cast<void*>(ptr);
  if (a.kind != gpusim::MemKind::kDevice) attr->hostPointer = const_cast<void*>(ptr);
  return api.Return(cudaSuccess);
}

// ---- Copies and sets ------------------------------------------------------------------------

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy");
  return MemcpyImpl(kInfo, dst, src, count, kind, false);
}
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy_ptds");
  return MemcpyImpl(kInfo, dst, src, count, kind, true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyAsync");
  return MemcpyAsyncImpl(kInfo, dst, src, count, kind, stream, false);
}
cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyAsync_ptsz");
  return MemcpyAsyncImpl(kInfo, dst, src, count, kind, stream, true);
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2D");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, nullptr, false,
                      true);
}
cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2D_ptds");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, nullptr, true,
                      true);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DAsync");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, stream, false,
                      false);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DAsync_ptsz");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, stream, true,
                      false);
}
cudaError_t cudaMemcpyPeer(void* dst, int, const void* src, int, size_t count) {
  static const ApiInfo kInfo("cudaMemcpyPeer");
  ApiCall api(kInfo);
  return api.Return(Copy(api, dst, count, src, count, count, 1, cudaMemcpyDeviceToDevice,
                         nullptr, false, true));
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int, const void* src, int, size_t count,
                                cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyPeerAsync");
  ApiCall api(kInfo);
  return api.Return(Copy(api, dst, count, src, count, count, 1, cudaMemcpyDeviceToDevice,
                         stream, false, false));
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToSymbol");
  return SymbolImpl(kInfo, static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, nullptr, false,
                    true);
}
cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToSymbol_ptds");
  return SymbolImpl(kInfo, static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, nullptr, true,
                    true);
}
cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbol");
  return SymbolImpl(kInfo, dst, static_cast<const char*>(symbol) + offset, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind, nullptr, false,
                    true);
}
cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count,
                                      size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbol_ptds");
  return SymbolImpl(kInfo, dst, static_cast<const char*>(symbol) + offset, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind, nullptr, true,
                    true);
}
cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind,
                                    cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToSymbolAsync");
  return SymbolImpl(kInfo, static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, stream, false,
                    false);
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src, size_t count,
                                         size_t offset, enum cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToSymbolAsync_ptsz");
  return SymbolImpl(kInfo, static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyHostToDevice : kind, stream, true,
                    false);
}
cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbolAsync");
  return SymbolImpl(kInfo, dst, static_cast<const char*>(symbol) + offset, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind, stream, false,
                    false);
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbolAsync_ptsz");
  return SymbolImpl(kInfo, dst, static_cast<const char*>(symbol) + offset, count,
                    kind == cudaMemcpyDefault ? cudaMemcpyDeviceToHost : kind, stream, true,
                    false);
}

cudaError_t cudaGetSymbolAddress(void** dev_ptr, const void* symbol) {
  static const ApiInfo kInfo("cudaGetSymbolAddress");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || symbol == nullptr) return api.Return(cudaErrorInvalidSymbol);
  *dev_ptr = const_cast<void*>(symbol);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  static const ApiInfo kInfo("cudaGetSymbolSize");
  ApiCall api(kInfo);
  if (size == nullptr || !gpusim::SymbolSize(symbol, size)) {
    return api.Return(cudaErrorInvalidSymbol);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) {
  static const ApiInfo kInfo("cudaMemset");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, nullptr, false);
}
cudaError_t cudaMemset_ptds(void* dev_ptr, int value, size_t count) {
  static const ApiInfo kInfo("cudaMemset_ptds");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, nullptr, true);
}
cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemsetAsync");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, stream, false);
}
cudaError_t cudaMemsetAsync_ptsz(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemsetAsync_ptsz");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, stream, true);
}
cudaError_t cudaMemset2D(void* dev_ptr, size_t pitch, int value, size_t width, size_t height) {
  static const ApiInfo kInfo("cudaMemset2D");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, nullptr, false);
}
cudaError_t cudaMemset2D_ptds(void* dev_ptr, size_t pitch, int value, size_t width,
                              size_t height) {
  static const ApiInfo kInfo("cudaMemset2D_ptds");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, nullptr, true);
}
cudaError_t cudaMemset2DAsync(void* dev_ptr, size_t pitch, int value, size_t width,
                              size_t height, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset2DAsync");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, stream, false);
}
cudaError_t cudaMemset2DAsync_ptsz(void* dev_ptr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset2DAsync_ptsz");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, stream, true);
}

// ---- Streams --------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags,
                                         int priority) {
  static const ApiInfo kInfo("cudaStreamCreateWithPriority");
  ApiCall api(kInfo);
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return api.Return(cudaErrorInvalidValue);
  }
  priority = priority > 0 ? 0 : (priority < -5 ? -5 : priority);  // clamped like CUDA
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
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  static const ApiInfo kInfo("cudaStreamWaitEvent");
  return StreamWaitEventImpl(kInfo, stream, event, false);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  static const ApiInfo kInfo("cudaStreamWaitEvent_ptsz");
  return StreamWaitEventImpl(kInfo, stream, event, true);
}

static cudaError_t StreamGetImpl(const ApiInfo& info, cudaStream_t stream, bool pt,
                                 unsigned* flags, int* priority, unsigned long long* id,
                                 int* device) {
  ApiCall api(info);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  if (flags != nullptr) *flags = s->flags;
  if (priority != nullptr) *priority = s->priority;
  if (id != nullptr) *id = s->id;
  if (device != nullptr) *device = s->device;
  return api.Return(cudaSuccess);
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  static const ApiInfo kInfo("cudaStreamGetFlags");
  if (flags == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, false, flags, nullptr, nullptr, nullptr);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int* flags) {
  static const ApiInfo kInfo("cudaStreamGetFlags_ptsz");
  if (flags == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, true, flags, nullptr, nullptr, nullptr);
}
cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  static const ApiInfo kInfo("cudaStreamGetPriority");
  if (priority == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, false, nullptr, priority, nullptr, nullptr);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t stream, int* priority) {
  static const ApiInfo kInfo("cudaStreamGetPriority_ptsz");
  if (priority == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, true, nullptr, priority, nullptr, nullptr);
}
cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  static const ApiInfo kInfo("cudaStreamGetId");
  if (id == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, false, nullptr, nullptr, id, nullptr);
}
cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  static const ApiInfo kInfo("cudaStreamGetId_ptsz");
  if (id == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, true, nullptr, nullptr, id, nullptr);
}
cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  static const ApiInfo kInfo("cudaStreamGetDevice");
  if (device == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, false, nullptr, nullptr, nullptr, device);
}
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  static const ApiInfo kInfo("cudaStreamGetDevice_ptsz");
  if (device == nullptr) return gpusim::SetError(cudaErrorInvalidValue);
  return StreamGetImpl(kInfo, stream, true, nullptr, nullptr, nullptr, device);
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
  ApiCall api(kInfo);
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
  struct cudaChannelFormatDesc d;
  d.x = x;
  d.y = y;
  d.z = z;
  d.w = w;
  d.f = f;
  return d;
}

}  // extern "C"
