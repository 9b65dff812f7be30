// ParseConfig: defaults, accepted values and the one-line error for each bad one; the rank from
// the launcher's environment (RankFromEnv).
#include "agent/core/config.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/internal.h"

namespace profagent {
namespace {

std::map<std::string, std::string> g_env;

const char* FakeGetenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

// Parses `env`; returns the error ("" when it parsed).
std::string Parse(std::map<std::string, std::string> env, Config* c) {
  g_env = std::move(env);
  std::string err;
  bool ok = ParseConfig(FakeGetenv, c, &err);
  CHECK(ok == err.empty());
  return err;
}

TEST_CASE("No variables: the documented defaults") {
  Config c;
  REQUIRE(Parse({}, &c).empty());
  CHECK(c.enabled);
  CHECK(c.output_dir == "profagent_out");
  CHECK(c.gpu_timing == GpuTimingWanted::kAuto);
  CHECK(c.ring_slots == 131072);
  CHECK(c.overflow == OverflowPolicy::kDrop);
  CHECK(c.step_pattern == "^step\\b");
  CHECK(c.run_pattern == "^run\\b");
  CHECK(c.kv_reduce == KvReduce::kMean);
  CHECK(c.step_rule == StepRule::kNone);
  CHECK(c.stack_every == 0);
  CHECK(c.stack_depth == 32);
  CHECK(c.launch_api_sample == 16);
  CHECK_FALSE(c.schedule_set);
  CHECK(c.ranks.empty());
  CHECK(c.log_level == 1);
  CHECK(c.flush_ms == 20);
  CHECK(c.mpi_clock_sync);
  auto m = ConfigToMap(c);
  CHECK(m["PROFAGENT_LAUNCH_API_SAMPLE"] == "16");
  CHECK(m["PROFAGENT_RANKS"] == "all");
}

TEST_CASE("Accepted values are parsed") {
  Config c;
  REQUIRE(Parse({{"PROFAGENT_ENABLE", "0"},
                 {"PROFAGENT_OUTPUT", "/tmp/x"},
                 {"PROFAGENT_GPU_TIMING", "events"},
                 {"PROFAGENT_RING_SIZE", "1024"},
                 {"PROFAGENT_OVERFLOW", "block"},
                 {"PROFAGENT_KV_REDUCE", "p90"},
                 {"PROFAGENT_STEP_RULE", "sync:0x10"},
                 {"PROFAGENT_STACKS", "4"},
                 {"PROFAGENT_STACK_DEPTH", "8"},
                 {"PROFAGENT_LAUNCH_API_SAMPLE", "1"},
                 {"PROFAGENT_SCHEDULE", "wait=1,warmup=2,active=3,repeat=4"},
                 {"PROFAGENT_RANKS", "0,2-3"},
                 {"PROFAGENT_LOG", "3"},
                 {"PROFAGENT_FLUSH_MS", "5"},
                 {"PROFAGENT_CLOCK_SYNC", "0"},
                 {"PROFAGENT_CAPTURE", "cudaProfilerApi"}},
                &c)
              .empty());
  CHECK_FALSE(c.enabled);
  CHECK(c.output_dir == "/tmp/x");
  CHECK(c.gpu_timing == GpuTimingWanted::kEvents);
  CHECK(c.ring_slots == 1024);
  CHECK(c.overflow == OverflowPolicy::kBlock);
  CHECK(c.kv_reduce == KvReduce::kP90);
  CHECK(c.step_rule == StepRule::kStreamSync);
  CHECK(c.step_rule_stream == 0x10);
  CHECK(c.stack_every == 4);
  CHECK(c.stack_depth == 8);
  CHECK(c.launch_api_sample == 1);
  CHECK(c.schedule_set);
  CHECK(c.sched_wait == 1);
  CHECK(c.sched_warmup == 2);
  CHECK(c.sched_active == 3);
  CHECK(c.sched_repeat == 4);
  CHECK(c.ranks == std::vector<int>{0, 2, 3});
  CHECK(c.log_level == 3);
  CHECK(c.flush_ms == 5);
  CHECK_FALSE(c.mpi_clock_sync);
  CHECK(c.capture_profiler_api);
  // The file's header records every setting as given (the stream of the sync rule too).
  auto m = ConfigToMap(c);
  CHECK(m["PROFAGENT_STEP_RULE"] == "sync:0x10");
  CHECK(m["PROFAGENT_STACK_DEPTH"] == "8");
  CHECK(m["PROFAGENT_CLOCK_SYNC"] == "0");
  // The legacy default stream as written or as %p prints a null pointer.
  for (const char* zero : {"sync:0", "sync:(nil)", "sync:0x0"}) {
    Config z;
    REQUIRE(Parse({{"PROFAGENT_STEP_RULE", zero}}, &z).empty());
    CHECK(z.step_rule == StepRule::kStreamSync);
    CHECK_FALSE(z.step_rule_any_stream);
    CHECK(z.step_rule_stream == 0);
  }
  Config d;
  REQUIRE(Parse({{"PROFAGENT_CAPTURE", "all"}}, &d).empty());
  CHECK_FALSE(d.capture_profiler_api);
}

TEST_CASE("A bad value is one line naming the variable, the value and what is accepted") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"PROFAGENT_ENABLE", "yes"},
      {"PROFAGENT_GPU_TIMING", "gpu"},
      {"PROFAGENT_RING_SIZE", "1000"},
      {"PROFAGENT_RING_SIZE", "32"},
      {"PROFAGENT_OVERFLOW", "wait"},
      {"PROFAGENT_STEP_PATTERN", "(unclosed"},
      {"PROFAGENT_KV_REDUCE", "median"},
      {"PROFAGENT_STEP_RULE", "sync:abc"},
      {"PROFAGENT_STACKS", "-1"},
      {"PROFAGENT_STACK_DEPTH", "0"},
      {"PROFAGENT_LAUNCH_API_SAMPLE", "0"},
      {"PROFAGENT_SCHEDULE", "active=0"},
      {"PROFAGENT_RANKS", "3-1"},
      {"PROFAGENT_LOG", "9"},
      {"PROFAGENT_FLUSH_MS", "0"},
      {"PROFAGENT_CLOCK_SYNC", "2"},
      {"PROFAGENT_CAPTURE", "nvtx"},
      // Out of range or not plain decimal: a rank past an int (the range loop once wrapped and
      // exhausted memory), a base prefix, a sign, a space.
      {"PROFAGENT_RANKS", "18446744073709551615"},
      {"PROFAGENT_RANKS", "0-18446744073709551615"},
      {"PROFAGENT_RANKS", "4294967296"},
      {"PROFAGENT_RANKS", "0x3"},
      {"PROFAGENT_RING_SIZE", "0x100"},
      {"PROFAGENT_RING_SIZE", " 64"},
      {"PROFAGENT_FLUSH_MS", "+20"},
      // A stream handle without its 0x (digits alone would be taken as decimal), or empty.
      {"PROFAGENT_STEP_RULE", "sync:5599"},
      {"PROFAGENT_STEP_RULE", "sync:"},
      {"PROFAGENT_STEP_RULE", "sync:0x"},
      {"PROFAGENT_JOB", std::string(129, 'j')},
  };
  for (const auto& kv : bad) {
    Config c;
    std::string err = Parse({kv}, &c);
    INFO(kv.first << "=" << kv.second << " -> " << err);
    CHECK(err.find(kv.first + "=" + kv.second + " is invalid (expected ") == 0);
    CHECK(err.find('\n') == std::string::npos);
  }
  for (const char* v : {"0", "x", "1000001", "-4", "2.5"}) {
    Config c;
    INFO("PROFAGENT_LAUNCH_API_SAMPLE=" << v);
    CHECK_FALSE(Parse({{"PROFAGENT_LAUNCH_API_SAMPLE", v}}, &c).empty());
  }
}

}  // namespace
}  // namespace profagent

