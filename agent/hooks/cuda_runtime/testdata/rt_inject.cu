// Simulates CUDA_INJECTION64_PATH (which gpusim's runtime does not implement): dlopens the agent
// given in argv[1] privately (so none of its interposers is in the application's symbol lookup)
// and calls its InitializeInjection twice, as a driver would once; then runs kernels and copies.
// The agent sees them only through CUPTI callbacks. Exit code 0 on success.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/inject.h"

__global__ void injected_kernel(int i) {}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int a = InjectAgent(argv[1]);  // twice, as two tools' loaders might
  const int b = InjectAgent(argv[1]);
  if (a < 0 || b < 0) return 3;
  float* d = nullptr;
  if (cudaMalloc(&d, 4096) != cudaSuccess) return 5;
  for (int i = 0; i < 6; ++i) injected_kernel<<<2, 64>>>(i);
  cudaMemset(d, 0, 4096);
  cudaError_t e = cudaDeviceSynchronize();
  cudaFree(d);
  printf("init=%d,%d sync=%d\n", a, b, int(e));
  return e == cudaSuccess ? 0 : 1;
}
