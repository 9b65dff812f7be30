#include "agent/model/steps.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "agent/core/agent.h"
#include "agent/core/event.h"
#include "agent/model/schedule.h"
#include "agent/model/step_parser.h"

namespace profagent {
namespace model {
namespace {

// Immutable after construction; replaced (and leaked) only by ResetForTest.
struct State {
  MessagePattern step;
  MessagePattern run;
  KvReduce reduce = KvReduce::kMean;
  StepRule rule = StepRule::kNone;
  bool rule_any_stream = true;
  uint64_t rule_stream = 0;
  Schedule schedule;
};

constexpr uint8_t kSourceNvtx = 0;
constexpr uint8_t kSourceGraph = 1;
constexpr uint8_t kSourceSync = 2;
// OnNvtxRangeStart's cookie for a step (a run's is (enclosing << 32) | index): this bit, and
// the cursor's OnStepBegin in the low 32 bits.
constexpr uint64_t kStepCookie = uint64_t(1) << 63;

std::atomic<State*> g_state{nullptr};
std::mutex g_init_mu;
std::atomic<void (*)()> g_flusher{nullptr};

std::atomic<uint64_t> g_steps{0};          // step boundaries so far = index of the next step
std::atomic<uint64_t> g_steps_emitted{0};
std::atomic<uint32_t> g_runs{0};           // runs started so far (= index of the last one)
std::atomic<uint32_t> g_current_run{0};    // innermost open run, any thread, 0 = none
// The innermost run this thread opened (push/pop ranges nest per thread): threads that serve
// requests concurrently each have theirs. A step of a thread with none takes g_current_run.
thread_local uint32_t t_current_run __attribute__((tls_model("initial-exec"))) = 0;

uint32_t CurrentRun() {
  const uint32_t own = t_current_run;
  return own != 0 ? own : g_current_run.load(std::memory_order_relaxed);
}
std::atomic<uint64_t> g_last_boundary{0};  // step rules: tick of the previous boundary
// Once the application has marked an NVTX step, the step rule's boundaries are ignored: the
// report keeps the NVTX steps, and the schedule must count those alone (two interleaved step
// sequences would switch recording at each other's boundaries).
std::atomic<bool> g_nvtx_step_seen{false};
std::atomic<bool> g_rule_ignored_noted{false};
// The schedule's progress (schedule.h), serialized: steps end on any thread.
std::mutex g_sched_mu;
ScheduleCursor* g_cursor = nullptr;  // guarded by g_sched_mu; replaced (leaked) by ResetForTest
std::atomic<uint64_t> g_bad_values{0};
std::atomic<bool> g_shutdown_done{false};

State* BuildState(const Config& c) {
  State* s = new State;
  std::string err;
  if (!s->step.Compile(c.step_pattern, &err)) {
    AddNote("warning", "step pattern disabled: " + err);
  }
  if (!s->run.Compile(c.run_pattern, &err)) {
    AddNote("warning", "run pattern disabled: " + err);
  }
  s->reduce = c.kv_reduce;
  s->rule = c.step_rule;
  s->rule_any_stream = c.step_rule_any_stream;
  s->rule_stream = c.step_rule_stream;
  s->schedule = Schedule::FromConfig(c);
  return s;
}

void InitSlow() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_state.load(std::memory_order_acquire) != nullptr) return;
  State* s = BuildState(GetConfig());
  {
    std::lock_guard<std::mutex> sched(g_sched_mu);
    g_cursor = new ScheduleCursor(s->schedule);
    if (s->schedule.is_set()) SetScheduleActive(g_cursor->active());
  }
  g_state.store(s, std::memory_order_release);
}

inline const State* GetState() {
  State* s = g_state.load(std::memory_order_acquire);
  if (__builtin_expect(s != nullptr, 1)) return s;
  InitSlow();
  return g_state.load(std::memory_order_acquire);
}

uint32_t InternView(std::string_view v) {
  return v.empty() ? 0 : InternString(std::string(v));
}

void EmitStepEvent(EvType type, uint64_t t0, uint64_t t1, const ParsedStep* p, uint64_t index,
                   uint32_t run, uint8_t source) {
  // The file is being finished (exit, exec, a signal): its last launches are no longer
  // recorded, so neither are steps (a step without its work would be an empty one).
  if (!RecordingMemory()) return;
  RawEvent e;
  std::memset(&e, 0, sizeof(e));
  e.type = type;
  e.t0 = t0;
  e.t1 = t1;
  e.step.tokens = p ? p->tokens : -1;
  int64_t kv = p ? p->kv : -1;
  e.step.kv = kv > INT32_MAX ? INT32_MAX : int32_t(kv);
  int64_t bsz = p ? p->bsz : -1;
  e.step.bsz = bsz > INT32_MAX ? INT32_MAX : int32_t(bsz);
  e.step.phase = p ? InternView(p->phase) : 0;
  e.step.label = p ? InternView(p->label) : 0;
  e.step.warmup = p && p->warmup ? 1 : 0;
  e.step.index = uint32_t(index);
  e.step.run = run;
  e.step.source = source;
  Emit(e);
}

void EmitStep(uint64_t t0, uint64_t t1, const ParsedStep* p, uint64_t index, uint8_t source) {
  if (!InCaptureRange(t0, /*whole=*/true)) return;
  EmitStepEvent(EvType::kStep, t0, t1, p, index, CurrentRun(), source);
  g_steps_emitted.fetch_add(1, std::memory_order_relaxed);
}

// A step [t0, t1] ended. Emits it when the schedule records it (whole: recording was on from
// its start) and moves the schedule on.
void EndStep(const State& s, uint64_t t0, uint64_t t1, const ParsedStep* p, uint8_t source,
             uint32_t began = ScheduleCursor::kBeganUnknown) {
  if (!s.schedule.is_set()) {
    EmitStep(t0, t1, p, g_steps.fetch_add(1, std::memory_order_relaxed), source);
    return;
  }
  // Under the lock, the step is emitted before recording may pause (its event must not be
  // the first thing the pause leaves out).
  std::lock_guard<std::mutex> lock(g_sched_mu);
  const uint64_t index = g_steps.fetch_add(1, std::memory_order_relaxed);
  if (g_cursor->OnStepEnd(t0, t1, began)) EmitStep(t0, t1, p, index, source);
  SetScheduleActive(g_cursor->active());
}

void RuleBoundary(const State& s, uint64_t t, uint8_t source) {
  if (g_nvtx_step_seen.load(std::memory_order_relaxed)) {
    if (!g_rule_ignored_noted.exchange(true, std::memory_order_relaxed)) {
      AddNote("warning",
              "PROFAGENT_STEP_RULE: the application marks NVTX steps; the rule's boundaries "
              "are ignored from its first NVTX step on");
    }
    return;
  }
  const uint64_t prev = g_last_boundary.exchange(t, std::memory_order_relaxed);
  if (prev == 0) return;  // the first boundary only opens the first step
  EndStep(s, prev, t, nullptr, source);
}

}  // namespace

