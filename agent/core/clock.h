// Timestamps for the hot path.
//
// Now() returns raw ticks: the TSC (rdtsc) when it is invariant and calibrated against
// CLOCK_MONOTONIC, else CLOCK_MONOTONIC nanoseconds. Hooks store ticks; the writer converts
// them with TicksToNs() off the hot path, and records ClockSync samples (ticks, monotonic,
// realtime) so the conversion can be checked or redone by the analyzer.
#ifndef PROFAGENT_AGENT_CORE_CLOCK_H_
#define PROFAGENT_AGENT_CORE_CLOCK_H_

#include <time.h>
#include <x86intrin.h>

#include <cstdint>

namespace profagent {

namespace internal {
extern bool g_use_tsc;  // set once by InitClock(), read-only afterwards
}  // namespace internal

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Raw ticks. Hot path: one rdtsc (or one vDSO clock_gettime without an invariant TSC).
inline uint64_t Now() {
  if (__builtin_expect(internal::g_use_tsc, 1)) return __rdtsc();
  return MonotonicNs();
}

// Decides the clock source (no wait: the tick rate is measured at the first conversion, over
// at least 20 ms since this call). Idempotent; call before any Now().
void InitClock();

// Converts raw ticks to CLOCK_MONOTONIC ns. Thread-safe; not for the hot path (uses a
// calibration that the writer refreshes).
uint64_t TicksToNs(uint64_t ticks);
// True when TicksToNs will not calibrate first (it sleeps up to 20 ms the first time, on the
// agent's own threads): an application thread checks this before converting.
bool TicksToNsReady();

// Re-measures the tick rate against CLOCK_MONOTONIC over the time since InitClock (improves
// the fit over long runs). Called by the writer.
void RecalibrateClock();

namespace testing {
// Moves the current tick mapping by `ns` (an error of the calibration, for tests).
void ShiftClockForTest(int64_t ns);
}  // namespace testing

// One paired reading (ticks, monotonic ns, realtime ns) taken as close together as possible.
struct ClockSample {
  uint64_t ticks, mono_ns, real_ns, uncertainty_ns;
};
ClockSample SampleClocks();

bool UsingTsc();

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_CLOCK_H_
