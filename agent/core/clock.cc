#include "agent/core/clock.h"

#include <cpuid.h>

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

std::atomic<uint64_t> g_seq{0};  // seqlock over g_cal
Calibration g_cal{0, 0, 0};
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
  g_cal = c;
  g_seq.fetch_add(1, std::memory_order_acq_rel);
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

}  // namespace

void InitClock() {
  std::call_once(g_once, [] {
    if (!TscIsInvariant()) return;
    uint64_t t0, m0, w;
    Pair(&t0, &m0, &w);
    timespec req{0, 20 * 1000 * 1000};
    nanosleep(&req, nullptr);
    uint64_t t1, m1;
    Pair(&t1, &m1, &w);
    if (t1 <= t0 || m1 <= m0) return;
    double ns_per_tick = double(m1 - m0) / double(t1 - t0);
    if (ns_per_tick <= 0.01 || ns_per_tick > 100.0) return;
    g_first_tsc = t0;
    g_first_mono = m0;
    Store({t1, m1, uint64_t(ns_per_tick * 4294967296.0)});
    internal::g_use_tsc = true;
  });
}

void RecalibrateClock() {
  if (!internal::g_use_tsc) return;
  uint64_t t, m, w;
  Pair(&t, &m, &w);
  if (t <= g_first_tsc || m - g_first_mono < 10 * 1000 * 1000) return;
  double ns_per_tick = double(m - g_first_mono) / double(t - g_first_tsc);
  Store({t, m, uint64_t(ns_per_tick * 4294967296.0)});
}

uint64_t TicksToNs(uint64_t ticks) {
  if (!internal::g_use_tsc) return ticks;
  Calibration c = Load();
  int64_t d = int64_t(ticks - c.tsc0);
  __int128 ns = (__int128)d * (__int128)c.mult;
  return uint64_t(int64_t(c.mono0) + int64_t(ns >> 32));
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
