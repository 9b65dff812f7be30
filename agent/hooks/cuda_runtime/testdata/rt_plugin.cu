// A shared library built with nvcc (-cudart shared) that rt_late dlopens: its CUDA calls are the
// first ones of the process, made after the agent loaded.
#include <cuda_runtime.h>

__global__ void plugin_kernel(int v) {}

extern "C" int plugin_run(int n) {
  for (int i = 0; i < n; ++i) plugin_kernel<<<4, 64>>>(i);
  return cudaDeviceSynchronize() == cudaSuccess ? n : -1;
}
