// Launch-overhead benchmark (not a timed test): many launches of a zero-cost kernel on one
// stream, timed on the host. Run it with and without the agent (launch_bench.sh does both and
// every GPU timing mode) and compare ns per launch. Usage: launch_bench [launches] [rounds].
// Prints "launch_ns <best-of-rounds mean ns per launch>".
#include <cuda_runtime.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

static double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  empty_kernel<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double t0 = NowNs();
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 1, 0, s>>>();
    double t1 = NowNs();
    cudaStreamSynchronize(s);
    double per = (t1 - t0) / n;
    if (per < best) best = per;
  }
  printf("launch_ns %.1f\n", best);
  return 0;
}
