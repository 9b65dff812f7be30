// A host far ahead of its device: 1000 kernels of 200 us queued at once, a 20 ms pause, 1000
// more; up to about 2000 operations in flight (more than a device's first chunk of CUDA-event
// pairs). Exit code 0 when every call succeeded.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void burst_kernel(float* p) {}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int i = 0; i < 1000; ++i) burst_kernel<<<1, 32, 0, s>>>(nullptr);
  usleep(20000);
  for (int i = 0; i < 1000; ++i) burst_kernel<<<1, 32, 0, s>>>(nullptr);
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamDestroy(s));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
