// Runtime functions that real programs call for hints and pool set-up, where the simulator has
// nothing to model: managed-memory advice and prefetch, cache configuration, device choice, the
// default memory pool. They validate their arguments like the runtime and otherwise succeed, so
// third-party programs that use them run on gpusim instead of stopping at cudaErrorNotSupported.
#include <cuda_runtime_api.h>

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream);
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream);

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  (void)location;
  (void)flags;
  (void)stream;
  return devPtr == nullptr && count > 0 ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream) {
  return cudaMemPrefetchAsync(devPtr, count, location, flags, stream);
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                          cudaMemLocation location) {
  (void)advice;
  (void)location;
  return devPtr == nullptr && count > 0 ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length,
                                     unsigned int flags) {
  (void)stream;
  (void)length;
  (void)flags;
  return devPtr == nullptr ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags) {
  return cudaStreamAttachMemAsync(stream, devPtr, length, flags);
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  return int(cacheConfig) < 0 || int(cacheConfig) > 3 ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop) {
  if (device == nullptr || prop == nullptr) return cudaErrorInvalidValue;
  *device = 0;
  return cudaSuccess;
}

namespace {
struct SimPool {
  int device;
};
SimPool g_default_pools[16];
}  // namespace

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  int count = 0;
  if (memPool == nullptr || cudaGetDeviceCount(&count) != cudaSuccess || device < 0 ||
      device >= count || device >= 16) {
    return cudaErrorInvalidValue;
  }
  g_default_pools[device].device = device;
  *memPool = reinterpret_cast<cudaMemPool_t>(&g_default_pools[device]);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  (void)attr;
  return memPool == nullptr || value == nullptr ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  if (memPool == nullptr) return cudaErrorInvalidValue;
  return cudaMallocAsync(ptr, size, stream);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream) {
  return cudaMallocFromPoolAsync(ptr, size, memPool, stream);
}

}  // extern "C"
