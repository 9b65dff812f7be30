// A program that resets its device and carries on (cuda-samples end with cudaDeviceReset; some
// programs reset between phases): 4 kernels before the reset, 6 after it on a new stream, timed
// by the program's own events, then a memset. The reset destroys the device's streams, events
// and allocations. Prints "errors=N elapsed_ok=1"; exits 1 when any call failed.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void before_reset_kernel(float* p) {}
__global__ void after_reset_kernel(float* p) {}

int main() {
  float* d = nullptr;
  cudaStream_t s = nullptr;
  CHECK(cudaMalloc(&d, 1 << 20));
  CHECK(cudaStreamCreate(&s));
  for (int i = 0; i < 4; ++i) before_reset_kernel<<<8, 64, 0, s>>>(d);
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaDeviceReset());

  CHECK(cudaMalloc(&d, 1 << 16));
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t a = nullptr, b = nullptr;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < 6; ++i) after_reset_kernel<<<8, 64, 0, s>>>(d);
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaMemset(d, 0, 4096));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  CHECK(cudaFree(d));
  printf("errors=%d elapsed_ok=%d\n", errors, ms > 0);
  return errors == 0 ? 0 : 1;
}
