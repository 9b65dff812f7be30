// A shared library with its own copy of NVTX v3 (as libnvtx3interop or a Python extension has),
// loaded by nvtx_demo with dlopen after NVTX is already in use: its NVTX instance initializes on
// its first call and must reach the same injection.
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <cstdint>

namespace {
uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void PluginRange(uint64_t* b0, uint64_t* a0,
                                                                   uint64_t* b1, uint64_t* a1) {
  *b0 = MonoNs();
  nvtxRangePushA("plugin range");
  *a0 = MonoNs();
  const uint64_t until = *a0 + 200000;
  while (MonoNs() < until) {
  }
  *b1 = MonoNs();
  nvtxRangePop();
  *a1 = MonoNs();
}
