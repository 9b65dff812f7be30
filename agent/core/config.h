// Agent configuration from PROFAGENT_* environment variables.
//
// Parsed once at start-up (ParseConfig is pure: it takes a getenv-like function so tests can
// feed it). A bad value makes ParseConfig fail with a one-line message; the agent then logs it
// and disables itself, leaving the application untouched.
#ifndef PROFAGENT_AGENT_CORE_CONFIG_H_
#define PROFAGENT_AGENT_CORE_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace profagent {

enum class GpuTimingWanted { kAuto, kCupti, kEvents, kHost, kOff };
enum class OverflowPolicy { kDrop, kBlock };
enum class KvReduce { kMean, kMax, kP50, kP90, kSum };
enum class StepRule { kNone, kGraphLaunch, kStreamSync };

struct Config {
  bool enabled = true;                          // PROFAGENT_ENABLE (1/0)
  std::string output_dir = "profagent_out";     // PROFAGENT_OUTPUT
  GpuTimingWanted gpu_timing = GpuTimingWanted::kAuto;  // PROFAGENT_GPU_TIMING auto|cupti|events|host|off
  std::string cupti_path;                       // PROFAGENT_CUPTI_PATH ("" = libcupti.so.13, then libcupti.so)
  uint32_t ring_slots = 131072;                 // PROFAGENT_RING_SIZE (events per thread, power of 2)
  OverflowPolicy overflow = OverflowPolicy::kDrop;  // PROFAGENT_OVERFLOW drop|block
  std::string step_pattern = "^step\\b";        // PROFAGENT_STEP_PATTERN (ECMAScript regex)
  std::string run_pattern = "^run\\b";          // PROFAGENT_RUN_PATTERN
  KvReduce kv_reduce = KvReduce::kMean;         // PROFAGENT_KV_REDUCE mean|max|p50|p90|sum
  StepRule step_rule = StepRule::kNone;         // PROFAGENT_STEP_RULE none|graph|sync[:STREAM]
  // sync:STREAM: only that stream's synchronizations (and device-wide ones) are boundaries;
  // 0 (or 0x1, cudaStreamLegacy) is the legacy default stream. Plain `sync`: any stream.
  bool step_rule_any_stream = true;
  uint64_t step_rule_stream = 0;
  uint32_t stack_every = 0;                     // PROFAGENT_STACKS 0 = off, 1 = every launch, N = 1 in N
  uint32_t stack_depth = 32;                    // PROFAGENT_STACK_DEPTH
  // PROFAGENT_LAUNCH_API_SAMPLE: the return time (hence the API duration) of kernel and graph
  // launches is read on 1 in N launches per thread, chosen at random; 1 = every launch. Launches
  // are the most frequent call and their start time is always recorded; one clock read instead
  // of two is most of the hook's cost (see README "Measured figures").
  uint32_t launch_api_sample = 16;
  // PROFAGENT_SCHEDULE "wait=W,warmup=U,active=A,repeat=R" counted in steps (torch.profiler's
  // meaning); empty = record everything.
  bool capture_profiler_api = false;  // PROFAGENT_CAPTURE=cudaProfilerApi (default: all)
  bool schedule_set = false;
  uint32_t sched_wait = 0, sched_warmup = 0, sched_active = 0, sched_repeat = 0;
  std::vector<int> ranks;                       // PROFAGENT_RANKS "0,2-3"; empty = all ranks
  int log_level = 1;                            // PROFAGENT_LOG 0 quiet, 1 warn, 2 info, 3 debug
  uint32_t flush_ms = 20;                       // PROFAGENT_FLUSH_MS writer wake-up period
  bool mpi_clock_sync = true;                   // PROFAGENT_CLOCK_SYNC 1/0 (MPI ping-pong at init/finalize)
};

using GetenvFn = const char* (*)(const char*);

// Parses the environment. On a bad value returns false and sets *error to one line naming the
// variable, the value and what is accepted.
bool ParseConfig(GetenvFn getenv_fn, Config* out, std::string* error);

// The effective settings as strings (for the file header).
std::map<std::string, std::string> ConfigToMap(const Config& c);

// The process-wide configuration (valid after the agent initialized).
const Config& GetConfig();

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_CONFIG_H_
