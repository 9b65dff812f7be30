// Unit tests of the profiling schedule: the pure phase function and the state machine that
// agent/model drives at step boundaries (SetScheduleActive calls, which steps are emitted).
#include "agent/model/schedule.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "agent/core/agent.h"
#include "agent/model/steps.h"
#include "agent/model/testing/fake_core.h"

namespace profagent {
namespace model {
namespace {

using P = Schedule::Phase;

std::string Phases(const Schedule& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    switch (s.PhaseOf(uint64_t(i))) {
      case P::kWait: out += 'w'; break;
      case P::kWarmup: out += 'u'; break;
      case P::kActive: out += 'A'; break;
      case P::kDone: out += '.'; break;
    }
  }
  return out;
}

TEST_CASE("phases follow torch.profiler.schedule") {
  CHECK(Phases(Schedule(), 5) == "AAAAA");                // no schedule: everything
  CHECK(Phases(Schedule(1, 1, 2, 2), 12) == "wuAAwuAA....");
  CHECK(Phases(Schedule(2, 0, 1, 0), 9) == "wwAwwAwwA");  // repeat 0 = forever
  CHECK(Phases(Schedule(0, 0, 3, 1), 5) == "AAA..");
  CHECK(Phases(Schedule(0, 2, 1, 3), 10) == "uuAuuAuuA.");
  CHECK(Phases(Schedule(0, 0, 0, 0), 3) == "AAA");        // empty cycle: always active
  CHECK(Phases(Schedule(2, 0, 0, 0), 4) == "wwww");       // active=0 never records
  CHECK(Schedule(1, 1, 2, 2).Recorded(2));
  CHECK_FALSE(Schedule(1, 1, 2, 2).Recorded(1));
  // Far steps: no overflow in the cycle arithmetic.
  CHECK(Schedule(1, 0, 1, 0).PhaseOf(uint64_t(1) << 40 | 1) == P::kActive);
}

TEST_CASE("FromConfig reads PROFAGENT_SCHEDULE fields") {
  Config c;
  CHECK_FALSE(Schedule::FromConfig(c).is_set());
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_warmup = 1;
  c.sched_active = 2;
  c.sched_repeat = 1;
  CHECK(Phases(Schedule::FromConfig(c), 6) == "wuAA..");
}

// Step ranges through the NVTX surface's model calls: a begin (its cookie) and an end.
struct StepRanges {
  std::string message;
  uint64_t Begin() const { return OnNvtxRangeStart(message.data(), message.size()); }
  void End(uint64_t t0, uint64_t t1, uint64_t cookie) const {
    OnNvtxRangeEnd(t0, t1, message.data(), message.size(), cookie);
  }
};

// The model reset with schedule wait=W, active=A, repeat=R.
void ResetSchedule(uint32_t wait, uint32_t active, uint32_t repeat) {
  Config c;
  c.schedule_set = true;
  c.sched_wait = wait;
  c.sched_active = active;
  c.sched_repeat = repeat;
  fake::Reset(c);
  ResetForTest(c);
}

void EndStepRange(uint64_t t0, uint64_t t1) {
  const std::string m = "step tokens=1";
  OnNvtxRangeEnd(t0, t1, m.data(), m.size());
}

TEST_CASE("the model switches recording at step boundaries and emits only active steps") {
  Config c;
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_warmup = 1;
  c.sched_active = 2;
  c.sched_repeat = 2;
  fake::Reset(c);
  ResetForTest(c);
  // Step 0 is a wait step: recording is off from the start.
  REQUIRE(fake::ScheduleCalls() == std::vector<bool>{false});
  CHECK_FALSE(Recording());
  for (int i = 0; i < 10; ++i) EndStepRange(uint64_t(100 * i), uint64_t(100 * i + 50));
  // After step k ends, the agent records step k + 1 iff it is active:
  // steps 0..9 = w u A A w u A A . . -> calls for steps 1..10.
  std::vector<bool> want{false, /*1*/ false, true, true, false, false, true, true,
                         false, false, false};
  CHECK(fake::ScheduleCalls() == want);
  CHECK_FALSE(Recording());  // the schedule is done
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 4);
  const uint32_t want_index[] = {2, 3, 6, 7};
  for (size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].e.step.index == want_index[i]);
    CHECK(steps[i].e.t0 == 100 * want_index[i]);
    CHECK(steps[i].e.t1 == 100 * want_index[i] + 50);
    CHECK(steps[i].e.step.tokens == 1);
  }
  Stats st = GetStats();
  CHECK(st.steps == 10);
  CHECK(st.steps_emitted == 4);
}

