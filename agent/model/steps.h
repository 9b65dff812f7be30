// Steps and runs: turning NVTX ranges (and, opt-in, graph launches or host syncs) into step/run
// markers (kStep/kRun events), and driving the profiling schedule (config.h PROFAGENT_SCHEDULE).
//
// Called from hooks on the application's threads. The NVTX path parses the message (regex +
// key=value words) at range end; that is the slow part of NVTX handling and is acceptable there
// (a step lasts milliseconds). Graph/sync rules cost one relaxed load when disabled.
#ifndef PROFAGENT_AGENT_MODEL_STEPS_H_
#define PROFAGENT_AGENT_MODEL_STEPS_H_

#include <cstddef>
#include <cstdint>

namespace profagent {
namespace model {

// An NVTX range ended. `t0`/`t1` raw ticks (clock.h), `msg` UTF-8 (not NUL-terminated), `n` bytes.
// Emits a kStep or kRun event if the message matches the configured patterns.
void OnNvtxRangeEnd(uint64_t t0, uint64_t t1, const char* msg, size_t n);

// Opt-in step rules (PROFAGENT_STEP_RULE): a cudaGraphLaunch on `stream`, or a host
// synchronization (device sync: stream = ~0ull) that completed at `t1`.
void OnGraphLaunch(uint64_t t0, uint64_t t1, uint64_t stream);
void OnHostSync(uint64_t t0, uint64_t t1, uint64_t stream);

// At shutdown: emits still-open NVTX ranges as kNvtxPush, etc.
void Shutdown();

}  // namespace model
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_STEPS_H_
