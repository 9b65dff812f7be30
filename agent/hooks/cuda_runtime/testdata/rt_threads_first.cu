// The first CUDA work of the process comes from several host threads at once: 6 threads wait
// on a barrier, then each creates its stream and launches 3 kernels and a copy there, and one
// kernel on its per-thread default stream (cudaStreamPerThread). Whatever the
// agent sets up on first use (CUDA-event pools, CUPTI) must not lose the work of the threads
// that arrive while it does. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void first_kernel(float* p) {}
__global__ void second_kernel(float* p, int n) {}


int main() {
  constexpr int kThreads = 6;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ready] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      cudaStream_t s;
      CHECK(cudaStreamCreate(&s));
      first_kernel<<<2, 64, 0, s>>>(nullptr);
      second_kernel<<<4, 128, 0, s>>>(nullptr, 1);
      first_kernel<<<2, 64, 0, s>>>(nullptr);
      float host[64] = {};
      float* dev = nullptr;
      CHECK(cudaMalloc(&dev, sizeof(host)));
      CHECK(cudaMemcpyAsync(dev, host, sizeof(host), cudaMemcpyHostToDevice, s));
      CHECK(cudaStreamSynchronize(s));
      second_kernel<<<1, 32, 0, cudaStreamPerThread>>>(nullptr, 2);
      CHECK(cudaStreamSynchronize(cudaStreamPerThread));
      CHECK(cudaFree(dev));
      CHECK(cudaStreamDestroy(s));
    });
  }
  for (auto& t : threads) t.join();
  CHECK(cudaGetLastError());
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
