// Hints and pool set-up that real programs use (managed memory advice/prefetch, cache config,
// device choice, the default memory pool) succeed on gpusim, and bad arguments get the runtime's
// error codes. Prints one line per check; exits non-zero on the first unexpected result.
#include <cstdio>
#include <cstring>

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
  EXPECT(cudaFree(m), cudaSuccess);
  printf("done\n");
  return 0;
}
