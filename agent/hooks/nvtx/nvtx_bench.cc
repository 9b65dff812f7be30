// Overhead benchmark: nanoseconds per nvtxRangePushA/nvtxRangePop pair, and per mark, in an
// unmodified program. Run it plain (NVTX without a tool: the no-op baseline) and with
// LD_PRELOAD=libprofagent.so; it prints the figures. Usage: nvtx_bench [pairs] (default 2e5).
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {
uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 200000;
  const int reps = 3;
  nvtxRangePushA("warm-up");  // initializes the injection outside the timed loops
  nvtxRangePop();
  double best_pair = 1e30, best_nested = 1e30, best_mark = 1e30;
  for (int r = 0; r < reps; ++r) {
    uint64_t t0 = MonoNs();
    for (long i = 0; i < n; ++i) {
      nvtxRangePushA("decode layer");
      nvtxRangePop();
    }
    uint64_t t1 = MonoNs();
    for (long i = 0; i < n / 4; ++i) {  // 4 nested levels
      nvtxRangePushA("l0");
      nvtxRangePushA("l1");
      nvtxRangePushA("l2");
      nvtxRangePushA("l3");
      nvtxRangePop();
      nvtxRangePop();
      nvtxRangePop();
      nvtxRangePop();
    }
    uint64_t t2 = MonoNs();
    for (long i = 0; i < n; ++i) nvtxMarkA("m");
    uint64_t t3 = MonoNs();
    best_pair = std::min(best_pair, double(t1 - t0) / double(n));
    best_nested = std::min(best_nested, double(t2 - t1) / double(n / 4 * 4));
    best_mark = std::min(best_mark, double(t3 - t2) / double(n));
  }
  printf("nvtx_bench: %ld pairs x %d reps (best rep)\n", n, reps);
  printf("push/pop pair (flat):      %.1f ns\n", best_pair);
  printf("push/pop pair (4 nested):  %.1f ns\n", best_nested);
  printf("mark:                      %.1f ns\n", best_mark);
  return 0;
}
