// Hints and pool set-up that real programs use (managed memory advice/prefetch, cache config,
// device choice, the default memory pool) succeed on gpusim, and bad arguments get the runtime's
// error codes. Prints one line per check; exits non-zero on the first unexpected result.
#include <cstdio>
#include <cstring>

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
  void* p = nullptr;
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
  EXPECT(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT(cudaFree(m), cudaSuccess);
  printf("done\n");
  return 0;
}
