// The interval of a device op timed by a CUDA event pair, in host monotonic ns (header-only so
// that its unit test needs no CUDA runtime).
//
// An op cannot start before the API call that enqueued it began, nor end after a synchronous call
// returned. So
//   start = max(start event, call_t0),  end = stop event, moved later when the start event
//   appears before it was recorded (the host mapping's error, a few us: the pair's duration is
//   exact), and for a synchronous call at most call_t1.
// A start event is recorded just before the call (at `pre`): on an idle stream it completes at
// once, before call_t0, and that is no error; the stop event then keeps its time.
// What remains is inherent to event timing: the part of the API call before the enqueue (large
// for a first launch), and, on an idle stream, a short op that ends before its stop event is
// enqueued is stretched to that enqueue. On a busy stream both events complete exactly at the
// op's bounds.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_INTERVAL_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_INTERVAL_H_

#include <cstdint>

namespace profagent {
namespace rt {

inline void EstimateInterval(uint64_t ev_start_ns, uint64_t ev_stop_ns, uint64_t pre_ns,
                             uint64_t call_t0_ns, uint64_t call_t1_ns, bool sync_call,
                             uint64_t* start_ns, uint64_t* end_ns) {
  // `pre_ns`: host time just before the start event was recorded (0: unknown, taken as call_t0).
  // A start event before it is the host mapping's error, up to kMappingErrorNs (the reference's
  // host time is known to within its record call, a few us): the interval moves by the error,
  // keeping the duration the pair measured. Earlier, the start event was recorded before the work
  // was enqueued (an NCCL group's member call, enqueued at ncclGroupEnd): the start is clamped,
  // the end kept.
  constexpr uint64_t kMappingErrorNs = 10000;
  const uint64_t pre = pre_ns != 0 && pre_ns < call_t0_ns ? pre_ns : call_t0_ns;
  const uint64_t early = ev_start_ns < call_t0_ns ? call_t0_ns - ev_start_ns : 0;
  const uint64_t error = ev_start_ns < pre ? pre - ev_start_ns : 0;
  // A pair wholly before the call cannot be an early-recorded start: the mapping's error again,
  // by as much as puts the start at the call.
  const uint64_t shift = ev_stop_ns < call_t0_ns ? early : error <= kMappingErrorNs ? error : 0;
  uint64_t start = ev_start_ns + early;
  uint64_t end = ev_stop_ns + shift;
  if (sync_call && end > call_t1_ns) end = call_t1_ns;  // complete when the call returned
  if (start > end) start = end;
  *start_ns = start;
  *end_ns = end > start ? end : start;
}

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_INTERVAL_H_