TEST_CASE("without a schedule every step is emitted and recording is never touched") {
  Config c;
  fake::Reset(c);
  ResetForTest(c);
  for (int i = 0; i < 3; ++i) EndStepRange(uint64_t(i), uint64_t(i + 1));
  CHECK(fake::ScheduleCalls().empty());
  CHECK(fake::EventsOfType(EvType::kStep).size() == 3);
}

// A process that marks no step at all (rank 1 of a job where rank 0 alone marks steps) stays
// in the schedule's first phase: said at shutdown, with what that meant.
TEST_CASE("a schedule in a process that marks no step: a warning at shutdown") {
  for (uint32_t wait : {1u, 0u}) {
    Config c;
    c.schedule_set = true;
    c.sched_wait = wait;
    c.sched_active = 2;
    fake::Reset(c);
    ResetForTest(c);
    Shutdown();
    std::string note;
    for (const std::string& n : fake::Notes()) {
      if (n.find("PROFAGENT_SCHEDULE: this process marked no step") != std::string::npos) note = n;
    }
    INFO(note);
    CHECK(note.find(wait > 0 ? "nothing but allocations" : "everything was recorded") !=
          std::string::npos);
  }
  // With a step, no such note.
  Config c;
  c.schedule_set = true;
  c.sched_active = 1;
  fake::Reset(c);
  ResetForTest(c);
  EndStepRange(0, 10);
  Shutdown();
  for (const std::string& n : fake::Notes()) CHECK(n.find("marked no step") == std::string::npos);
}

TEST_CASE("a schedule that starts active records from the first step") {
  Config c;
  c.schedule_set = true;
  c.sched_active = 2;
  c.sched_repeat = 1;
  fake::Reset(c);
  ResetForTest(c);
  CHECK(fake::ScheduleCalls() == std::vector<bool>{true});
  for (int i = 0; i < 3; ++i) EndStepRange(uint64_t(i), uint64_t(i + 1));
  CHECK(fake::ScheduleCalls() == std::vector<bool>{true, true, false, false});
  CHECK(fake::EventsOfType(EvType::kStep).size() == 2);
}

TEST_CASE("the cursor: steps that do not overlap get PhaseOf's answer") {
  for (const Schedule& sch :
       {Schedule(), Schedule(1, 1, 2, 2), Schedule(2, 0, 1, 0), Schedule(0, 0, 3, 1),
        Schedule(0, 2, 1, 3), Schedule(0, 0, 0, 0), Schedule(2, 0, 0, 0), Schedule(3, 0, 2, 0)}) {
    ScheduleCursor c(sch);
    std::string got, want;
    for (uint64_t i = 0; i < 16; ++i) {
      want += sch.Recorded(i) ? 'A' : '-';
      got += c.active() ? 'A' : '-';  // recording on while step i runs
      const bool rec = c.OnStepEnd(10 * i, 10 * i + 5);
      CHECK(rec == sch.Recorded(i));
    }
    CHECK(got == want);
    CHECK(c.partial() == 0);
  }
}

// Two threads' steps overlap by half: A_i = [100 i, 100 i + 100), B_i = [100 i + 50, ...).
// wait=2, active=2: recording resumes when the second step ends (B0 at 150); A1 (from 100) ends
// next but began before: not recorded (partial); B1 and A2, whole, are the active phase's two.
TEST_CASE("the cursor: overlapping steps are recorded only whole, and the phase waits for them") {
  ScheduleCursor c(Schedule(2, 0, 2, 1));
  struct S {
    uint64_t t0, t1;
    bool recorded;
  };
  const std::vector<S> ends = {{0, 100, false},  {50, 150, false}, {100, 200, false},
                               {150, 250, true}, {200, 300, true}, {250, 350, false},
                               {300, 400, false}};
  for (const S& e : ends) {
    INFO("step [" << e.t0 << ", " << e.t1 << ")");
    CHECK(c.OnStepEnd(e.t0, e.t1) == e.recorded);
  }
  CHECK(c.partial() == 1);
  CHECK_FALSE(c.active());  // repeat=1: done
}

