#include "agent/model/schedule.h"

namespace profagent {
namespace model {

Schedule::Phase Schedule::PhaseOf(uint64_t step) const {
  if (!set_) return Phase::kActive;
  const uint64_t cycle = uint64_t(wait_) + warmup_ + active_;
  if (cycle == 0) return Phase::kActive;
  if (repeat_ != 0 && step / cycle >= repeat_) return Phase::kDone;
  const uint64_t r = step % cycle;
  if (r < wait_) return Phase::kWait;
  if (r < uint64_t(wait_) + warmup_) return Phase::kWarmup;
  return Phase::kActive;
}

ScheduleCursor::ScheduleCursor(const Schedule& s) : s_(s) {
  const uint64_t idle = uint64_t(s.wait_) + s.warmup_;
  if (!s.set_ || idle + s.active_ == 0) {
    always_ = active_ = true;
  } else if (s.active_ == 0) {
    done_ = true;
  } else if (idle == 0) {
    active_ = true;
    left_ = s.active_;
    epoch_ = 1;
  } else {
    left_ = idle;
  }
}

uint32_t ScheduleCursor::OnStepBegin() {
  if (always_) return 0;
  if (!active_) return overrun_open_ > 0 ? kOverrun | (offs_ & ~kOverrun) : 0;
  ++open_;
  return epoch_;
}

void ScheduleCursor::ClosePhase() {
  ++cycles_;
  const uint64_t idle = uint64_t(s_.wait_) + s_.warmup_;
  if (s_.repeat_ != 0 && cycles_ >= s_.repeat_) {
    active_ = false;
    done_ = true;
  } else if (idle == 0) {
    left_ = s_.active_;  // recording stays on
    ++epoch_;            // the steps still open are the closed phase's
  } else {
    active_ = false;
    left_ = idle;
  }
  if (open_ > 0 && overrun_open_ == 0) overrun_ends_ = 0;
  overrun_open_ += open_;
  open_ = 0;
}

bool ScheduleCursor::OnStepEnd(uint64_t t0, uint64_t t1, uint32_t began) {
  if (always_) return true;
  const bool on = active();
  const bool recorded = EndStep(t0, t1, began);
  if (on && !active()) ++offs_;
  return recorded;
}

bool ScheduleCursor::EndStep(uint64_t t0, uint64_t t1, uint32_t began) {
  const bool known = began != 0 && began != kBeganUnknown;
  const bool overrun = known && (began & kOverrun) != 0;
  const bool current = known && !overrun && began == epoch_ && active_;
  if (known && !overrun && !current) {
    // Began in an active phase that has closed since: recorded whole, unless given up.
    if (began <= given_up_) {
      ++partial_;
      if (abandoned_ > 0) --abandoned_;
      return false;
    }
    if (overrun_open_ > 0) --overrun_open_;
    return true;
  }
  // Begun while only a closed phase's late steps kept recording on: recorded when it stayed
  // on to its end (counted in no active phase), else its work is in part.
  const bool whole_overrun = overrun && active() && (offs_ & ~kOverrun) == (began & ~kOverrun);
  // Any other step's end counts towards giving the closed phases' late steps up.
  if (overrun_open_ > 0 && ++overrun_ends_ > kMaxOverrun) {
    given_up_ = active_ ? epoch_ - 1 : epoch_;  // every closed phase's
    abandoned_ += overrun_open_;
    overrun_open_ = 0;
  }
  if (current) {
    --open_;
    if (--left_ == 0) ClosePhase();
    return true;
  }
  if (overrun && !whole_overrun) ++partial_;
  if (done_) return whole_overrun;
  if (!active_) {
    if (--left_ == 0) {
      active_ = true;
      left_ = s_.active_;
      on_since_ = t1;
      ++epoch_;
      open_ = 0;
    }
    return whole_overrun;
  }
  if (overrun) return whole_overrun;
  // Active, and the step began while recording was off (began == 0), or by its start tick.
  if (began == 0 || t0 < on_since_) {
    ++partial_;
    return false;
  }
  if (--left_ == 0) ClosePhase();
  return true;
}

const char* PhaseName(Schedule::Phase p) {
  switch (p) {
    case Schedule::Phase::kWait: return "wait";
    case Schedule::Phase::kWarmup: return "warmup";
    case Schedule::Phase::kActive: return "active";
    case Schedule::Phase::kDone: return "done";
  }
  return "?";
}

}  // namespace model
}  // namespace profagent
