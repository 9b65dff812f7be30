// Prints what every call returns and what cudaPeekAtLastError / cudaGetLastError (twice) say
// after it: run against NVIDIA's libcudart on a machine without a GPU (every call fails), the
// output must be the same with and without the agent. Exits 3.
#include <cuda_runtime.h>

#include <cstdio>

__global__ void nogpu_kernel(float* a) {}

#define SHOW(call)                                                                          \
  do {                                                                                      \
    cudaError_t r_ = (call);                                                                \
    cudaError_t peek_ = cudaPeekAtLastError();                                              \
    cudaError_t last_ = cudaGetLastError();                                                 \
    printf("%s -> %d, peek %d, last %d, last %d\n", #call, int(r_), int(peek_), int(last_), \
           int(cudaGetLastError()));                                                        \
  } while (0)

int main() {
  float* d = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  int n = -1;
  SHOW(cudaGetDeviceCount(&n));
  SHOW(cudaMalloc(&d, 1024));
  nogpu_kernel<<<1, 32>>>(d);
  SHOW(cudaSuccess);
  SHOW(cudaMemcpy(d, d, 16, cudaMemcpyDeviceToDevice));
  SHOW(cudaMemsetAsync(d, 0, 16, 0));
  SHOW(cudaStreamCreate(&s));
  SHOW(cudaEventCreate(&e));
  SHOW(cudaDeviceSynchronize());
  nogpu_kernel<<<1, 32>>>(d);
  nogpu_kernel<<<1, 32>>>(d);
  SHOW(cudaSuccess);
  SHOW(cudaFree(d));
  printf("devices %d\n", n);
  return 3;
}