void Init() { GetState(); }

uint64_t OnNvtxRangeStart(const char* msg, size_t n) {
  const State* s = GetState();
  if (!s->run.Matches(msg, n)) {
    // Under a schedule, a step's beginning tells whether recording was on for all of it.
    if (!s->schedule.is_set() || !s->step.Matches(msg, n)) return 0;
    std::lock_guard<std::mutex> lock(g_sched_mu);
    return kStepCookie | g_cursor->OnStepBegin();
  }
  const uint32_t index = g_runs.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint32_t enclosing = CurrentRun();
  t_current_run = index;
  g_current_run.store(index, std::memory_order_relaxed);
  return (uint64_t(enclosing) << 32) | index;
}

void OnNvtxRangeEnd(uint64_t t0, uint64_t t1, const char* msg, size_t n, uint64_t cookie) {
  const State* s = GetState();
  if (cookie & kStepCookie) {  // a step begun at OnNvtxRangeStart
    g_nvtx_step_seen.store(true, std::memory_order_relaxed);
    ParsedStep p = ParseStepMessage(msg, n, s->reduce);
    if (p.bad_values) g_bad_values.fetch_add(p.bad_values, std::memory_order_relaxed);
    EndStep(*s, t0, t1, &p, kSourceNvtx, uint32_t(cookie));
    return;
  }
  if (cookie != 0) {  // a run opened at OnNvtxRangeStart
    uint32_t index = uint32_t(cookie);
    const uint32_t enclosing = uint32_t(cookie >> 32);
    if (t_current_run == index) t_current_run = enclosing;
    g_current_run.compare_exchange_strong(index, enclosing, std::memory_order_relaxed);
    index = uint32_t(cookie);
    ParsedStep p = ParseStepMessage(msg, n, s->reduce);
    if (p.bad_values) g_bad_values.fetch_add(p.bad_values, std::memory_order_relaxed);
    if (InCaptureRange(t0, /*whole=*/false)) {
      EmitStepEvent(EvType::kRun, t0, t1, &p, index, enclosing, kSourceNvtx);
    }
    return;
  }
  if (s->step.Matches(msg, n)) {
    g_nvtx_step_seen.store(true, std::memory_order_relaxed);
    ParsedStep p = ParseStepMessage(msg, n, s->reduce);
    if (p.bad_values) g_bad_values.fetch_add(p.bad_values, std::memory_order_relaxed);
    EndStep(*s, t0, t1, &p, kSourceNvtx);
    return;
  }
  if (s->run.Matches(msg, n)) {  // a run whose start was not seen
    ParsedStep p = ParseStepMessage(msg, n, s->reduce);
    if (p.bad_values) g_bad_values.fetch_add(p.bad_values, std::memory_order_relaxed);
    const uint32_t index = g_runs.fetch_add(1, std::memory_order_relaxed) + 1;
    if (InCaptureRange(t0, /*whole=*/false)) {
      EmitStepEvent(EvType::kRun, t0, t1, &p, index, CurrentRun(), kSourceNvtx);
    }
  }
}

