// The profiling schedule (PROFAGENT_SCHEDULE="wait=W,warmup=U,active=A,repeat=R"), with
// torch.profiler.schedule's meaning counted in steps: each cycle is W steps not recorded, U
// warm-up steps, A recorded steps; R cycles (0 = forever), then nothing more is recorded.
//
// Decision (differs from torch only in cost): torch runs the profiler during warm-up and
// discards the result; the agent records nothing during wait and warm-up steps (the warm-up
// exists in torch to let the profiler settle, which the agent does not need), so a warm-up step
// and a wait step behave the same here. Steps are numbered from 0; everything before the first
// step boundary belongs to step 0.
//
// Schedule is an immutable value: PhaseOf is a pure function, safe from any thread.
#ifndef PROFAGENT_AGENT_MODEL_SCHEDULE_H_
#define PROFAGENT_AGENT_MODEL_SCHEDULE_H_

#include <cstdint>

#include "agent/core/config.h"

namespace profagent {
namespace model {

class Schedule {
 public:
  enum class Phase { kWait, kWarmup, kActive, kDone };

  // No schedule: every step is active.
  Schedule() = default;
  Schedule(uint32_t wait, uint32_t warmup, uint32_t active, uint32_t repeat)
      : set_(true), wait_(wait), warmup_(warmup), active_(active), repeat_(repeat) {}
  static Schedule FromConfig(const Config& c) {
    return c.schedule_set ? Schedule(c.sched_wait, c.sched_warmup, c.sched_active, c.sched_repeat)
                          : Schedule();
  }

  // Phase of step `step` (0-based). A schedule whose cycle is empty (all zero) is always
  // active; one with active=0 never records.
  Phase PhaseOf(uint64_t step) const;

  // True when step `step` is recorded.
  bool Recorded(uint64_t step) const { return PhaseOf(step) == Phase::kActive; }

  bool is_set() const { return set_; }

 private:
  bool set_ = false;
  uint32_t wait_ = 0, warmup_ = 0, active_ = 0, repeat_ = 0;
};

const char* PhaseName(Schedule::Phase p);

}  // namespace model
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_SCHEDULE_H_
