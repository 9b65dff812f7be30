// Driver-API copies, sets and host syncs, reached as JAX/XLA-, CuPy- and numba-style code reaches
// them (here through cudaGetDriverEntryPoint: no link to libcuda), inside an NVTX step: a 4 KiB
// cuMemcpyHtoD, cuMemsetD32 of 256 words, cuMemcpyDtoH, then on a created stream
// cuMemcpyHtoDAsync, cuMemsetD32Async, cuMemcpyDtoHAsync, cuStreamSynchronize, and
// cuCtxSynchronize. Checks the data; prints errors=N (exit 1 when a call or a check failed).
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"
#include "agent/hooks/cuda_runtime/testdata/driver.h"

int main() {
  auto htod = Driver<decltype(&cuMemcpyHtoD)>("cuMemcpyHtoD");
  auto dtoh = Driver<decltype(&cuMemcpyDtoH)>("cuMemcpyDtoH");
  auto htod_async = Driver<decltype(&cuMemcpyHtoDAsync)>("cuMemcpyHtoDAsync");
  auto dtoh_async = Driver<decltype(&cuMemcpyDtoHAsync)>("cuMemcpyDtoHAsync");
  auto set32 = Driver<decltype(&cuMemsetD32)>("cuMemsetD32");
  auto set32_async = Driver<decltype(&cuMemsetD32Async)>("cuMemsetD32Async");
  auto stream_sync = Driver<decltype(&cuStreamSynchronize)>("cuStreamSynchronize");
  auto ctx_sync = Driver<decltype(&cuCtxSynchronize)>("cuCtxSynchronize");
  if (!htod || !dtoh || !htod_async || !dtoh_async || !set32 || !set32_async || !stream_sync ||
      !ctx_sync) {
    printf("missing driver entry point\n");
    return 1;
  }
  static unsigned host[1024], back[1024];
  for (int i = 0; i < 1024; ++i) host[i] = unsigned(i);
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, sizeof(host)));
  const CUdeviceptr d = reinterpret_cast<CUdeviceptr>(dev);
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreate(&s));
  nvtxRangePushA("step tokens=1");
  CU(htod(d, host, sizeof(host)));
  CU(set32(d, 7u, 256));
  CU(dtoh(back, d, sizeof(back)));
  if (back[0] != 7u || back[255] != 7u || back[256] != 256u) ++errors;
  CU(htod_async(d, host, sizeof(host), reinterpret_cast<CUstream>(s)));
  CU(set32_async(d + 1024, 9u, 256, reinterpret_cast<CUstream>(s)));
  CU(dtoh_async(back, d, sizeof(back), reinterpret_cast<CUstream>(s)));
  CU(stream_sync(reinterpret_cast<CUstream>(s)));
  if (back[0] != 0u || back[256] != 9u || back[512] != 512u) ++errors;
  CU(ctx_sync());
  nvtxRangePop();
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
