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
  } else {
    left_ = idle;
  }
}

bool ScheduleCursor::OnStepEnd(uint64_t t0, uint64_t t1) {
  if (always_) return true;
  if (done_) return false;
  if (!active_) {
    if (--left_ == 0) {
      active_ = true;
      left_ = s_.active_;
      on_since_ = t1;
    }
    return false;
  }
  if (t0 < on_since_) {
    ++partial_;
    return false;
  }
  if (--left_ == 0) {
    ++cycles_;
    const uint64_t idle = uint64_t(s_.wait_) + s_.warmup_;
    if (s_.repeat_ != 0 && cycles_ >= s_.repeat_) {
      active_ = false;
      done_ = true;
    } else if (idle == 0) {
      left_ = s_.active_;  // recording stays on
    } else {
      active_ = false;
      left_ = idle;
    }
  }
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
