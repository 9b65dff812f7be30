#include "agent/core/clock.h"

#include <cpuid.h>
#include <errno.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace profagent {
namespace internal {
bool g_use_tsc = false;
}  // namespace internal

namespace {

// ns = mono0 + (ticks - tsc0) * mult >> 32, with mult = ns per tick in 32.32 fixed point.
struct Calibration {
  uint64_t tsc0;
  uint64_t mono0;
  uint64_t mult;
};

std::atomic<uint64_t> g_seq{0};  // seqlock over g_cal and g_segments
Calibration g_cal{0, 0, 0};
// The mappings g_cal replaced, each in force for the ticks from its tsc0 to the next one's (a
// ring of the last kSegments): a tick converts the same whenever it is converted (a launch
// written before a recalibration and its device op after it must keep their order to the ns).
// Ticks older than the oldest kept use it. Recalibrations are a second apart (the first ones
// sooner), so the ring covers about a minute: only events-mode work resolved later than that
// converts with a later mapping.
constexpr uint32_t kSegments = 64;
Calibration g_segments[kSegments];
uint32_t g_segment_count = 0;  // mappings replaced so far (the ring index is count % kSegments)
std::once_flag g_once;
uint64_t g_first_tsc = 0, g_first_mono = 0;

bool TscIsInvariant() {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
  __cpuid(0x80000007, a, b, c, d);
  if ((d & (1u << 8)) != 0) return true;  // invariant TSC
  // Virtual machines often hide the bit; trust the kernel's clocksource choice instead.
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char buf[32] = {0};
  bool tsc = fgets(buf, sizeof(buf), f) != nullptr && strncmp(buf, "tsc", 3) == 0;
  fclose(f);
  return tsc;
}

void Store(const Calibration& c) {
  g_seq.fetch_add(1, std::memory_order_acq_rel);
  if (g_cal.mult != 0) g_segments[g_segment_count++ % kSegments] = g_cal;
  g_cal = c;
  g_seq.fetch_add(1, std::memory_order_acq_rel);
}

// The mapping in force for `ticks` older than the current one's anchor.
Calibration SegmentFor(uint64_t ticks) {
  for (;;) {
    uint64_t s0 = g_seq.load(std::memory_order_acquire);
    if (s0 & 1) continue;
    const uint32_t n = g_segment_count;
    const uint32_t kept = n < kSegments ? n : kSegments;
    Calibration c = g_cal;
    for (uint32_t i = 1; i <= kept; ++i) {  // newest first
      c = g_segments[(n - i) % kSegments];
      if (c.tsc0 <= ticks) break;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_seq.load(std::memory_order_relaxed) == s0) return c;
  }
}

Calibration Load() {
  for (;;) {
    uint64_t s0 = g_seq.load(std::memory_order_acquire);
    if (s0 & 1) continue;
    Calibration c = g_cal;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_seq.load(std::memory_order_relaxed) == s0) return c;
  }
}

// A (tsc, mono) pair read within the narrowest window of a few tries.
void Pair(uint64_t* tsc, uint64_t* mono, uint64_t* width) {
  uint64_t best = ~0ull;
  for (int i = 0; i < 5; ++i) {
    uint64_t a = __rdtsc();
    uint64_t m = MonotonicNs();
    uint64_t b = __rdtsc();
    if (b - a < best) {
      best = b - a;
      *tsc = a + (b - a) / 2;
      *mono = m;
    }
  }
  *width = best;
}

// The tick rate is measured over at least this much time since InitClock's first reading.
constexpr uint64_t kCalibrationNs = 20 * 1000 * 1000;

int64_t Convert(const Calibration& c, uint64_t ticks) {
  int64_t d = int64_t(ticks - c.tsc0);
  __int128 ns = (__int128)d * (__int128)c.mult;
  return int64_t(c.mono0) + int64_t(ns >> 32);
}

// A recalibration's offset from the previous mapping is absorbed over this long, not jumped.
constexpr int64_t kSlewNs = 1000 * 1000 * 1000;