namespace profagent {
namespace {

// The launcher environments the agent reads its rank from (internal::RankFromEnv).
std::map<std::string, std::string>* g_launcher_env = nullptr;
const char* LauncherGetenv(const char* name) {
  auto it = g_launcher_env->find(name);
  return it == g_launcher_env->end() ? nullptr : it->second.c_str();
}
internal::EnvRank RankOf(std::map<std::string, std::string> env) {
  g_launcher_env = &env;
  internal::EnvRank r = internal::RankFromEnv(&LauncherGetenv);
  g_launcher_env = nullptr;
  return r;
}

TEST_CASE("rank from the launcher's environment") {
  // mpirun.
  auto r = RankOf({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK(r.rank == 3);
  CHECK(r.local_rank == 1);
  CHECK(r.world_size == 4);
  CHECK(r.source == "OMPI_COMM_WORLD_RANK");
  // srun, one task per GPU.
  r = RankOf({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "8"}});
  CHECK(r.rank == 5);
  CHECK(r.local_rank == 1);
  CHECK(r.world_size == 8);
  // srun ... torchrun: the worker's RANK, not the task's SLURM_PROCID / PMI_RANK.
  r = RankOf({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "1"},
              {"PMI_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "none"}, {"RANK", "2"},
              {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "3"}});
  CHECK(r.rank == 2);
  CHECK(r.local_rank == 2);
  CHECK(r.world_size == 3);
  CHECK(r.source == "RANK");
  // A per-GPU launcher under srun (deepspeed): RANK/WORLD_SIZE before Slurm's task.
  r = RankOf({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "5"}, {"LOCAL_RANK", "1"},
              {"WORLD_SIZE", "8"}});
  CHECK(r.rank == 5);
  CHECK(r.local_rank == 1);
  CHECK(r.world_size == 8);
  // Nothing, or garbage.
  r = RankOf({{"RANK", "x"}, {"WORLD_SIZE", "-1"}});
  CHECK(r.rank == -1);
  CHECK(r.world_size == -1);
  CHECK(r.source.empty());
}

}  // namespace
}  // namespace profagent
