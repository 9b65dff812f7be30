// A stream held by a blocking host function (cudaLaunchHostFunc waiting for the main thread)
// with 1500 kernels queued behind it, while a second thread launches 500 kernels on a stream of
// its own that run and complete meanwhile, in a burst (before, CUDA-event timing lost up to 477
// of those: its launching thread looked only at the head of the in-flight list, the held
// stream's, and the pool grew a chunk per poller pass). Exit code 0 when every call succeeded.
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "agent/hooks/cuda_runtime/testdata/check.h"

__global__ void held_kernel(float* p) {}
__global__ void free_kernel(float* p) {}

std::atomic<int> g_open{0};

void CUDART_CB Gate(void*) {
  while (g_open.load() == 0) usleep(100);
}

int main() {
  cudaStream_t held, other;
  CHECK(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CHECK(cudaLaunchHostFunc(held, Gate, nullptr));
  std::thread second([&] {
    for (int i = 0; i < 500; ++i) free_kernel<<<1, 32, 0, other>>>(nullptr);
    CHECK(cudaStreamSynchronize(other));
  });
  for (int i = 0; i < 1500; ++i) held_kernel<<<1, 32, 0, held>>>(nullptr);
  second.join();
  const bool still_held = cudaStreamQuery(held) == cudaErrorNotReady;
  g_open.store(1);
  CHECK(cudaStreamSynchronize(held));
  CHECK(cudaStreamDestroy(held));
  CHECK(cudaStreamDestroy(other));
  printf("held=%d errors=%d\n", int(still_held), errors);
  return errors == 0 ? 0 : 1;
}