// Stores the tick rate measured from InitClock's reading to now, anchored now; false (nothing
// stored) for an implausible one. `slew` (a recalibration): the new mapping starts where the
// current one is now and reaches the measured line a second later, so that converted times
// never jump (records converted after a recalibration, with ticks from before it, met their
// neighbours converted before it out of order by the mapping's error, 150-200 ns: a call began
// before the previous one on its thread ended); an error of 1 ms or more is jumped.
bool MeasureRate(bool slew) {
  uint64_t t, m, w;
  Pair(&t, &m, &w);
  if (t <= g_first_tsc || m <= g_first_mono) return false;
  const double ns_per_tick = double(m - g_first_mono) / double(t - g_first_tsc);
  if (!(ns_per_tick > 0.01 && ns_per_tick <= 100.0)) return false;
  Calibration next{t, m, uint64_t(ns_per_tick * 4294967296.0)};
  if (slew) {
    const int64_t now = Convert(Load(), t);
    const int64_t error = now - int64_t(m);  // the current mapping is ahead by this much
    if (error > -kSlewNs / 1000 && error < kSlewNs / 1000) {
      next.mono0 = uint64_t(now);
      next.mult = uint64_t(ns_per_tick * double(kSlewNs - error) / double(kSlewNs) * 4294967296.0);
    }
  }
  Store(next);
  return true;
}

// 0: not calibrated yet, 1: being calibrated, 2: calibrated (g_cal holds a rate).
std::atomic<int> g_calibrated{0};

// Measures the tick rate over the time since InitClock, waiting for the rest of
// kCalibrationNs when the process is younger than that. Runs on the first conversion, which the
// agent's own threads make (the writer, the CUDA-event poller), not the application's: a
// process that never records pays nothing at start-up (before, 20 ms of sleep in every
// preloaded process: /bin/true, every step of a shell script).
void Calibrate() {
  int none = 0;
  if (!g_calibrated.compare_exchange_strong(none, 1, std::memory_order_acq_rel)) {
    while (g_calibrated.load(std::memory_order_acquire) != 2) {
      timespec ts{0, 100000};
      nanosleep(&ts, nullptr);
    }
    return;
  }
  const uint64_t since = MonotonicNs() - g_first_mono;
  if (since < kCalibrationNs) {
    const uint64_t rest = kCalibrationNs - since;
    timespec req{time_t(rest / 1000000000ull), long(rest % 1000000000ull)};
    while (nanosleep(&req, &req) != 0 && errno == EINTR) {
    }
  }
  // (An implausible rate, a TSC that went backwards: 1 ns per tick rather than nonsense.)
  if (!MeasureRate(/*slew=*/false)) Store({g_first_tsc, g_first_mono, uint64_t(4294967296.0)});
  g_calibrated.store(2, std::memory_order_release);
}

}  // namespace

void InitClock() {
  std::call_once(g_once, [] {
    if (!TscIsInvariant()) return;
    uint64_t w;
    Pair(&g_first_tsc, &g_first_mono, &w);
    // Calibrated on first use (Calibrate): the ticks recorded meanwhile convert then.
    internal::g_use_tsc = true;
    // A child forked while another thread calibrated has no such thread: it calibrates itself
    // (before, its first conversion waited for the parent's thread forever: a child forked in
    // the first 20 ms hung at exit).
    pthread_atfork(nullptr, nullptr, [] {
      int busy = 1;
      g_calibrated.compare_exchange_strong(busy, 0, std::memory_order_acq_rel);
    });
  });
}

void RecalibrateClock() {
  if (!internal::g_use_tsc) return;
  if (g_calibrated.load(std::memory_order_acquire) != 2) return Calibrate();
  MeasureRate(/*slew=*/true);  // (over the whole run so far: a better fit as it grows)
}

uint64_t TicksToNs(uint64_t ticks) {
  if (!internal::g_use_tsc) return ticks;
  if (__builtin_expect(g_calibrated.load(std::memory_order_acquire) != 2, 0)) Calibrate();
  const Calibration c = Load();
  if (__builtin_expect(ticks >= c.tsc0, 1)) return uint64_t(Convert(c, ticks));
  return uint64_t(Convert(SegmentFor(ticks), ticks));
}

namespace testing {
void ShiftClockForTest(int64_t ns) {
  Calibration c = Load();
  c.mono0 = uint64_t(int64_t(c.mono0) + ns);
  Store(c);
}
}  // namespace testing

bool TicksToNsReady() {
  return !internal::g_use_tsc || g_calibrated.load(std::memory_order_acquire) == 2;
}

ClockSample SampleClocks() {
  ClockSample s{};
  uint64_t best = ~0ull;
  for (int i = 0; i < 5; ++i) {
    uint64_t a = MonotonicNs();
    uint64_t r = RealtimeNs();
    uint64_t t = internal::g_use_tsc ? __rdtsc() : 0;
    uint64_t b = MonotonicNs();
    if (b - a < best) {
      best = b - a;
      s.mono_ns = a + (b - a) / 2;
      s.real_ns = r;
      s.ticks = t;
      s.uncertainty_ns = b - a;
    }
  }
  return s;
}

bool UsingTsc() { return internal::g_use_tsc; }

}  // namespace profagent
