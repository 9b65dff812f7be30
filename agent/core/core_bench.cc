// Benchmark of the record pipeline (a binary that prints figures, not a test).
//   push:   ns per Emit() on the producer side, clock read excluded, ring not full
//   clock:  ns per Now()
//   writer: records/s the writer thread sustains to a real file with zero drops (policy block,
//           so the producer waits for the writer whenever it is ahead)
//   size:   bytes on disk per kernel-launch record (realistic timings and launch shapes)
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/core/testing.h"

extern "C" uint64_t profagent_writer_cpu_ns();
extern "C" void bench_kernel_a() {}
extern "C" void bench_kernel_b() {}
extern "C" void bench_kernel_c() {}

using namespace profagent;

static double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : 5000000;
  std::string dir = argc > 2 ? argv[2] : testing::MakeTempDir("core_bench");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  setenv("PROFAGENT_OVERFLOW", "block", 1);
  setenv("PROFAGENT_RING_SIZE", getenv("BENCH_RING") ? getenv("BENCH_RING") : "65536", 1);
  if (profagent_init() != 1) return 1;

  const uint16_t api = RegisterApi("cudaLaunchKernel");
  const void* funcs[3] = {reinterpret_cast<const void*>(&bench_kernel_a),
                          reinterpret_cast<const void*>(&bench_kernel_b),
                          reinterpret_cast<const void*>(&bench_kernel_c)};
  RegisterFunctionName(funcs[0], "_Z8gemm_qkvPKfPfi");
  RegisterFunctionName(funcs[1], "_Z15rms_norm_kernelPfPKfi");
  RegisterFunctionName(funcs[2], "_Z24flash_attn_decode_kernelPfPKfS1_i");

  // Clock cost.
  {
    uint64_t sink = 0;
    double t0 = Seconds();
    for (int i = 0; i < 10000000; ++i) sink += Now();
    double t1 = Seconds();
    printf("clock: %.1f ns per Now() (%s)%s\n", (t1 - t0) * 1e9 / 1e7,
           UsingTsc() ? "rdtsc" : "clock_gettime", sink == 42 ? " " : "");
  }

  // Push cost: rounds of 50,000 pushes into a ring the writer empties between rounds.
  {
    RawEvent e{};
    e.type = EvType::kLaunch;
    e.api = api;
    e.launch.func = funcs[0];
    e.launch.stream = 0x1000;
    e.launch.grid_x = 128;
    e.launch.grid_y = e.launch.grid_z = 1;
    e.launch.block = PackBlock(256, 1, 1);
    e.t0 = e.t1 = Now();
    std::vector<double> per;
    // A round fills at most half the ring, so no push waits for the writer.
    const int per_round = std::min<int>(50000, int(GetConfig().ring_slots / 2));
    for (int round = 0; round < 20; ++round) {
      Flush(2000);
      double t0 = Seconds();
      for (int i = 0; i < per_round; ++i) {
        e.launch.corr = uint32_t(i + 1);
        Emit(e);
      }
      double t1 = Seconds();
      per.push_back((t1 - t0) * 1e9 / per_round);
    }
    std::sort(per.begin(), per.end());
    printf("push: %.2f ns per Emit (median of 20 rounds of %d; best %.2f; ring %u slots)\n",
           per[per.size() / 2], per_round, per[0], GetConfig().ring_slots);
  }
  Flush(5000);
  profagent_shutdown("bench-warmup");
  // The writer is stopped now: restart in a fresh process would be cleaner, but the figures
  // below come from a child so the file holds only the measured records.
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    // Child: fresh writer (fork handler), measured stream of launches.
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<int> gap(3000, 9000), dur(1500, 3500), which(0, 2);
    std::vector<uint16_t> gaps(4096), durs(4096), kinds(4096);
    for (int i = 0; i < 4096; ++i) {
      gaps[i] = uint16_t(gap(rng));
      durs[i] = uint16_t(dur(rng));
      kinds[i] = uint16_t(which(rng));
    }
    uint64_t t = MonotonicNs();
    uint32_t corr = 1;
    double t0 = Seconds();
    for (uint64_t i = 0; i < n; ++i) {
      RawEvent e{};
      e.type = EvType::kLaunch;
      e.flags = kFlagTimeNs;
      e.api = api;
      int k = kinds[i & 4095];
      e.launch.func = funcs[k];
      e.launch.stream = 0x1000;
      e.launch.corr = corr++;
      e.launch.grid_x = k == 2 ? 32 * (1 + (i / 4096) % 16) : 132;
      e.launch.grid_y = e.launch.grid_z = 1;
      e.launch.block = PackBlock(k == 1 ? 1024 : 256, 1, 1);
      t += gaps[i & 4095];
      e.t0 = t;
      e.t1 = t + durs[i & 4095];
      Emit(e);
    }
    profagent_shutdown("bench");
    double t1 = Seconds();
    struct stat st;
    std::string file;
    file = dir + "/pid" + std::to_string(getpid()) + ".pb";
    if (stat(file.c_str(), &st) != 0) return 2;
    double cpu = double(profagent_writer_cpu_ns()) / 1e9;
    printf("writer: %.2f M records/s per writer CPU-second (%.2f M records/s wall, producer "
           "included) to %s (%llu launch records, policy block: 0 drops)\n",
           n / cpu / 1e6, n / (t1 - t0) / 1e6, file.c_str(), (unsigned long long)n);
    printf("size: %.2f bytes per kernel-launch record on disk (file %lld bytes)\n",
           double(st.st_size) / double(n), (long long)st.st_size);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
