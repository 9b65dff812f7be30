// A program killed by SIGTERM (a job scheduler, mpirun tearing a job down) soon after its GPU
// work: 20 kernels, synchronized, then the signal with its default action. Prints "errors=N"
// before it.
#include <cuda_runtime.h>
#include <signal.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void before_term_kernel(float* p) {}

int main() {
  for (int i = 0; i < 20; ++i) before_term_kernel<<<1, 32>>>(nullptr);
  CHECK(cudaDeviceSynchronize());
  printf("errors=%d\n", errors);
  fflush(stdout);
  raise(SIGTERM);
  return 99;  // not reached
}
