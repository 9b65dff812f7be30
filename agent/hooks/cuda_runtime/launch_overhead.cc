// Per-launch cost of the agent's launch hook in isolation: calls __cudaLaunchKernel of a
// do-nothing runtime (testdata/cudart_stub.cc) N times per round and prints the best mean ns
// per call over the rounds. Rounds are separated by 50 ms so that the agent's writer drains its
// ring (a round of up to ~60000 calls fits the default 65536-slot ring: no drops, and the ring's
// pages are warm after the first round). launch_bench.sh runs it with and without the agent.
// Rounds are timed with the calling thread's CPU clock: time the thread spent preempted on a
// busy machine does not count (the agent's writer runs on another thread).
// Usage: launch_overhead [calls per round] [rounds].
#include <cuda_runtime_api.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                          void** args, size_t sharedMem, cudaStream_t stream);

static double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 50000;
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  cudaKernel_t k = reinterpret_cast<cudaKernel_t>(0x1000);
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double t0 = NowNs();
    for (int i = 0; i < n; ++i) __cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, nullptr);
    double per = (NowNs() - t0) / n;
    if (per < best) best = per;
    usleep(50000);
  }
  printf("launch_ns %.1f\n", best);
  return 0;
}
