// Pure conversion of CUPTI activity records into the agent's kDeviceOp events, and the mapping
// of CUPTI timestamps onto host CLOCK_MONOTONIC.
//
// No CUPTI call happens here, so tests feed synthetic records (Kineto's idea: the vendor API
// behind a seam, the logic on a CPU). Not hot path: runs on the thread CUPTI delivers
// completed buffers on. Thread safety: ClockMap is a value type; callers serialize updates.
#ifndef PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_
#define PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_

#include <cupti_activity.h>

#include <cstdint>

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
// flag kFlagTimeNs, t0/t1 in host monotonic ns.
bool ActivityToEvent(const CUpti_Activity* rec, const ClockMap& clock, InternFn intern,
                     RawEvent* out);

}  // namespace cupti
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUPTI_ACTIVITY_H_
