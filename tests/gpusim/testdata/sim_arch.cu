// Which code image the simulated device (compute capability 9.0) runs from this program's fat
// binary: cudaFuncGetAttributes' ptxVersion and binaryVersion, and the PTX version CUB derives
// from them (it must be one of the architectures the program was built for, or CUB refuses to
// dispatch). Built with several sets of nvcc architecture flags (BUILD.bazel).
#include <cstdio>
#include <cub/util_device.cuh>

__global__ void arch_kernel(int* p) {
  if (p != nullptr) *p = 1;
}

int main() {
  cudaFuncAttributes a{};
  cudaError_t e = cudaFuncGetAttributes(&a, arch_kernel);
  if (e != cudaSuccess) {
    printf("cudaFuncGetAttributes: %s\n", cudaGetErrorName(e));
    return 1;
  }
  int cub_ptx = 0;
  e = cub::PtxVersion(cub_ptx);
  if (e != cudaSuccess) {
    printf("cub::PtxVersion: %s\n", cudaGetErrorName(e));
    return 1;
  }
  arch_kernel<<<1, 32>>>(nullptr);
  e = cudaDeviceSynchronize();
  printf("ptx=%d binary=%d cub=%d launch=%s\n", a.ptxVersion, a.binaryVersion, cub_ptx,
         cudaGetErrorName(e));
  return e == cudaSuccess ? 0 : 1;
}
