// Steps and runs: turning NVTX ranges (and, opt-in, graph launches or host syncs) into step/run
// markers (kStep/kRun events), and driving the profiling schedule (config.h PROFAGENT_SCHEDULE).
//
// Called from hooks on the application's threads. The NVTX path parses the message (regex +
// key=value words) at range end; that is the slow part of NVTX handling and is acceptable there
// (a step lasts milliseconds). A literal pre-check (step_parser.h) rejects ordinary ranges with
// one memcmp. Graph/sync rules cost one relaxed load when disabled.
//
// Numbering: steps are numbered from 0 in the order they end (StepPayload.index), runs from 1
// in the order they start (0 means "no run"). A step's `run` is the run open when it ended.
// Steps from NVTX and from a step rule share one counter; once the application has marked an
// NVTX step, the rule's boundaries are ignored (with a note).
//
// Schedule (schedule.h, ScheduleCursor): at every step boundary the model calls
// SetScheduleActive() for what follows; a kStep event is emitted only for recorded steps (active,
// and recorded whole), with its process-wide index, so the analyzer sees which steps were
// skipped. kRun events are always emitted.
//
// Thread safety: every function may be called from any thread concurrently. Hot-path safety:
// OnNvtxRangeStart/OnGraphLaunch/OnHostSync take no lock and do not allocate unless the message
// passes the literal pre-check of the run pattern; OnNvtxRangeEnd may allocate for step/run
// messages only.
#ifndef PROFAGENT_AGENT_MODEL_STEPS_H_
#define PROFAGENT_AGENT_MODEL_STEPS_H_

#include <cstddef>
#include <cstdint>

#include "agent/core/config.h"

namespace profagent {
namespace model {

// Reads GetConfig() (patterns, KV reduction, step rule, schedule), compiles the patterns and
// applies the schedule of step 0 (SetScheduleActive(false) when it starts with wait/warm-up).
// Idempotent and thread-safe. The core should call it once the configuration is parsed, before
// the application runs; otherwise the first call of any function below does it.
// [Added by the nvtx/model owner; the lead's core may call it from its init.]
void Init();

// An NVTX range started. Returns a cookie (0 = nothing to remember) that the caller passes back
// to OnNvtxRangeEnd: non-zero when the message opens a run (the run index is assigned at start
// so that steps inside it can refer to it), or, under a schedule, a step (whether recording was
// on when it began: see ScheduleCursor).
uint64_t OnNvtxRangeStart(const char* msg, size_t n);

// An NVTX range ended. `t0`/`t1` raw ticks (clock.h), `msg` UTF-8 (not NUL-terminated), `n` bytes.
// Emits a kStep or kRun event if the message matches the configured patterns. `cookie` is
// OnNvtxRangeStart's result; without it a run is numbered at its end.
void OnNvtxRangeEnd(uint64_t t0, uint64_t t1, const char* msg, size_t n, uint64_t cookie);
void OnNvtxRangeEnd(uint64_t t0, uint64_t t1, const char* msg, size_t n);

// Opt-in step rules (PROFAGENT_STEP_RULE): a cudaGraphLaunch on `stream`, or a host
// synchronization (device sync: stream = ~0ull) that completed at `t1`.
// graph: a step runs from one graph launch's start to the next one's start.
// sync[:STREAM]: a step runs from one matching sync's end to the next one's end (a device sync
// always matches). The first boundary only opens the first step; the last open step is dropped.
void OnGraphLaunch(uint64_t t0, uint64_t t1, uint64_t stream);
void OnHostSync(uint64_t t0, uint64_t t1, uint64_t stream);

// At shutdown: runs the registered open-range flusher (NVTX ranges still open become kNvtxPush)
// and writes a note when step/run messages had bad values. Slow path; runs once (later calls do
// nothing). The NVTX surface registers it with AtShutdown; the core may call it too.
void Shutdown();

// The NVTX surface registers the function that emits its still-open ranges (kNvtxPush).
void SetOpenRangeFlusher(void (*fn)());

// The NVTX context of the calling thread: its open push/pop ranges, outermost first, as their
// messages separated by kContextSeparator, each cut at kContextSegmentBytes, at most `cap` bytes
// in all (whole segments only). Returns the bytes written (0: no open range, or no NVTX surface).
// Recorded with the graph nodes a thread makes (EV_GRAPH_NODE), whatever the schedule: a graph
// captured before recording began runs in recorded steps. The NVTX surface registers it.
constexpr char kContextSeparator = '\x1f';
constexpr size_t kContextSegmentBytes = 128;
size_t ThreadNvtxContext(char* out, size_t cap);
void SetThreadNvtxContext(size_t (*fn)(char* out, size_t cap));

// Counters, for tests and the shutdown note.
struct Stats {
  uint64_t steps = 0;        // step boundaries seen (recorded or not)
  uint64_t steps_emitted = 0;
  uint64_t runs = 0;
  uint64_t bad_values = 0;   // key=value words with a bad value (ignored)
};
Stats GetStats();

// Test only: re-initializes from `config` (patterns, schedule, rule) and zeroes every counter.
void ResetForTest(const Config& config);

}  // namespace model
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_STEPS_H_