// Thread A's steps [100 i, 100 i + 100); thread B's one step begins at 250 (recording is on)
// and ends at 480, after A's third active step closed the phase (wait=2, active=3, repeat=1):
// recording stays on until B's step ends, and B's step is recorded (it was dropped, with its
// work recorded and charged to A's step).
TEST_CASE("the cursor: a step begun in the active phase is recorded when it ends after it") {
  ScheduleCursor c(Schedule(2, 0, 3, 1));
  CHECK_FALSE(c.active());
  CHECK(c.OnStepEnd(0, 100, c.OnStepBegin()) == false);  // A0 (began while off: 0)
  const uint32_t a1 = c.OnStepBegin();
  CHECK(a1 == 0);
  CHECK(c.OnStepEnd(100, 200, a1) == false);  // A1 ends the wait phase
  CHECK(c.active());
  const uint32_t a2 = c.OnStepBegin();
  const uint32_t b = c.OnStepBegin();  // B begins at 250
  CHECK(a2 == 1);
  CHECK(b == 1);
  CHECK(c.OnStepEnd(200, 300, a2));
  const uint32_t a3 = c.OnStepBegin();
  CHECK(c.OnStepEnd(300, 400, a3));
  const uint32_t a4 = c.OnStepBegin();
  CHECK(c.OnStepEnd(400, 500 - 30, a4));  // the third: the phase closes (repeat=1: done)...
  CHECK(c.active());                      // ...but B still runs: recording stays on
  // A5 begins after the close, while B keeps recording on: not the phase's.
  const uint32_t a5 = c.OnStepBegin();
  CHECK(a5 == ScheduleCursor::kOverrun);
  CHECK(c.OnStepEnd(250, 480, b));  // B: recorded whole
  CHECK_FALSE(c.active());
  CHECK(c.partial() == 0);
  // A5 ends with recording off since B's end: its work is in part, counted.
  CHECK_FALSE(c.OnStepEnd(470, 570, a5));
  CHECK(c.partial() == 1);
}

// A step begun after the phase closed, while a late step keeps recording on, and ended before
// that one: all its work was recorded, so it is recorded too (not counted in any phase; before,
// its work was in the file without a step, charged to another thread's).
TEST_CASE("the cursor: a step begun and ended while late steps keep recording on is recorded") {
  ScheduleCursor c(Schedule(1, 0, 1, 0));
  CHECK_FALSE(c.OnStepEnd(0, 10, c.OnStepBegin()));  // wait
  const uint32_t late = c.OnStepBegin();
  CHECK(c.OnStepEnd(10, 20, c.OnStepBegin()));  // the active step: the phase closes
  const uint32_t mid = c.OnStepBegin();
  CHECK((mid & ScheduleCursor::kOverrun) != 0);
  CHECK(c.OnStepEnd(20, 30, mid));   // whole: recorded; a wait step all the same
  CHECK(c.active());                 // the wait phase (1 step) is over: active again
  CHECK(c.OnStepEnd(15, 35, late));  // the closed phase's late step
  CHECK(c.partial() == 0);
}

// A step range begun in the active phase and never ended must not keep recording on.
TEST_CASE("the cursor: a step left open after its phase closed is waited for 64 steps") {
  ScheduleCursor c(Schedule(1, 0, 1, 0));
  CHECK(c.OnStepEnd(0, 10, c.OnStepBegin()) == false);  // wait
  const uint32_t stuck = c.OnStepBegin();
  CHECK(c.OnStepEnd(10, 20, c.OnStepBegin()));  // the active phase's one step: closes
  CHECK(c.active());                            // `stuck` runs on
  uint64_t t = 20;
  int ends = 0;
  while (c.active() && ends < 1000) {
    c.OnStepEnd(t, t + 10, c.OnStepBegin());
    t += 10;
    ++ends;
  }
  // Each wait step re-activates recording every other step (wait=1, active=1): active()
  // turns false after the give-up only on a wait phase.
  CHECK(ends <= int(ScheduleCursor::kMaxOverrun) + 2);
  CHECK(ends >= int(ScheduleCursor::kMaxOverrun) - 1);
  CHECK(c.abandoned() == 1);               // given up, still open (at exit: a warning)
  CHECK_FALSE(c.OnStepEnd(15, t, stuck));  // given up: partial, not recorded
  CHECK(c.partial() == 1);
  CHECK(c.abandoned() == 0);
}

