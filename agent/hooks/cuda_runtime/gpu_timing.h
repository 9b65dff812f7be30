// The GPU timing mode in force (CUPTI, CUDA events, host only, off), decided once at the
// application's first intercepted CUDA call (or at InitializeInjection), never earlier: a process
// that never calls CUDA loads no CUDA library because of the agent.
//
// Mode() is hot-path safe: one acquire load; the first call runs the decision (slow: may dlopen
// CUPTI) under std::call_once, so concurrent first calls wait for it and all see one mode.
// Decision: PROFAGENT_GPU_TIMING=auto -> CUPTI, else events, else host; cupti|events|host|off force
// one (a forced mode that cannot start falls back to host). SetGpuTiming(mode, reason) is
// called once with the outcome.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_GPU_TIMING_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_GPU_TIMING_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace profagent {
namespace rt {

// Values equal profagent.GpuTimingMode.
enum TimingMode : uint8_t { kUndecided = 0, kCupti = 1, kEvents = 2, kHost = 3, kOff = 4 };

namespace internal {
extern std::atomic<uint8_t> g_mode;
extern uint32_t g_stack_every;  // PROFAGENT_STACKS (0 = off), fixed at decision time
extern uint32_t g_stack_depth;
extern uint32_t g_launch_api_sample;  // PROFAGENT_LAUNCH_API_SAMPLE, fixed at decision time
uint8_t DecideMode();
}  // namespace internal

inline uint8_t Mode() {
  uint8_t m = internal::g_mode.load(std::memory_order_acquire);
  if (__builtin_expect(m == kUndecided, 0)) m = internal::DecideMode();
  return m;
}

// For InitializeInjection: decide now.
void DecideModeFromInjection();

// Events mode found no usable GPU (its first event pool could not be created): switches to
// host timing and records why (the CUPTI reason, if any, then `why`). Slow path, thread-safe.
void FallBackToHostTiming(const std::string& why);

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_GPU_TIMING_H_
