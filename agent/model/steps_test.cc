// Unit tests of agent/model's step/run recognition and step rules, against a fake core that
// captures the emitted kStep/kRun events.
#include "agent/model/steps.h"

#include <atomic>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/model/testing/fake_core.h"

namespace profagent {
namespace model {
namespace {

void Range(uint64_t t0, uint64_t t1, const std::string& m) {
  uint64_t cookie = OnNvtxRangeStart(m.data(), m.size());
  OnNvtxRangeEnd(t0, t1, m.data(), m.size(), cookie);
}

void Fresh(const Config& c) {
  fake::Reset(c);
  ResetForTest(c);
}

TEST_CASE("NVTX step and run ranges become kStep/kRun with parsed fields") {
  Config c;
  c.kv_reduce = KvReduce::kMax;
  Fresh(c);
  const std::string run = "run label=bs8 warmup=1";
  uint64_t cookie = OnNvtxRangeStart(run.data(), run.size());
  CHECK(cookie != 0);
  Range(10, 20, "step phase=prefill tokens=64 kv=12,40,33 bsz=2");
  Range(20, 25, "prefill");  // an ordinary range: nothing
  Range(25, 30, "step phase=decode tokens=2 kv=41,34 bsz=2");
  OnNvtxRangeEnd(5, 40, run.data(), run.size(), cookie);
  Range(50, 60, "step tokens=1");  // after the run: run = 0

  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 3);
  const StepPayload& s0 = steps[0].e.step;
  CHECK(steps[0].e.t0 == 10);
  CHECK(steps[0].e.t1 == 20);
  CHECK(s0.index == 0);
  CHECK(s0.run == 1);
  CHECK(s0.tokens == 64);
  CHECK(s0.kv == 40);
  CHECK(s0.bsz == 2);
  CHECK(fake::StringOf(s0.phase) == "prefill");
  CHECK(s0.label == 0);
  CHECK(s0.source == 0);
  CHECK(steps[1].e.step.index == 1);
  CHECK(steps[1].e.step.kv == 41);
  CHECK(fake::StringOf(steps[1].e.step.phase) == "decode");
  CHECK(steps[1].e.step.run == 1);
  CHECK(steps[2].e.step.index == 2);
  CHECK(steps[2].e.step.run == 0);
  CHECK(steps[2].e.step.kv == -1);
  CHECK(steps[2].e.step.bsz == -1);
  CHECK(steps[2].e.step.phase == 0);

  auto runs = fake::EventsOfType(EvType::kRun);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].e.t0 == 5);
  CHECK(runs[0].e.t1 == 40);
  CHECK(runs[0].e.step.index == 1);
  CHECK(runs[0].e.step.run == 0);
  CHECK(runs[0].e.step.warmup == 1);
  CHECK(fake::StringOf(runs[0].e.step.label) == "bs8");
  CHECK(GetStats().runs == 1);
}

TEST_CASE("nested runs restore the enclosing run; a run seen only at its end is numbered then") {
  Fresh(Config());
  const std::string outer = "run label=outer", inner = "run label=inner";
  uint64_t co = OnNvtxRangeStart(outer.data(), outer.size());
  uint64_t ci = OnNvtxRangeStart(inner.data(), inner.size());
  Range(1, 2, "step");
  OnNvtxRangeEnd(0, 3, inner.data(), inner.size(), ci);
  Range(4, 5, "step");
  OnNvtxRangeEnd(0, 6, outer.data(), outer.size(), co);
  const std::string late = "run label=late";
  OnNvtxRangeEnd(7, 8, late.data(), late.size());  // no start notification
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].e.step.run == 2);
  CHECK(steps[1].e.step.run == 1);
  auto runs = fake::EventsOfType(EvType::kRun);
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].e.step.index == 2);
  CHECK(runs[0].e.step.run == 1);  // inner's enclosing run
  CHECK(runs[1].e.step.index == 1);
  CHECK(runs[2].e.step.index == 3);
  CHECK(fake::StringOf(runs[2].e.step.label) == "late");
}

// Two threads serving concurrently, each in its own run: a step belongs to its thread's run
// even when the other thread opened a run since (before, the last run opened on any thread).
// A thread with no run of its own takes the innermost open run of any thread.
TEST_CASE("concurrent threads: a step's run is its own thread's") {
  Fresh(Config());
  std::atomic<int> phase{0};
  auto wait_for = [&phase](int p) {
    while (phase.load() < p) std::this_thread::yield();
  };
  std::thread a([&] {
    const std::string run = "run label=A";
    uint64_t cookie = OnNvtxRangeStart(run.data(), run.size());  // run 1
    phase = 1;
    wait_for(2);  // B opened run 2
    Range(10, 20, "step tokens=1");
    OnNvtxRangeEnd(0, 30, run.data(), run.size(), cookie);
    phase = 3;
  });
  std::thread b([&] {
    wait_for(1);
    const std::string run = "run label=B";
    uint64_t cookie = OnNvtxRangeStart(run.data(), run.size());  // run 2
    phase = 2;
    wait_for(3);
    Range(40, 50, "step tokens=2");
    std::thread([] { Range(60, 70, "step tokens=3"); }).join();  // no run of its own
    OnNvtxRangeEnd(35, 80, run.data(), run.size(), cookie);
  });
  a.join();
  b.join();
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].e.step.tokens == 1);
  CHECK(steps[0].e.step.run == 1);
  CHECK(steps[1].e.step.tokens == 2);
  CHECK(steps[1].e.step.run == 2);
  CHECK(steps[2].e.step.run == 2);
}

