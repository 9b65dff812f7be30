// An error the program leaves unread for a while, as a probe of an optional device does: the
// first CUDA work is a failed cudaSetDevice(99), then 20 kernels, then the program reads its
// error (it must be the probe's), then 20 more kernels. Prints the error it read; exit code 0
// when everything else succeeded. Then three launches the runtime rejects for their shape (what
// a user debugging them needs to see in the profile), and the errors they left.
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
  after_read_kernel<<<32, 2048>>>(nullptr);  // 2048 threads per block
  const cudaError_t bad_block = cudaGetLastError();
  after_read_kernel<<<dim3(1, 70000), 128>>>(nullptr);  // grid y above 65535
  const cudaError_t bad_grid = cudaGetLastError();
  after_read_kernel<<<dim3(2, 0), dim3(4, 4, 3000)>>>(nullptr);  // no blocks, block z above 64
  const cudaError_t bad_both = cudaGetLastError();
  printf("rejected=%s,%s,%s\n", cudaGetErrorName(bad_block), cudaGetErrorName(bad_grid),
         cudaGetErrorName(bad_both));
  return sync1 == cudaSuccess && sync2 == cudaSuccess ? 0 : 1;
}
