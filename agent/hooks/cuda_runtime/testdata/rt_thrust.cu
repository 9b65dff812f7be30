// Thrust and CUB, built for nvcc's default architecture as most projects are: their kernels have
// long template names, CUB dispatches on the PTX version cudaFuncGetAttributes reports, and
// CCCL wraps each algorithm in an NVTX range of its own domain. Three steps (NVTX ranges of the
// default domain), each: fill, transform, reduce, sort and an inclusive scan on a created
// stream, a CUB device reduction with its temporary-storage query, and a synchronization.
#include <nvtx3/nvToolsExt.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <cstdio>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

struct Square {
  __host__ __device__ float operator()(float x) const { return x * x; }
};

int main() {
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) return 1;
  const int n = 1 << 16;
  thrust::device_vector<float> v(n);
  thrust::device_vector<int> keys(4096);
  int* d_out = nullptr;
  if (cudaMalloc(&d_out, sizeof(int)) != cudaSuccess) return 1;
  double checksum = 0;
  for (int step = 0; step < 3; ++step) {
    char msg[64];
    snprintf(msg, sizeof msg, "step %d tokens=%d", step, 8 * (step + 1));
    nvtxRangePushA(msg);
    auto on = thrust::cuda::par.on(stream);
    thrust::sequence(on, v.begin(), v.end(), float(step));
    thrust::transform(on, v.begin(), v.end(), v.begin(), Square());
    checksum += thrust::reduce(on, v.begin(), v.end());
    thrust::sequence(on, keys.begin(), keys.end(), 4096, -1);
    thrust::sort(on, keys.begin(), keys.end());
    thrust::inclusive_scan(on, keys.begin(), keys.end(), keys.begin());
    const int* in = thrust::raw_pointer_cast(keys.data());
    size_t temp_bytes = 0;
    cub::DeviceReduce::Sum(nullptr, temp_bytes, in, d_out, int(keys.size()), stream);
    void* temp = nullptr;
    if (cudaMallocAsync(&temp, temp_bytes, stream) != cudaSuccess) return 1;
    cub::DeviceReduce::Sum(temp, temp_bytes, in, d_out, int(keys.size()), stream);
    if (cudaFreeAsync(temp, stream) != cudaSuccess) return 1;
    int out = 0;
    cudaMemcpyAsync(&out, d_out, sizeof(int), cudaMemcpyDeviceToHost, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess) return 1;
    checksum += out;
    nvtxRangePop();
  }
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  const cudaError_t e = cudaDeviceSynchronize();
  printf("thrust done: %s checksum %.0f\n", cudaGetErrorName(e), checksum);
  return e == cudaSuccess ? 0 : 1;
}
