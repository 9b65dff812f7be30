// A worker thread still launching while the process exits (a detached request thread of a
// server): it launches 1 ms kernels and waits for each, without end; main returns once it has
// made 20. The agent finishes the file at exit while the worker goes on: the calls it makes
// meanwhile are not recorded, and the file's footer counts them. Exit code 0.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <thread>

__global__ void late_worker_kernel(float* p) {}

std::atomic<int> g_launched{0};

int main() {
  std::thread([] {
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return;
    for (;;) {
      late_worker_kernel<<<1, 32, 0, s>>>(nullptr);
      cudaStreamSynchronize(s);
      g_launched.fetch_add(1);
    }
  }).detach();
  while (g_launched.load() < 20) std::this_thread::yield();
  printf("main returns\n");
  fflush(stdout);
  return 0;
}
