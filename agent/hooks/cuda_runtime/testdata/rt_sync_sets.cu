// The "synchronous" copies and sets that do not wait for the device (CUDA's API synchronization
// behavior): cudaMemset and cudaMemset2D of device memory, cudaMemcpy device to device and
// cudaMemcpyPeer, 64 MiB each on the legacy stream, queued behind a 2 ms kernel: each call
// returns long before its operation starts. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void sync_sets_kernel(float* p) {}

int main() {
  const size_t n = size_t(64) << 20;
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, n));
  CHECK(cudaMalloc(&b, n));
  sync_sets_kernel<<<1, 32>>>(nullptr);
  CHECK(cudaMemset(a, 1, n));
  CHECK(cudaMemset2D(b, 1 << 16, 2, 1 << 16, 1024));
  CHECK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpyPeer(a, 0, b, 0, n));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
