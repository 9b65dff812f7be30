// Runtime functions that real programs call for hints and set-up, where the simulator has
// nothing to model: managed-memory advice and prefetch, cache configuration, device choice,
// driver entry points. They validate their arguments like the runtime and otherwise succeed (the
// driver entry points find the simulated driver's memory functions, cudart_driver.cc, and fail
// as documented for every other symbol, see below), so third-party programs that use them run
// on gpusim instead of stopping at cudaErrorNotSupported. Each reports itself to the observer and
// records its error as the thread's last, like every entry point.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include "tests/gpusim/sim_device.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;

namespace {

cudaError_t CheckLocation(const cudaMemLocation& location) {
  if (location.type == cudaMemLocationTypeDevice &&
      (location.id < 0 || location.id >= gpusim::DeviceCount())) {
    return cudaErrorInvalidDevice;
  }
  return cudaSuccess;
}

cudaError_t PrefetchImpl(const ApiInfo& info, const void* ptr, size_t count,
                         cudaMemLocation location, unsigned flags, cudaStream_t stream, bool pt) {
  cudaMemPrefetchAsync_v12020_params params{ptr, count, location, flags, stream};
  ApiCall api(info, &params);
  if (ptr == nullptr && count > 0) return api.Return(cudaErrorInvalidValue);
  cudaError_t err = CheckLocation(location);
  if (err != cudaSuccess) return api.Return(err);
  if (gpusim::ResolveStream(stream, pt) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

cudaError_t AttachImpl(const ApiInfo& info, cudaStream_t stream, void* ptr, size_t length,
                       unsigned flags, bool pt) {
  cudaStreamAttachMemAsync_v6000_params params{stream, ptr, length, flags};
  ApiCall api(info, &params);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  if (gpusim::ResolveStream(stream, pt) == nullptr) {
    return api.Return(cudaErrorInvalidResourceHandle);
  }
  return api.Return(cudaSuccess);
}

// There is no driver library to look symbols up in: the simulated driver's functions
// (gpusim::DriverEntryPoint: cuMemCreate, cuMemAlloc, ... see cudart_driver.cc) are found, with
// cudaSuccess and *driverStatus = cudaDriverEntryPointSuccess, for any version up to the
// runtime's (a version below the one cuda.h's ABI of the symbol needs, e.g. cuMemAlloc's _v2
// from 3.2, gets the same function). cuMemAllocAsync and cuMemFreeAsync come in their
// per-thread-default-stream form (_ptsz) with cudaEnablePerThreadDefaultStream, or with
// cudaEnableDefault through the _ptsz entry points (what a --default-stream per-thread build
// calls). Every other lookup fails with cudaErrorNotSupported, *funcPtr set to NULL and
// *driverStatus to cudaDriverEntryPointSymbolNotFound, which callers that probe optional driver
// features take as "not available" and fall back. Bad arguments are cudaErrorInvalidValue, as
// is a CUDA version above the driver's (ByVersion).
cudaError_t DriverEntryPointImpl(const ApiInfo& info, const void* params, const char* symbol,
                                 void** func, unsigned version, unsigned long long flags,
                                 cudaDriverEntryPointQueryResult* status, bool pt) {
  ApiCall api(info, params, symbol);
  if (symbol == nullptr || func == nullptr ||
      (flags & ~static_cast<unsigned long long>(cudaEnableLegacyStream |
                                                cudaEnablePerThreadDefaultStream)) != 0 ||
      version > CUDART_VERSION) {
    return api.Return(cudaErrorInvalidValue);
  }
  const bool per_thread =
      (flags & cudaEnablePerThreadDefaultStream) != 0 || (flags == cudaEnableDefault && pt);
  *func = gpusim::DriverEntryPoint(symbol, per_thread);
  if (*func != nullptr) {
    if (status != nullptr) *status = cudaDriverEntryPointSuccess;
    return api.Return(cudaSuccess);
  }
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return api.Return(cudaErrorNotSupported);
}

}  // namespace

extern "C" {

// Declared by the header only under per-thread-default-stream builds.
cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream);
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                         unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                  unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus);

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchAsync");
  return PrefetchImpl(kInfo, devPtr, count, location, flags, stream, false);
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemPrefetchAsync_ptsz");
  return PrefetchImpl(kInfo, devPtr, count, location, flags, stream, true);
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                          cudaMemLocation location) {
  static const ApiInfo kInfo("cudaMemAdvise");
  cudaMemAdvise_v12020_params params{devPtr, count, advice, location};
  ApiCall api(kInfo, &params);
  if (devPtr == nullptr && count > 0) return api.Return(cudaErrorInvalidValue);
  return api.Return(CheckLocation(location));
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length,
                                     unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamAttachMemAsync");
  return AttachImpl(kInfo, stream, devPtr, length, flags, false);
}

cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                          unsigned int flags) {
  static const ApiInfo kInfo("cudaStreamAttachMemAsync_ptsz");
  return AttachImpl(kInfo, stream, devPtr, length, flags, true);
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  static const ApiInfo kInfo("cudaDeviceSetCacheConfig");
  cudaDeviceSetCacheConfig_v3020_params params{cacheConfig};
  ApiCall api(kInfo, &params);
  return api.Return(int(cacheConfig) < 0 || int(cacheConfig) > 3 ? cudaErrorInvalidValue
                                                                  : cudaSuccess);
}

cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop) {
  static const ApiInfo kInfo("cudaChooseDevice");
  cudaChooseDevice_v3020_params params{device, prop};
  ApiCall api(kInfo, &params);
  if (device == nullptr || prop == nullptr) return api.Return(cudaErrorInvalidValue);
  *device = 0;
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPoint");
  cudaGetDriverEntryPoint_v11030_params params{symbol, funcPtr, flags, driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, 0, flags, driverStatus, false);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                         unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPoint_ptsz");
  cudaGetDriverEntryPoint_v11030_params params{symbol, funcPtr, flags, driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, 0, flags, driverStatus, true);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPointByVersion");
  cudaGetDriverEntryPointByVersion_v12050_params params{symbol, funcPtr, cudaVersion, flags,
                                                        driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, cudaVersion, flags, driverStatus,
                              false);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                  unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
  static const ApiInfo kInfo("cudaGetDriverEntryPointByVersion_ptsz");
  cudaGetDriverEntryPointByVersion_v12050_params params{symbol, funcPtr, cudaVersion, flags,
                                                        driverStatus};
  return DriverEntryPointImpl(kInfo, &params, symbol, funcPtr, cudaVersion, flags, driverStatus,
                              true);
}

}  // extern "C"
