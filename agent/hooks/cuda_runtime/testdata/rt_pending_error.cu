// An error the program leaves unread for a while, as a probe of an optional device does: the
// first CUDA work is a failed cudaSetDevice(99), then 20 kernels, then the program reads its
// error (it must be the probe's), then 20 more kernels. Prints the error it read; exit code 0
// when everything else succeeded.
#include <cuda_runtime.h>

#include <cstdio>

__global__ void after_probe_kernel(float* p) {}
__global__ void after_read_kernel(float* p) {}

int main() {
  const cudaError_t probe = cudaSetDevice(99);
  for (int i = 0; i < 20; ++i) after_probe_kernel<<<2, 64>>>(nullptr);
  const cudaError_t sync1 = cudaDeviceSynchronize();
  const cudaError_t read = cudaGetLastError();
  for (int i = 0; i < 20; ++i) after_read_kernel<<<2, 64>>>(nullptr);
  const cudaError_t sync2 = cudaDeviceSynchronize();
  const cudaError_t after = cudaGetLastError();
  printf("probe=%s read=%s after=%s\n", cudaGetErrorName(probe), cudaGetErrorName(read),
         cudaGetErrorName(after));
  return sync1 == cudaSuccess && sync2 == cudaSuccess ? 0 : 1;
}