TEST_CASE("custom step and run patterns") {
  Config c;
  c.step_pattern = "^iter\\b";
  c.run_pattern = "^benchmark\\b";
  Fresh(c);
  Range(0, 1, "step tokens=3");  // no longer a step
  Range(1, 2, "iter tokens=3");
  Range(0, 3, "benchmark label=x");
  CHECK(fake::EventsOfType(EvType::kStep).size() == 1);
  CHECK(fake::EventsOfType(EvType::kStep)[0].e.step.tokens == 3);
  CHECK(fake::EventsOfType(EvType::kRun).size() == 1);
}

TEST_CASE("an invalid pattern is reported and disables that pattern only") {
  Config c;
  c.step_pattern = "^step(";
  Fresh(c);
  Range(0, 1, "step(");
  Range(0, 2, "run");
  CHECK(fake::EventsOfType(EvType::kStep).empty());
  CHECK(fake::EventsOfType(EvType::kRun).size() == 1);
  auto notes = fake::Notes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("step pattern") != std::string::npos);
}

TEST_CASE("bad values are counted and noted at shutdown") {
  Fresh(Config());
  Range(0, 1, "step tokens=x kv=3");
  Range(1, 2, "step bsz=two");
  CHECK(GetStats().bad_values == 2);
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].e.step.tokens == -1);
  CHECK(steps[0].e.step.kv == 3);
  Shutdown();
  auto notes = fake::Notes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("2 key=value") != std::string::npos);
}

TEST_CASE("graph rule: a step runs from one graph launch's start to the next") {
  Config c;
  c.step_rule = StepRule::kGraphLaunch;
  Fresh(c);
  OnHostSync(0, 5, ~0ull);  // other rule: ignored
  OnGraphLaunch(100, 110, 7);
  OnGraphLaunch(200, 205, 7);
  OnGraphLaunch(330, 340, 7);
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].e.t0 == 100);
  CHECK(steps[0].e.t1 == 200);
  CHECK(steps[1].e.t0 == 200);
  CHECK(steps[1].e.t1 == 330);
  CHECK(steps[0].e.step.source == 1);
  CHECK(steps[1].e.step.index == 1);
  CHECK(steps[0].e.step.tokens == -1);
}

TEST_CASE("sync rule: stream filter, device syncs always count") {
  Config c;
  c.step_rule = StepRule::kStreamSync;
  c.step_rule_any_stream = false;
  c.step_rule_stream = 0xabc;
  Fresh(c);
  OnGraphLaunch(1, 2, 0xabc);  // other rule: ignored
  OnHostSync(10, 20, 0xabc);
  OnHostSync(30, 40, 0xdef);   // another stream: not a boundary
  OnHostSync(50, 60, ~0ull);   // device sync
  OnHostSync(70, 80, 0xabc);
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].e.t0 == 20);
  CHECK(steps[0].e.t1 == 60);
  CHECK(steps[1].e.t0 == 60);
  CHECK(steps[1].e.t1 == 80);
  CHECK(steps[0].e.step.source == 2);

  // sync:0 is the legacy default stream (also cudaStreamLegacy, 0x1), not "any stream".
  c.step_rule_stream = 0;
  Fresh(c);
  OnHostSync(10, 20, 0);
  OnHostSync(30, 40, 0xdef);  // another stream: not a boundary
  OnHostSync(50, 60, 1);
  REQUIRE(fake::EventsOfType(EvType::kStep).size() == 1);
  CHECK(fake::EventsOfType(EvType::kStep)[0].e.t1 == 60);
}

TEST_CASE("rule disabled: graph launches and syncs produce nothing") {
  Fresh(Config());
  OnGraphLaunch(1, 2, 0);
  OnGraphLaunch(3, 4, 0);
  OnHostSync(5, 6, ~0ull);
  OnHostSync(7, 8, ~0ull);
  CHECK(fake::Events().empty());
}

TEST_CASE("concurrent step ends get distinct indices") {
  Fresh(Config());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 250; ++i) Range(uint64_t(t), uint64_t(t + 1), "step tokens=1");
    });
  }
  for (auto& th : threads) th.join();
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 1000);
  std::vector<bool> seen(1000, false);
  for (const auto& s : steps) {
    REQUIRE(s.e.step.index < 1000);
    CHECK_FALSE(seen[s.e.step.index]);
    seen[s.e.step.index] = true;
  }
}

}  // namespace
}  // namespace model
}  // namespace profagent
