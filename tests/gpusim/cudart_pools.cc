// CUDA runtime entry points of gpusim's libcudart.so.13 for the stream-ordered allocator:
// cudaMallocAsync (from the current pool of the stream's device), cudaMallocFromPoolAsync,
// cudaFreeAsync, and memory pools: create, destroy, default and current pools (per device, and
// per location and allocation type), attributes, access, trim. The pools' behaviour is
// described in sim_pool.h. IPC (export and import of pools and pointers) is not simulated: those
// functions are the generated stubs.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include "tests/gpusim/sim_device.h"
#include "tests/gpusim/sim_pool.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::MemPool;
using gpusim::Stream;

namespace {

MemPool* AsPool(cudaMemPool_t pool) { return reinterpret_cast<MemPool*>(pool); }
cudaMemPool_t Handle(MemPool* pool) { return reinterpret_cast<cudaMemPool_t>(pool); }

bool ValidDevice(int device) { return device >= 0 && device < gpusim::DeviceCount(); }

cudaMemLocation DeviceLocation(int device) {
  cudaMemLocation location;
  location.type = cudaMemLocationTypeDevice;
  location.id = device;
  return location;
}

// cudaMallocAsync (pool == nullptr: the current pool of the stream's device) and
// cudaMallocFromPoolAsync.
cudaError_t MallocImpl(const ApiInfo& info, void** ptr, size_t size, bool from_pool,
                       cudaMemPool_t pool, cudaStream_t stream, bool pt) {
  cudaMallocFromPoolAsync_v11020_params pool_params{ptr, size, pool, stream};
  cudaMallocAsync_v11020_params params{ptr, size, stream};
  ApiCall api(info, from_pool ? static_cast<const void*>(&pool_params) : &params);
  if (ptr == nullptr || (from_pool && pool == nullptr)) {
    return api.Return(cudaErrorInvalidValue);
  }
  if (!from_pool) return api.Return(gpusim::MallocAsyncOn(size, stream, pt, ptr));
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return api.Return(cudaErrorInvalidResourceHandle);
  return api.Return(gpusim::PoolAllocate(AsPool(pool), size, s, ptr));
}

// cudaFreeAsync: a pool allocation goes back to its pool; memory from cudaMalloc is freed when
// the stream reaches the free.
cudaError_t FreeImpl(const ApiInfo& info, void* ptr, cudaStream_t stream, bool pt) {
  cudaFreeAsync_v11020_params params{ptr, stream};
  ApiCall api(info, &params);
  return api.Return(gpusim::FreeAsyncOn(ptr, stream, pt, api.corr()));
}

}  // namespace

namespace gpusim {

cudaError_t MallocAsyncOn(size_t size, cudaStream_t stream, bool per_thread, void** out) {
  Stream* s = ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  return PoolAllocate(CurrentDevicePool(s->device), size, s, out);
}

cudaError_t FreeAsyncOn(void* p, cudaStream_t stream, bool per_thread, uint32_t corr) {
  Stream* s = ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (p == nullptr) return cudaSuccess;
  if (PoolFreeAsync(p, s, corr)) return cudaSuccess;
  if (!UntrackAllocation(p, true)) return cudaErrorInvalidValue;
  Op* op = new Op();
  op->action = Op::kFreeMemory;
  op->dst = p;
  op->rec.correlation_id = corr;
  Enqueue(s, op);
  return cudaSuccess;
}

}  // namespace gpusim

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaMallocAsync_ptsz(void** ptr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* ptr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream);

// ---- Allocation -----------------------------------------------------------------------------

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocAsync");
  return MallocImpl(kInfo, ptr, size, false, nullptr, stream, false);
}
cudaError_t cudaMallocAsync_ptsz(void** ptr, size_t size, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocAsync_ptsz");
  return MallocImpl(kInfo, ptr, size, false, nullptr, stream, true);
}
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocFromPoolAsync");
  return MallocImpl(kInfo, ptr, size, true, pool, stream, false);
}
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMallocFromPoolAsync_ptsz");
  return MallocImpl(kInfo, ptr, size, true, pool, stream, true);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaFreeAsync");
  return FreeImpl(kInfo, ptr, stream, false);
}
cudaError_t cudaFreeAsync_ptsz(void* ptr, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaFreeAsync_ptsz");
  return FreeImpl(kInfo, ptr, stream, true);
}

