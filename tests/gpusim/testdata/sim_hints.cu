// Hints and set-up that real programs use (managed memory advice/prefetch and the range
// attributes they leave, cache and shared memory config, device choice, the default memory pool,
// peer attributes, PCI bus ids, cluster occupancy, texture and surface objects) succeed on
// gpusim, and bad arguments get the runtime's error codes. Prints one line per check; exits
// non-zero on the first unexpected result. Run with GPUSIM_DEVICES=2.
#include <cstdio>
#include <cstring>

// The shared memory bank functions are deprecated, not gone: programs still call them.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

__global__ void coop_kernel(int* p) {}

#define EXPECT(call, want)                                                              \
  do {                                                                                  \
    cudaError_t got_ = (call);                                                          \
    if (got_ != (want)) {                                                               \
      printf("FAIL %s: %s (want %s)\n", #call, cudaGetErrorName(got_), cudaGetErrorName(want)); \
      return 1;                                                                         \
    }                                                                                   \
    printf("ok %s\n", #call);                                                           \
  } while (0)

int main() {
  float* m = nullptr;
  EXPECT(cudaMallocManaged(&m, 1 << 20), cudaSuccess);
  cudaMemLocation loc;
  memset(&loc, 0, sizeof(loc));
  loc.type = cudaMemLocationTypeDevice;
  loc.id = 0;
  EXPECT(cudaMemAdvise(m, 1 << 20, cudaMemAdviseSetReadMostly, loc), cudaSuccess);
  EXPECT(cudaMemPrefetchAsync(m, 1 << 20, loc, 0, 0), cudaSuccess);
  EXPECT(cudaMemPrefetchAsync(nullptr, 16, loc, 0, 0), cudaErrorInvalidValue);
  EXPECT(cudaStreamAttachMemAsync(0, m, 0, cudaMemAttachGlobal), cudaSuccess);
  EXPECT(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1), cudaSuccess);
  cudaDeviceProp prop;
  memset(&prop, 0, sizeof(prop));
  int dev = -1;
  EXPECT(cudaChooseDevice(&dev, &prop), cudaSuccess);
  if (dev != 0) return 1;
  cudaMemPool_t pool = nullptr;
  EXPECT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  EXPECT(cudaDeviceGetDefaultMemPool(&pool, 99), cudaErrorInvalidDevice);
  unsigned long long threshold = ~0ull;
  EXPECT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  void* p = nullptr;  // freed below; only its address is used after
  EXPECT(cudaMallocFromPoolAsync(&p, 4096, pool, 0), cudaSuccess);
  EXPECT(cudaMemsetAsync(p, 7, 4096, 0), cudaSuccess);
  EXPECT(cudaFreeAsync(p, 0), cudaSuccess);
  EXPECT(cudaDeviceSynchronize(), cudaSuccess);
  // Attributes deviceQuery-style programs divide by.
  int clock_khz = 0, mem_clock_khz = 0, sms = 0;
  EXPECT(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), cudaSuccess);
  EXPECT(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0), cudaSuccess);
  EXPECT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (clock_khz <= 0 || mem_clock_khz <= 0 || sms <= 0) {
    printf("FAIL clock %d kHz, memory clock %d kHz, %d SMs\n", clock_khz, mem_clock_khz, sms);
    return 1;
  }
  // Kernel handles from the symbol, usable where the host stub is.
  cudaFunction_t fn = nullptr;
  cudaKernel_t kernel = nullptr;
  EXPECT(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(coop_kernel)), cudaSuccess);
  EXPECT(cudaGetKernel(&kernel, reinterpret_cast<const void*>(coop_kernel)), cudaSuccess);
  EXPECT(cudaGetFuncBySymbol(&fn, &threshold), cudaErrorInvalidDeviceFunction);
  const char* name = nullptr;
  EXPECT(cudaFuncGetName(&name, reinterpret_cast<const void*>(kernel)), cudaSuccess);
  if (name == nullptr || strstr(name, "coop_kernel") == nullptr) return 1;
  // A cooperative launch fits when every block can be resident at once.
  int per_sm = 0;
  EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
             &per_sm, reinterpret_cast<const void*>(coop_kernel), 256, 0),
         cudaSuccess);
  int* arg = nullptr;
  void* args[] = {&arg};
  EXPECT(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(coop_kernel),
                                     dim3(per_sm * sms), dim3(256), args, 0, 0),
         cudaSuccess);
  EXPECT(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(coop_kernel),
                                     dim3(per_sm * sms + 1), dim3(256), args, 0, 0),
         cudaErrorCooperativeLaunchTooLarge);
  EXPECT(cudaGetLastError(), cudaErrorCooperativeLaunchTooLarge);
  EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(32), args, 0, 0),
         cudaSuccess);
  // Dynamic shared memory: 48 KiB without opting in, up to the opted-in size after.
  EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(coop_kernel), dim3(1), dim3(32), args,
                          48 << 10, 0),
         cudaSuccess);
  EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(coop_kernel), dim3(1), dim3(32), args,
                          (48 << 10) + 4, 0),
         cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT(cudaFuncSetAttribute(reinterpret_cast<const void*>(coop_kernel),
                              cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10),
         cudaSuccess);
  EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(coop_kernel), dim3(1), dim3(32), args,
                          96 << 10, 0),
         cudaSuccess);
  EXPECT(cudaLaunchKernel(reinterpret_cast<const void*>(coop_kernel), dim3(1), dim3(32), args,
                          120 << 10, 0),
         cudaErrorInvalidValue);
  EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT(cudaDeviceSynchronize(), cudaSuccess);

  // Managed ranges read back their advice and last prefetch; a non-managed pointer is refused.
  int v = -7;
  EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeReadMostly, m, 4096),
         cudaSuccess);
  if (v != 1) return printf("FAIL read mostly %d\n", v), 1;
  EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeLastPrefetchLocation, m,
                                  1 << 20),
         cudaSuccess);
  if (v != 0) return printf("FAIL last prefetch %d\n", v), 1;
  EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributePreferredLocation, m, 64),
         cudaSuccess);
  if (v != cudaInvalidDeviceId) return printf("FAIL preferred %d\n", v), 1;
  cudaMemLocation host_loc;
  memset(&host_loc, 0, sizeof(host_loc));
  host_loc.type = cudaMemLocationTypeHost;
  EXPECT(cudaMemAdvise(m, 1 << 20, cudaMemAdviseSetPreferredLocation, host_loc), cudaSuccess);
  EXPECT(cudaMemAdvise(m, 1 << 20, cudaMemAdviseSetAccessedBy, loc), cudaSuccess);
  EXPECT(cudaMemAdvise(m, 1 << 20, cudaMemAdviseUnsetReadMostly, loc), cudaSuccess);
  int read_mostly = -1, preferred = -1, accessed[3] = {-1, -1, -1};
  void* data[] = {&read_mostly, &preferred, accessed};
  size_t sizes[] = {sizeof(int), sizeof(int), sizeof(accessed)};
  cudaMemRangeAttribute attrs[] = {cudaMemRangeAttributeReadMostly,
                                   cudaMemRangeAttributePreferredLocation,
                                   cudaMemRangeAttributeAccessedBy};
  EXPECT(cudaMemRangeGetAttributes(data, sizes, attrs, 3, m + 16, 4096), cudaSuccess);
  if (read_mostly != 0 || preferred != cudaCpuDeviceId || accessed[0] != 0 ||
      accessed[1] != cudaInvalidDeviceId || accessed[2] != cudaInvalidDeviceId) {
    return printf("FAIL attributes %d %d [%d %d %d]\n", read_mostly, preferred, accessed[0],
                  accessed[1], accessed[2]),
           1;
  }
  // A batch prefetch: the first range to the host, the second to device 0.
  {
    void* ptrs[] = {m, m + 1024};
    size_t sizes[] = {4096, 4096};
    cudaMemLocation locs[2];
    memset(locs, 0, sizeof(locs));
    locs[0].type = cudaMemLocationTypeHost;
    locs[1].type = cudaMemLocationTypeDevice;
    size_t idxs[] = {0, 1};
    EXPECT(cudaMemPrefetchBatchAsync(ptrs, sizes, 2, locs, idxs, 2, 0, 0), cudaSuccess);
    EXPECT(
        cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeLastPrefetchLocation, m, 4096),
        cudaSuccess);
    if (v != cudaCpuDeviceId) return printf("FAIL batch prefetch to host %d\n", v), 1;
    EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeLastPrefetchLocation,
                                    m + 1024, 4096),
           cudaSuccess);
    if (v != 0) return printf("FAIL batch prefetch to device %d\n", v), 1;
    size_t bad_idxs[] = {1, 0};
    EXPECT(cudaMemPrefetchBatchAsync(ptrs, sizes, 2, locs, bad_idxs, 2, 0, 0),
           cudaErrorInvalidValue);
  }
  EXPECT(cudaMemRangeGetAttribute(&v, 2, cudaMemRangeAttributeReadMostly, m, 64),
         cudaErrorInvalidValue);
  EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeReadMostly, m, 2 << 20),
         cudaErrorInvalidValue);
  EXPECT(cudaMemRangeGetAttribute(&v, sizeof(v), cudaMemRangeAttributeReadMostly, p, 64),
         cudaErrorInvalidValue);

  // Cache and shared memory configuration read back.
  cudaFuncCache cache = cudaFuncCachePreferNone;
  EXPECT(cudaDeviceGetCacheConfig(&cache), cudaSuccess);
  if (cache != cudaFuncCachePreferL1) return printf("FAIL cache config %d\n", int(cache)), 1;
  cudaSharedMemConfig bank = cudaSharedMemBankSizeDefault;
  EXPECT(cudaDeviceGetSharedMemConfig(&bank), cudaSuccess);
  if (bank != cudaSharedMemBankSizeFourByte) return printf("FAIL bank %d\n", int(bank)), 1;
  EXPECT(cudaFuncSetSharedMemConfig(reinterpret_cast<const void*>(coop_kernel),
                                    cudaSharedMemBankSizeEightByte),
         cudaSuccess);

  // Peer attributes and PCI bus ids of GPUSIM_DEVICES=2.
  EXPECT(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
  if (v != 1) return printf("FAIL p2p access %d\n", v), 1;
  EXPECT(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrPerformanceRank, 1, 0), cudaSuccess);
  EXPECT(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 0),
         cudaErrorInvalidDevice);
  // Native atomics: between the two devices, integer add in every width; none to the host.
  {
    cudaAtomicOperation ops[] = {cudaAtomicOperationIntegerAdd, cudaAtomicOperationFloatAdd};
    unsigned caps[2] = {0, 0};
    EXPECT(cudaDeviceGetP2PAtomicCapabilities(caps, ops, 2, 0, 1), cudaSuccess);
    if ((caps[0] & cudaAtomicCapabilityScalar64) == 0 || (caps[1] & cudaAtomicCapabilitySigned)) {
      return printf("FAIL p2p atomics %x %x\n", caps[0], caps[1]), 1;
    }
    EXPECT(cudaDeviceGetHostAtomicCapabilities(caps, ops, 2, 0), cudaSuccess);
    if (caps[0] != 0 || caps[1] != 0) return printf("FAIL host atomics\n"), 1;
    EXPECT(cudaDeviceGetP2PAtomicCapabilities(caps, ops, 2, 1, 1), cudaErrorInvalidDevice);
  }
  char bus[32];
  int by_bus = -1;
  EXPECT(cudaDeviceGetPCIBusId(bus, sizeof(bus), 1), cudaSuccess);
  EXPECT(cudaDeviceGetByPCIBusId(&by_bus, bus), cudaSuccess);
  if (by_bus != 1) return printf("FAIL device of %s: %d\n", bus, by_bus), 1;
  EXPECT(cudaDeviceGetByPCIBusId(&by_bus, "18:00.0"), cudaSuccess);
  if (by_bus != 0) return printf("FAIL device of 18:00.0: %d\n", by_bus), 1;
  EXPECT(cudaDeviceGetByPCIBusId(&by_bus, "0000:7f:00.0"), cudaErrorInvalidDevice);
  EXPECT(cudaDeviceGetByPCIBusId(&by_bus, "bus zero"), cudaErrorInvalidValue);

  // Thread block clusters: 8 blocks portable; the device holds per-SM blocks x SMs / size.
  cudaLaunchConfig_t config;
  memset(&config, 0, sizeof(config));
  config.gridDim = dim3(64);
  config.blockDim = dim3(256);
  int cluster = 0;
  EXPECT(cudaOccupancyMaxPotentialClusterSize(&cluster, reinterpret_cast<const void*>(coop_kernel),
                                              &config),
         cudaSuccess);
  if (cluster != 8) return printf("FAIL cluster size %d\n", cluster), 1;
  int clusters = 0;
  // No cluster size in the configuration: the kernel's compile-time one, unknown here: 1.
  EXPECT(cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(coop_kernel),
                                        &config),
         cudaSuccess);
  if (clusters != per_sm * sms) return printf("FAIL clusters of one %d\n", clusters), 1;
  cudaLaunchAttribute cluster_attr;
  memset(&cluster_attr, 0, sizeof(cluster_attr));
  cluster_attr.id = cudaLaunchAttributeClusterDimension;
  cluster_attr.val.clusterDim.x = 4;
  cluster_attr.val.clusterDim.y = 1;
  cluster_attr.val.clusterDim.z = 1;
  config.attrs = &cluster_attr;
  config.numAttrs = 1;
  EXPECT(cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(coop_kernel),
                                        &config),
         cudaSuccess);
  if (clusters != per_sm * sms / 4) return printf("FAIL clusters %d\n", clusters), 1;
  EXPECT(
      cudaKernelSetAttributeForDevice(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, 0),
      cudaSuccess);
  EXPECT(cudaOccupancyMaxPotentialClusterSize(&cluster, reinterpret_cast<const void*>(coop_kernel),
                                              &config),
         cudaSuccess);
  if (cluster != 16) return printf("FAIL non-portable cluster size %d\n", cluster), 1;
  EXPECT(
      cudaKernelSetAttributeForDevice(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024, 5),
      cudaErrorInvalidDevice);

  // Texture and surface objects: descriptors read back, bad resources and handles refused.
  cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
  cudaArray_t plain = nullptr, surf_array = nullptr;
  EXPECT(cudaMallocArray(&plain, &fmt, 64, 64), cudaSuccess);
  EXPECT(cudaMallocArray(&surf_array, &fmt, 64, 64, cudaArraySurfaceLoadStore), cudaSuccess);
  cudaResourceDesc res;
  memset(&res, 0, sizeof(res));
  res.resType = cudaResourceTypeArray;
  res.res.array.array = plain;
  cudaTextureDesc tex;
  memset(&tex, 0, sizeof(tex));
  tex.addressMode[0] = cudaAddressModeClamp;
  tex.filterMode = cudaFilterModeLinear;
  tex.normalizedCoords = 1;
  cudaTextureObject_t t = 0;
  EXPECT(cudaCreateTextureObject(&t, &res, &tex, nullptr), cudaSuccess);
  if (t == 0) return printf("FAIL texture object 0\n"), 1;
  cudaTextureDesc tex_back;
  cudaResourceDesc res_back;
  EXPECT(cudaGetTextureObjectTextureDesc(&tex_back, t), cudaSuccess);
  EXPECT(cudaGetTextureObjectResourceDesc(&res_back, t), cudaSuccess);
  if (tex_back.filterMode != cudaFilterModeLinear || res_back.res.array.array != plain) {
    return printf("FAIL texture descriptors\n"), 1;
  }
  cudaSurfaceObject_t s = 0;
  EXPECT(cudaCreateSurfaceObject(&s, &res), cudaErrorInvalidValue);  // no cudaArraySurfaceLoadStore
  res.res.array.array = surf_array;
  EXPECT(cudaCreateSurfaceObject(&s, &res), cudaSuccess);
  EXPECT(cudaGetSurfaceObjectResourceDesc(&res_back, s), cudaSuccess);
  if (res_back.res.array.array != surf_array) return printf("FAIL surface descriptor\n"), 1;
  EXPECT(cudaDestroyTextureObject(s), cudaErrorInvalidValue);  // a surface, not a texture
  EXPECT(cudaDestroySurfaceObject(s), cudaSuccess);
  EXPECT(cudaDestroyTextureObject(t), cudaSuccess);
  EXPECT(cudaDestroyTextureObject(t), cudaErrorInvalidValue);
  memset(&res, 0, sizeof(res));
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = m;
  res.res.linear.desc = fmt;
  res.res.linear.sizeInBytes = 4096;
  EXPECT(cudaCreateTextureObject(&t, &res, &tex, nullptr), cudaSuccess);
  EXPECT(cudaDestroyTextureObject(t), cudaSuccess);
  res.res.linear.devPtr = nullptr;
  EXPECT(cudaCreateTextureObject(&t, &res, &tex, nullptr), cudaErrorInvalidValue);
  EXPECT(cudaFreeArray(plain), cudaSuccess);
  EXPECT(cudaFreeArray(surf_array), cudaSuccess);

  EXPECT(cudaFree(m), cudaSuccess);
  printf("done\n");
  return 0;
}