// Without waits (wait=0, warmup=0) recording never pauses; a step that spans two active
// phases belongs to the one it began in and does not count towards the next.
TEST_CASE("the cursor: back-to-back active phases count each step once") {
  ScheduleCursor c(Schedule(0, 0, 2, 2));
  const uint32_t long_step = c.OnStepBegin();
  CHECK(long_step == 1);
  CHECK(c.OnStepEnd(0, 10, c.OnStepBegin()));
  CHECK(c.OnStepEnd(10, 20, c.OnStepBegin()));  // phase 1 closes, phase 2 begins
  CHECK(c.active());
  CHECK(c.OnStepEnd(0, 25, long_step));  // phase 1's: recorded, not counted in 2
  CHECK(c.OnStepEnd(20, 30, c.OnStepBegin()));
  CHECK(c.active());                            // phase 2 has one of its 2 steps
  CHECK(c.OnStepEnd(30, 40, c.OnStepBegin()));  // repeat=2: done
  CHECK_FALSE(c.active());
  CHECK_FALSE(c.OnStepEnd(40, 50, c.OnStepBegin()));
  CHECK(c.partial() == 0);
}

// The model sees a step's beginning (OnNvtxRangeStart) and its end: the helper's two-thread
// program, through the NVTX surface's calls.
TEST_CASE("the model: a step begun while recording is emitted when it ends after the phase") {
  ResetSchedule(1, 1, 1);
  const StepRanges r{"step tokens=2"};
  r.End(0, 100, r.Begin());  // wait step: recording resumes
  CHECK(Recording());
  const uint64_t a = r.Begin(), b = r.Begin();
  CHECK(a != 0);
  r.End(100, 200, a);  // the active step: the phase closes, B still runs
  CHECK(Recording());
  r.End(150, 260, b);
  CHECK_FALSE(Recording());
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].e.t0 == 150);
  CHECK(steps[1].e.step.tokens == 2);
  Shutdown();
  for (const std::string& n : fake::Notes())
    CHECK(n.find("not recorded whole") == std::string::npos);
}

// A step range that never ends (its thread died inside it) is given up, and said at exit.
TEST_CASE("the model: a step range never ended is given up and counted at exit") {
  ResetSchedule(1, 1, 0);
  const StepRanges r{"step tokens=1"};
  r.End(0, 10, r.Begin());  // wait
  r.Begin();                // never ended
  uint64_t t = 10;
  for (int i = 0; i < 200; ++i, t += 10) r.End(t, t + 10, r.Begin());
  Shutdown();
  std::string note;
  for (const std::string& n : fake::Notes()) {
    if (n.find("never ended") != std::string::npos) note = n;
  }
  std::string all;
  for (const std::string& n : fake::Notes()) all += n + "\n";
  INFO(all);
  CHECK(note.find("1 step range(s) begun in an active phase") != std::string::npos);
}

TEST_CASE("the model: NVTX steps drive the schedule; step-rule boundaries are then ignored") {
  Config c;
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_active = 1;
  c.step_rule = StepRule::kStreamSync;
  fake::Reset(c);
  ResetForTest(c);
  // Syncs between and inside the NVTX steps (the engine syncs each step): ignored once the
  // first NVTX step has ended, with one note.
  for (int i = 0; i < 6; ++i) {
    const uint64_t t = uint64_t(100 * i);
    OnHostSync(t + 10, t + 20, 0);
    EndStepRange(t, t + 50);
    OnHostSync(t + 60, t + 70, 0);
  }
  auto steps = fake::EventsOfType(EvType::kStep);
  // The first sync only opened a rule step, which the first NVTX step's end made moot: NVTX
  // steps alone, w A w A w A (without the fix, rule steps took every other boundary).
  std::vector<uint64_t> t0s;
  for (const auto& e : steps) t0s.push_back(e.e.t0);
  CHECK(t0s == std::vector<uint64_t>{100, 300, 500});
  size_t notes = 0;
  for (const std::string& n : fake::Notes()) {
    notes += n.find("PROFAGENT_STEP_RULE: the application marks NVTX steps") != std::string::npos;
  }
  CHECK(notes == 1);
}

}  // namespace
}  // namespace model
}  // namespace profagent