// ---- Default and current pools --------------------------------------------------------------

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  static const ApiInfo kInfo("cudaDeviceGetDefaultMemPool");
  cudaDeviceGetDefaultMemPool_v11020_params params{pool, device};
  ApiCall api(kInfo, &params);
  if (pool == nullptr) return api.Return(cudaErrorInvalidValue);
  if (!ValidDevice(device)) return api.Return(cudaErrorInvalidDevice);
  *pool = Handle(gpusim::DefaultPool(cudaMemAllocationTypePinned, DeviceLocation(device)));
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  static const ApiInfo kInfo("cudaDeviceGetMemPool");
  cudaDeviceGetMemPool_v11020_params params{pool, device};
  ApiCall api(kInfo, &params);
  if (pool == nullptr) return api.Return(cudaErrorInvalidValue);
  if (!ValidDevice(device)) return api.Return(cudaErrorInvalidDevice);
  *pool = Handle(gpusim::CurrentDevicePool(device));
  return api.Return(cudaSuccess);
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  static const ApiInfo kInfo("cudaDeviceSetMemPool");
  cudaDeviceSetMemPool_v11020_params params{device, pool};
  ApiCall api(kInfo, &params);
  if (!ValidDevice(device)) return api.Return(cudaErrorInvalidDevice);
  return api.Return(gpusim::SetCurrentPool(cudaMemAllocationTypePinned, DeviceLocation(device),
                                           AsPool(pool)));
}

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* pool, struct cudaMemLocation* location,
                                     enum cudaMemAllocationType type) {
  static const ApiInfo kInfo("cudaMemGetDefaultMemPool");
  cudaMemGetDefaultMemPool_v13000_params params{pool, location, type};
  ApiCall api(kInfo, &params);
  if (pool == nullptr || location == nullptr) return api.Return(cudaErrorInvalidValue);
  MemPool* found = gpusim::DefaultPool(type, *location);
  if (found == nullptr) return api.Return(cudaErrorInvalidValue);
  *pool = Handle(found);
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t* pool, struct cudaMemLocation* location,
                              enum cudaMemAllocationType type) {
  static const ApiInfo kInfo("cudaMemGetMemPool");
  cudaMemGetMemPool_v13000_params params{pool, location, type};
  ApiCall api(kInfo, &params);
  if (pool == nullptr || location == nullptr) return api.Return(cudaErrorInvalidValue);
  MemPool* found = gpusim::CurrentPool(type, *location);
  if (found == nullptr) return api.Return(cudaErrorInvalidValue);
  *pool = Handle(found);
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemSetMemPool(struct cudaMemLocation* location, enum cudaMemAllocationType type,
                              cudaMemPool_t pool) {
  static const ApiInfo kInfo("cudaMemSetMemPool");
  cudaMemSetMemPool_v13000_params params{location, type, pool};
  ApiCall api(kInfo, &params);
  if (location == nullptr) return api.Return(cudaErrorInvalidValue);
  return api.Return(gpusim::SetCurrentPool(type, *location, AsPool(pool)));
}

// ---- Pools ----------------------------------------------------------------------------------

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const struct cudaMemPoolProps* props) {
  static const ApiInfo kInfo("cudaMemPoolCreate");
  cudaMemPoolCreate_v11020_params params{pool, props};
  ApiCall api(kInfo, &params);
  if (pool == nullptr || props == nullptr) return api.Return(cudaErrorInvalidValue);
  MemPool* created = nullptr;
  cudaError_t err = gpusim::CreatePool(*props, &created);
  if (err == cudaSuccess) *pool = Handle(created);
  return api.Return(err);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  static const ApiInfo kInfo("cudaMemPoolDestroy");
  cudaMemPoolDestroy_v11020_params params{pool};
  ApiCall api(kInfo, &params);
  return api.Return(gpusim::DestroyPool(AsPool(pool)));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  static const ApiInfo kInfo("cudaMemPoolSetAttribute");
  cudaMemPoolSetAttribute_v11020_params params{pool, attr, value};
  ApiCall api(kInfo, &params);
  return api.Return(gpusim::SetPoolAttribute(AsPool(pool), attr, value));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  static const ApiInfo kInfo("cudaMemPoolGetAttribute");
  cudaMemPoolGetAttribute_v11020_params params{pool, attr, value};
  ApiCall api(kInfo, &params);
  return api.Return(gpusim::GetPoolAttribute(AsPool(pool), attr, value));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t min_bytes_to_keep) {
  static const ApiInfo kInfo("cudaMemPoolTrimTo");
  cudaMemPoolTrimTo_v11020_params params{pool, min_bytes_to_keep};
  ApiCall api(kInfo, &params);
  if (!gpusim::IsLivePool(AsPool(pool))) return api.Return(cudaErrorInvalidValue);
  gpusim::TrimPool(AsPool(pool), min_bytes_to_keep);
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc* descs,
                                 size_t count) {
  static const ApiInfo kInfo("cudaMemPoolSetAccess");
  cudaMemPoolSetAccess_v11020_params params{pool, descs, count};
  ApiCall api(kInfo, &params);
  return api.Return(gpusim::SetPoolAccess(AsPool(pool), descs, count));
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags* flags, cudaMemPool_t pool,
                                 struct cudaMemLocation* location) {
  static const ApiInfo kInfo("cudaMemPoolGetAccess");
  cudaMemPoolGetAccess_v11020_params params{flags, pool, location};
  ApiCall api(kInfo, &params);
  if (location == nullptr) return api.Return(cudaErrorInvalidValue);
  return api.Return(gpusim::GetPoolAccess(AsPool(pool), *location, flags));
}

}  // extern "C"
