// CUDA runtime entry points of gpusim's libcudart.so.13 for memory: allocations (device
// memory is host memory, tracked so that cudaFree of an unknown pointer fails and
// cudaMemcpyDefault resolves), copies and sets. Asynchronous ones move their bytes when the
// stream reaches them; synchronous copies wait for completion (cudaMemset, like CUDA's, is
// asynchronous to the host for device memory).
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <cstdlib>
#include <cstring>

#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::Op;
using gpusim::Stream;

namespace {

constexpr size_t kAllocAlignment = 256;

void* AlignedAlloc(size_t size) {
  size_t rounded = (size + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
  void* p = aligned_alloc(kAllocAlignment, rounded == 0 ? kAllocAlignment : rounded);
  if (p != nullptr) memset(p, 0, rounded == 0 ? kAllocAlignment : rounded);
  return p;
}

// Page-locked or managed host memory, which the device accesses directly.
bool IsPinned(const void* p) {
  gpusim::Allocation a;
  return gpusim::FindAllocation(p, nullptr, &a) && a.kind != gpusim::MemKind::kDevice;
}

bool ValidKind(int kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

Op* NewCopyOp(uint32_t corr, void* dst, size_t dpitch, const void* src, size_t spitch,
              size_t width, size_t height, int kind) {
  Op* op = new Op();
  gpusim::InitCopyOp(op, dst, dpitch, src, spitch, width, height, kind);
  op->rec.correlation_id = corr;
  return op;
}

Op* NewSetOp(uint32_t corr, void* dst, size_t pitch, int value, size_t width, size_t height) {
  Op* op = new Op();
  gpusim::InitSetOp(op, dst, pitch, value, 1, width, height);
  op->rec.correlation_id = corr;
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
  Op* op = NewCopyOp(api.corr(), dst, dpitch, src, spitch, width, height, kind);
  // CUDA's documented behaviour with pageable host memory: an async HtoD copy has taken its
  // source bytes (staged) when the call returns; an async DtoH copy returns once complete.
  if (!sync && op->rec.copy_kind == cudaMemcpyHostToDevice && !IsPinned(src)) {
    op->staging.resize(width * height);
    for (size_t row = 0; row < height; ++row) {
      memcpy(op->staging.data() + row * width, static_cast<const char*>(src) + row * spitch,
             width);
    }
  }
  if (op->rec.copy_kind == cudaMemcpyDeviceToHost && !IsPinned(dst)) sync = true;
  uint64_t seq = gpusim::Enqueue(s, op);
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
  // cudaMemset's params are a prefix of cudaMemsetAsync's; 2D sets have no params here.
  cudaMemsetAsync_v3020_params params{dst, value, width, stream};
  ApiCall api(info, height == 1 && pitch == width ? &params : nullptr);
  return api.Return(Set(api, dst, pitch, value, width, height, stream, pt));
}

cudaError_t MallocAsyncImpl(const ApiInfo& info, void** dev_ptr, size_t size,
                            cudaStream_t stream, bool pt) {
  cudaMallocAsync_v11020_params params{dev_ptr, size, stream};
  ApiCall api(info, &params);
  if (dev_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kDevice, s->device);
  *dev_ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t FreeAsyncImpl(const ApiInfo& info, void* dev_ptr, cudaStream_t stream, bool pt) {
  cudaFreeAsync_v11020_params params{dev_ptr, stream};
  ApiCall api(info, &params);
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

}  // namespace

extern "C" {

// ---- Memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  static const ApiInfo kInfo("cudaMalloc");
  cudaMalloc_v3020_params params{dev_ptr, size};
  ApiCall api(kInfo, &params);
  if (dev_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  int device = gpusim::CurrentDevice();
  if (size > gpusim::kDeviceMemoryBytes - gpusim::DeviceBytesInUse(device)) {
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

}  // extern "C"