void OnNvtxRangeEnd(uint64_t t0, uint64_t t1, const char* msg, size_t n) {
  OnNvtxRangeEnd(t0, t1, msg, n, 0);
}

void OnGraphLaunch(uint64_t t0, uint64_t /*t1*/, uint64_t /*stream*/) {
  const State* s = GetState();
  if (s->rule != StepRule::kGraphLaunch) return;
  RuleBoundary(*s, t0, kSourceGraph);
}

void OnHostSync(uint64_t /*t0*/, uint64_t t1, uint64_t stream) {
  const State* s = GetState();
  if (s->rule != StepRule::kStreamSync) return;
  // The legacy default stream has two handles: 0 and cudaStreamLegacy (0x1).
  auto legacy = [](uint64_t h) { return h == 0 || h == 1; };
  const bool same = stream == s->rule_stream || (legacy(stream) && legacy(s->rule_stream));
  if (!s->rule_any_stream && !same && stream != ~0ull) return;
  RuleBoundary(*s, t1, kSourceSync);
}

void SetOpenRangeFlusher(void (*fn)()) { g_flusher.store(fn, std::memory_order_release); }

namespace {
std::atomic<size_t (*)(char*, size_t)> g_thread_context{nullptr};
}  // namespace

void SetThreadNvtxContext(size_t (*fn)(char* out, size_t cap)) {
  g_thread_context.store(fn, std::memory_order_release);
}

size_t ThreadNvtxContext(char* out, size_t cap) {
  auto fn = g_thread_context.load(std::memory_order_acquire);
  return fn != nullptr ? fn(out, cap) : 0;
}

void Shutdown() {
  if (g_shutdown_done.exchange(true)) return;  // the core and the NVTX surface may both call it
  if (auto fn = g_flusher.load(std::memory_order_acquire)) fn();
  uint64_t partial = 0, abandoned = 0;
  bool sched_active = true;
  {
    std::lock_guard<std::mutex> lock(g_sched_mu);
    if (g_cursor != nullptr) {
      partial = g_cursor->partial();
      abandoned = g_cursor->abandoned();
      sched_active = g_cursor->active();
    }
  }
  if (abandoned != 0) {
    AddNote("warning", std::to_string(abandoned) +
                           " step range(s) begun in an active phase of PROFAGENT_SCHEDULE were "
                           "still open 64 steps after it closed and never ended: recording "
                           "stopped waiting for them; not recorded as steps, their work in part");
  }
  const State* st = g_state.load(std::memory_order_acquire);
  if (st != nullptr && st->schedule.is_set() && g_steps.load(std::memory_order_relaxed) == 0) {
    // A rank that marks no step (in a job where only rank 0 does) never leaves its first phase.
    AddNote("warning", std::string("PROFAGENT_SCHEDULE: this process marked no step (no NVTX "
                                   "step range, no step-rule boundary), so the schedule stayed "
                                   "in its first phase: ") +
                           (sched_active ? "everything was recorded"
                                         : "nothing but allocations, frees and ranges was "
                                           "recorded (a wait or warm-up phase)"));
  }
  if (partial != 0) {
    AddNote("warning", std::to_string(partial) +
                           " step(s) of overlapping threads were not recorded whole under "
                           "PROFAGENT_SCHEDULE (began before recording resumed, or still open "
                           "64 steps after their active phase closed): not recorded as steps, "
                           "their work only in part");
  }
  const uint64_t bad = g_bad_values.load(std::memory_order_relaxed);
  if (bad != 0) {
    AddNote("warning", std::to_string(bad) +
                           " key=value word(s) in step/run NVTX messages had a bad value and "
                           "were ignored");
  }
}

Stats GetStats() {
  Stats st;
  st.steps = g_steps.load(std::memory_order_relaxed);
  st.steps_emitted = g_steps_emitted.load(std::memory_order_relaxed);
  st.runs = g_runs.load(std::memory_order_relaxed);
  st.bad_values = g_bad_values.load(std::memory_order_relaxed);
  return st;
}

void ResetForTest(const Config& config) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  State* s = BuildState(config);
  g_steps = 0;
  g_steps_emitted = 0;
  g_runs = 0;
  g_current_run = 0;
  t_current_run = 0;
  g_last_boundary = 0;
  g_nvtx_step_seen = false;
  g_rule_ignored_noted = false;
  g_bad_values = 0;
  g_shutdown_done = false;
  {
    std::lock_guard<std::mutex> sched(g_sched_mu);
    g_cursor = new ScheduleCursor(s->schedule);  // the previous one is leaked, as the state
    if (s->schedule.is_set()) SetScheduleActive(g_cursor->active());
  }
  g_state.store(s, std::memory_order_release);  // the previous state is leaked on purpose
}

}  // namespace model
}  // namespace profagent
