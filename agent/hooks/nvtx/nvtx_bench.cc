// Overhead benchmark: nanoseconds per nvtxRangePushA/nvtxRangePop pair (flat and 4-deep), and
// per nvtxMarkA, in an unmodified program. Run it plain (NVTX without a tool: the no-op
// baseline) and with LD_PRELOAD=libprofagent.so. It prints the figures.
//
// Steady state, not ring overflow: the calls run in chunks of `chunk` pairs, with an untimed
// pause between chunks that lets the agent's writer drain the thread's ring (an application
// emitting NVTX ranges back to back for seconds would overflow any bounded ring; the agent
// then drops and counts). Per-chunk times; min and median over the chunks are printed.
// Usage: nvtx_bench [chunks=40] [chunk=2048] [pause_ms=25]
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void Pause(int ms) {
  timespec ts{ms / 1000, long(ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

struct Result {
  double min, median;
};

template <typename Body>
Result Measure(int chunks, long chunk, int pause_ms, long ops_per_iter, Body body) {
  std::vector<double> per_op;
  // Warm-up chunks: the first pass through the agent's ring (65536 slots of 64 B by default)
  // page-faults; 24 chunks of 2048 pairs (2 slots each) cover it.
  const int warmup = 24;
  for (int c = 0; c < chunks + warmup; ++c) {
    Pause(pause_ms);
    const uint64_t t0 = MonoNs();
    for (long i = 0; i < chunk; ++i) body();
    const uint64_t t1 = MonoNs();
    if (c >= warmup) per_op.push_back(double(t1 - t0) / double(chunk * ops_per_iter));
  }
  std::sort(per_op.begin(), per_op.end());
  return {per_op.front(), per_op[per_op.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  const int chunks = argc > 1 ? std::atoi(argv[1]) : 40;
  const long chunk = argc > 2 ? std::atol(argv[2]) : 2048;
  const int pause_ms = argc > 3 ? std::atoi(argv[3]) : 25;
  nvtxRangePushA("warm-up");  // initializes the injection outside the timed loops
  nvtxRangePop();
  Result flat = Measure(chunks, chunk, pause_ms, 1, [] {
    nvtxRangePushA("decode layer");
    nvtxRangePop();
  });
  Result nested = Measure(chunks, chunk / 4, pause_ms, 4, [] {
    nvtxRangePushA("l0");
    nvtxRangePushA("l1");
    nvtxRangePushA("l2");
    nvtxRangePushA("l3");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePop();
  });
  Result mark = Measure(chunks, chunk, pause_ms, 1, [] { nvtxMarkA("m"); });
  Result step = Measure(chunks, chunk / 8, pause_ms, 1, [] {
    nvtxRangePushA("step phase=decode tokens=8 kv=517 bsz=8");
    nvtxRangePop();
  });
  printf("nvtx_bench: %d chunks of %ld calls, %d ms pause between chunks\n", chunks, chunk,
         pause_ms);
  printf("push/pop pair (flat):        min %7.1f ns  median %7.1f ns\n", flat.min, flat.median);
  printf("push/pop pair (4 nested):    min %7.1f ns  median %7.1f ns\n", nested.min,
         nested.median);
  printf("mark:                        min %7.1f ns  median %7.1f ns\n", mark.min, mark.median);
  printf("step range (parsed, kStep):  min %7.1f ns  median %7.1f ns\n", step.min, step.median);
  return 0;
}
