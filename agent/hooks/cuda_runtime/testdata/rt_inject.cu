// Simulates CUDA_INJECTION64_PATH (which gpusim's runtime does not implement): dlopens the agent
// given in argv[1] privately (so none of its interposers is in the application's symbol lookup)
// and calls its InitializeInjection twice, as a driver would once; then runs kernels and copies.
// The agent sees them only through CUPTI callbacks. Exit code 0 on success.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

__global__ void injected_kernel(int i) {}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("dlopen: %s\n", dlerror());
    return 3;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"));
  if (!init) return 4;
  int a = init();
  int b = init();
  float* d = nullptr;
  if (cudaMalloc(&d, 4096) != cudaSuccess) return 5;
  for (int i = 0; i < 6; ++i) injected_kernel<<<2, 64>>>(i);
  cudaMemset(d, 0, 4096);
  cudaError_t e = cudaDeviceSynchronize();
  cudaFree(d);
  printf("init=%d,%d sync=%d\n", a, b, int(e));
  return e == cudaSuccess ? 0 : 1;
}
