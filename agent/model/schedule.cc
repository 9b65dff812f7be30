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
