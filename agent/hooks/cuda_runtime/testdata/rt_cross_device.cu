// Work on a stream of device 1 issued while device 0 is current (run with GPUSIM_DEVICES=2):
// copies and a set on it are device 1's, as the runtime runs them; a kernel on device 0's own
// stream in between. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void cross_kernel(float* p) {}

int main() {
  float *d0 = nullptr, *d1 = nullptr;
  cudaStream_t s0 = nullptr, s1 = nullptr;
  static float host[1024];
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&d1, sizeof(host)));
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&d0, sizeof(host)));
  CHECK(cudaStreamCreate(&s0));
  for (int i = 0; i < 3; ++i) {
    CHECK(cudaMemcpyAsync(d1, host, sizeof(host), cudaMemcpyHostToDevice, s1));
    cross_kernel<<<4, 64, 0, s0>>>(d0);
    CHECK(cudaMemsetAsync(d1, 0, sizeof(host), s1));
  }
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamSynchronize(s0));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaFree(d0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(d1));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
