// The interval of a device op timed by a CUDA event pair, in host monotonic ns (header-only so
// that its unit test needs no CUDA runtime).
//
// An op cannot start before the API call that enqueued it began, nor end after a synchronous call
// returned. So
//   start = max(start event, call_t0),  end = stop event, moved as much as the start when that
//   moved by a few us only (the host mapping's error: the pair's duration is exact), and for a
//   synchronous call at most call_t1.
// What remains is inherent to event timing: the part of the API call before the enqueue (large
// for a first launch), and, on an idle stream, a short op that ends before its stop event is
// enqueued is stretched to that enqueue. On a busy stream both events complete exactly at the
// op's bounds.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_INTERVAL_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_EVENT_INTERVAL_H_

#include <cstdint>

namespace profagent {
namespace rt {

inline void EstimateInterval(uint64_t ev_start_ns, uint64_t ev_stop_ns, uint64_t call_t0_ns,
                             uint64_t call_t1_ns, bool sync_call, uint64_t* start_ns,
                             uint64_t* end_ns) {
  // Up to kMappingErrorNs early, the start is the host mapping's error (the reference's host time
  // is known to within its record call, a few us): the interval moves, keeping the duration the
  // pair measured. Earlier, the start event was recorded before the work was enqueued (an NCCL
  // group's member call, enqueued at ncclGroupEnd): the start is clamped, the end kept.
  constexpr uint64_t kMappingErrorNs = 10000;
  const uint64_t early = ev_start_ns < call_t0_ns ? call_t0_ns - ev_start_ns : 0;
  // A pair wholly before the call cannot be an early-recorded start: the mapping's error again.
  const uint64_t shift = early <= kMappingErrorNs || ev_stop_ns < call_t0_ns ? early : 0;
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
