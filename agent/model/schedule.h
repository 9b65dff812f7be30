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
  friend class ScheduleCursor;
  bool set_ = false;
  uint32_t wait_ = 0, warmup_ = 0, active_ = 0, repeat_ = 0;
};

// The schedule's progress over the steps as they begin and end, for steps that may overlap
// (threads that each mark their own steps). Recording resumes when a wait/warm-up phase's last
// step ends; a step is recorded when recording was on for the whole of it: it began in the
// active phase (OnStepBegin said so), or, where its beginning was not seen (step-rule steps,
// which do not overlap), at or after the tick recording resumed. The active phase closes when
// `active` such steps were recorded, but recording goes on until the steps that began in it
// end too (they are recorded: a step that ended after the phase closed keeps all its work).
// A step that ends in an active phase but began before it is not recorded (`partial`): part
// of its work was not. Steps that do not overlap get exactly PhaseOf's answer, step by step.
// Not thread-safe: the caller serializes the calls.
class ScheduleCursor {
 public:
  // OnStepEnd's `began` for a step whose beginning was not seen: judged by its start tick.
  static constexpr uint32_t kBeganUnknown = ~0u;
  // A step that began in a closed phase still open after this many other steps ended is given
  // up (a step range never ended must not keep recording on): it is then `partial`.
  static constexpr uint64_t kMaxOverrun = 64;

  explicit ScheduleCursor(const Schedule& s);
  // Recording is on: the active phase, or the steps begun in a closed one still run.
  bool active() const { return active_ || overrun_open_ > 0; }
  // A step begins; returns what OnStepEnd takes as `began`: the active phase it began in
  // (1, 2, ...); kOverrun | n when the phase had closed but recording was still on for the steps
  // begun in it (such a step, if recording stays on to its end, is recorded too: its work is
  // in the file whole); 0 when recording was off.
  uint32_t OnStepBegin();
  static constexpr uint32_t kOverrun = 0x80000000u;
  // A step [t0, t1] (ticks) ended; true when it is recorded. Recording resumes at t1 when this
  // step ends a wait/warm-up phase.
  bool OnStepEnd(uint64_t t0, uint64_t t1, uint32_t began = kBeganUnknown);
  uint64_t partial() const { return partial_; }
  // Steps begun in an active phase and given up (still open kMaxOverrun steps after it
  // closed) that have not ended (yet): at exit, ranges never ended.
  uint64_t abandoned() const { return abandoned_; }

 private:
  void ClosePhase();
  Schedule s_;
  bool always_ = false, active_ = false, done_ = false;
  uint64_t left_ = 0;      // steps left in the current phase (wait+warm-up, or active)
  uint64_t cycles_ = 0;    // active phases completed
  uint64_t on_since_ = 0;  // tick recording resumed
  uint64_t partial_ = 0;
  uint32_t epoch_ = 0;         // active phases begun (the current or last one's number)
  uint64_t open_ = 0;          // steps begun in the current active phase, not ended
  uint64_t overrun_open_ = 0;  // steps begun in closed phases (given-up ones excluded)
  uint32_t given_up_ = 0;      // steps begun in phases up to this one are no longer waited for
  uint64_t overrun_ends_ = 0;  // other steps ended while overrun_open_ > 0
  uint32_t offs_ = 0;          // times recording went off (a step that saw none: whole)
  uint64_t abandoned_ = 0;     // given up, not ended
  bool EndStep(uint64_t t0, uint64_t t1, uint32_t began);
};

const char* PhaseName(Schedule::Phase p);

}  // namespace model
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_SCHEDULE_H_
