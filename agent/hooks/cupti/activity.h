// Pure conversion of CUPTI activity records into the agent's kDeviceOp events, and the mapping
// of CUPTI timestamps onto host CLOCK_MONOTONIC.
//
// No CUPTI call happens here, so tests feed synthetic records (Kineto's idea: the vendor API
// behind a seam, the logic on a CPU). Not hot path: runs on the thread CUPTI delivers
// completed buffers on. Thread safety: ClockMap is a value type; callers serialize updates.
#ifndef PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_
#define PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_

#include <cupti_activity.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "agent/core/event.h"

namespace profagent {
namespace cupti {

// Maps a CUPTI timestamp to host monotonic ns. Identity when CUPTI uses our timestamp callback;
// otherwise a line through the first and the latest paired sample (device_ns, monotonic_ns).
class ClockMap {
 public:
  void SetIdentity() { identity_ = true; }
  bool identity() const { return identity_; }
  // Adds a paired reading. The first one anchors the line, later ones refine the slope.
  void AddSample(uint64_t device_ns, uint64_t mono_ns);
  uint64_t ToMono(uint64_t device_ns) const;
  int samples() const { return samples_; }

 private:
  bool identity_ = false;
  int samples_ = 0;
  uint64_t dev0_ = 0, mono0_ = 0;
  double slope_ = 1.0;
};

// Interns a kernel name (slow path; the caller may cache by pointer).
using InternFn = uint32_t (*)(const char* name);

// Converts one record. Returns false for kinds the agent does not report (the caller skips
// them). Kernels (CONCURRENT_KERNEL/KERNEL: CUpti_ActivityKernel10), memcpy (Memcpy6), peer
// memcpy (MemcpyPtoP4) and memset (Memset4) are understood. The event has type kDeviceOp,
// flag kFlagTimeNs, t0/t1 in host monotonic ns. A record of a known kind without times (start
// or end CUPTI_TIMESTAMP_UNKNOWN) is converted (`out` says what it was) but returns false, with
// `*untimed` set.
bool ActivityToEvent(const CUpti_Activity* rec, const ClockMap& clock, InternFn intern,
                     RawEvent* out, bool* untimed = nullptr);

// The graph node that ran a kernel, copy or set a graph launch made (graphNodeId), 0 = none or a
// kind without one.
uint64_t GraphNodeOf(const CUpti_Activity* rec);

// Which CUPTI correlation ids belong to calls made while the agent was recording. The schedule
// (PROFAGENT_SCHEDULE) and the capture range (PROFAGENT_CAPTURE) switch recording off for whole
// stretches of steps, but CUPTI keeps delivering activity records for every kernel, copy and
// set: the ones whose call was not recorded must not reach the file (they would fill it with the
// kernels of unrecorded steps, and count in the report as device ops without a launch).
//
// The API callbacks note each call's correlation id with the recording state at its entry;
// only a change of state takes the lock and appends a boundary, so the steady state costs one
// relaxed load. Correlation ids grow with time (CUPTI hands them out from one counter), so the
// boundaries form sorted intervals and Recorded() is a binary search. A call racing a switch on
// another thread may land on either side, as it would in the host-side hooks.
class RecordedCorrs {
 public:
  // `recording`: whether the call with correlation id `corr` is recorded.
  void Note(uint32_t corr, bool recording) {
    if (recording == state_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (recording == state_.load(std::memory_order_relaxed)) return;
    // Keep the boundaries sorted even when a thread with an older id arrives late.
    if (!bounds_.empty() && corr < bounds_.back().corr) corr = bounds_.back().corr;
    bounds_.push_back({corr, recording});
    state_.store(recording, std::memory_order_relaxed);
    any_.store(true, std::memory_order_release);
  }
  // Whether an activity record with correlation id `corr` belongs to a recorded call. Ids before
  // the first boundary are recorded (the state starts "recording"); 0 (no id) always is.
  bool Recorded(uint32_t corr) const {
    if (corr == 0 || !any_.load(std::memory_order_acquire)) return true;
    std::lock_guard<std::mutex> lock(mu_);
    size_t lo = 0, hi = bounds_.size();  // first boundary with corr > `corr`
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (bounds_[mid].corr <= corr) lo = mid + 1;
      else hi = mid;
    }
    return lo == 0 ? true : bounds_[lo - 1].recording;
  }
  size_t boundaries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bounds_.size();
  }

 private:
  struct Bound {
    uint32_t corr;
    bool recording;
  };
  std::atomic<bool> state_{true};
  std::atomic<bool> any_{false};
  mutable std::mutex mu_;
  std::vector<Bound> bounds_;
};

}  // namespace cupti
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_
