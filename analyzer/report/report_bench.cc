// report_bench: generates a synthetic profile of N records (default 10 million, split over R
// rank files, default 2), then times `report` over it and prints records/s.
//
//   bazel run //analyzer/report:report_bench -- [records] [ranks] [dir]
//
// Each report runs in a fresh child process (this binary re-executed), so its CPU time (user +
// sys, all threads) and max RSS are exactly the report's, not the generator's. Memory growth:
// the summary-only report again over a profile twice as long (REPORT_BENCH_GROWTH=0 skips it).
// REPORT_BENCH_REUSE=1 reuses the files of a previous run instead of generating them.
//
// Each step of the synthetic decode loop has one EV_STEP, 32 layers of NVTX ranges (layer >
// qkv_proj/o_proj/gate_up_proj/down_proj) and 7 launches per layer with their device ops, so
// ~half the records are launches and ~half device ops, as in a real CUPTI profile.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analyzer/reader.h"
#include "analyzer/report/analysis.h"
#include "analyzer/report/profile_builder.h"

namespace profagent {
namespace analyzer {
namespace {

constexpr uint64_t kUs = 1000;

double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

uint64_t WriteRank(const std::string& path, int rank, int world, uint64_t records) {
  ProfileBuilder b(path, 1, 0, 1024);
  b.WriteHeader(rank, world, "bench", GPU_TIMING_CUPTI);
  const uint32_t names[7] = {
      b.Str("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
      b.Str("void vllm::rotary_embedding_kernel<c10::BFloat16, true>"),
      b.Str("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>"),
      b.Str("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64"),
      b.Str("void vllm::rms_norm_kernel<c10::BFloat16>"),
      b.Str("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"),
      b.Str("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>")};
  const uint32_t layer = b.Str("layer"), qkv = b.Str("qkv_proj"), o = b.Str("o_proj"),
                 gu = b.Str("gate_up_proj"), down = b.Str("down_proj"), decode = b.Str("decode");
  uint64_t t = 1000 * kUs, corr = 0, step = 0;
  std::vector<std::pair<uint64_t, uint64_t>> dev;  // (start, corr) of the step's kernels
  while (b.events() < records) {
    const uint64_t step_start = t;
    dev.clear();
    for (int l = 0; l < 32; ++l) {
      const uint64_t ls = t;
      for (int k = 0; k < 7; ++k) {
        if (k == 0) b.Host(1, t, 0, ProfileBuilder::Nvtx(qkv, 12 * kUs, 2));
        if (k == 3) b.Host(1, t, 0, ProfileBuilder::Nvtx(o, 12 * kUs, 2));
        if (k == 5) b.Host(1, t, 0, ProfileBuilder::Nvtx(gu, 12 * kUs, 2));
        if (k == 6) b.Host(1, t, 0, ProfileBuilder::Nvtx(down, 12 * kUs, 2));
        b.Host(1, t + 1 * kUs, ++corr, ProfileBuilder::Launch(names[k], 4 * kUs));
        dev.emplace_back(t + 8 * kUs, corr);
        t += 15 * kUs;
      }
      (void)ls;
    }
    // The layer ranges are written after their children, as the agent does at range end.
    for (int l = 0; l < 32; ++l) {
      b.Host(2, step_start + uint64_t(l) * 105 * kUs, 0,
             ProfileBuilder::Nvtx(layer, 105 * kUs, 1));
    }
    for (size_t i = 0; i < dev.size(); ++i) {
      DeviceOp op;
      op.set_kind(DOP_KERNEL);
      op.set_dur((5 + (i % 7)) * kUs);
      op.set_stream(1);
      op.set_grid_x(132);
      op.set_block_x(128);
      b.Device(0, dev[i].first, dev[i].second, op);
    }
    b.Host(1, step_start, 0,
           ProfileBuilder::Step(t - step_start, 8, int64_t(500 + step % 4000), decode, false));
    t += 200 * kUs;
    ++step;
  }
  b.Close(true);
  return b.events();
}

std::vector<std::string> RankFiles(const std::string& dir, int ranks) {
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r) files.push_back(absl::StrCat(dir, "/rank", r, ".pb"));
  return files;
}

// Writes `records` records over `ranks` files in `dir` (one thread per file), or with
// REPORT_BENCH_REUSE counts those already there. Returns the records, 0 on error.
uint64_t Generate(const std::string& dir, int ranks, uint64_t records) {
  mkdir(dir.c_str(), 0755);
  const std::vector<std::string> files = RankFiles(dir, ranks);
  std::vector<uint64_t> written(ranks);
  auto g0 = std::chrono::steady_clock::now();
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r) {
    if (getenv("REPORT_BENCH_REUSE") != nullptr) {
      FileSummary fs;
      ViewVisitor none;
      if (!ScanFile(files[r], &none, &fs).ok()) return 0;
      written[r] = fs.host_events + fs.device_ops;
      continue;
    }
    th.emplace_back([&, r] { written[r] = WriteRank(files[r], r, ranks, records / ranks); });
  }
  for (auto& x : th) x.join();
  uint64_t total = 0;
  for (uint64_t w : written) total += w;
  double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
  printf("generated %llu records in %d rank files (%s) in %.2f s\n", (unsigned long long)total,
         ranks, dir.c_str(), gen_s);
  return total;
}

// The child side: one report, then its step count on stdout.
int RunChild(const std::string& dir, int ranks, bool with_csv) {
  auto s = BuildSummary(RankFiles(dir, ranks), ReportOptions(), with_csv ? dir + "/ops.csv" : "");
  if (!s.ok()) {
    fprintf(stderr, "report failed: %s\n", std::string(s.status().message()).c_str());
    return 2;
  }
  printf("%llu steps, mean step %.3f ms", (unsigned long long)(*s)["stats"]["steps"].get<uint64_t>(),
         (*s)["stats"]["step_latency_ms"]["mean"].get<double>());
  return 0;
}

struct ChildRun {
  double wall_s = 0, cpu_s = 0, max_rss_mb = 0;
  std::string out;
};

// Re-executes this binary as a report child and measures it (wait4: CPU and max RSS).
bool MeasureChild(const std::string& dir, int ranks, bool with_csv, ChildRun* run) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const std::string r = std::to_string(ranks);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl("/proc/self/exe", "report_bench", "--child", dir.c_str(), r.c_str(),
          with_csv ? "csv" : "summary", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) run->out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return false;
  run->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run->cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  run->max_rss_mb = ru.ru_maxrss / 1024.0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent

int main(int argc, char** argv) {
  using namespace profagent::analyzer;
  if (argc == 5 && std::string(argv[1]) == "--child") {
    return RunChild(argv[2], atoi(argv[3]), std::string(argv[4]) == "csv");
  }
  uint64_t records = argc > 1 ? strtoull(argv[1], nullptr, 10) : 10000000;
  int ranks = argc > 2 ? atoi(argv[2]) : 2;
  std::string dir = argc > 3 ? argv[3] : "/tmp/profagent_report_bench";
  const uint64_t total = Generate(dir, ranks, records);
  if (total == 0) return 2;
  const std::vector<std::string> files = RankFiles(dir, ranks);
  // Wall time is shared with whatever else runs on the machine, so the per-core figure is
  // records per CPU-second (user + sys).
  for (int fast = 0; fast < 2; ++fast) {
    double c0 = CpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    uint64_t n = 0;
    for (const auto& f : files) {
      FileSummary fs;
      Visitor none;
      ViewVisitor none_view;
      if (!(fast ? ScanFile(f, &none_view, &fs) : VisitFile(f, &none, &fs)).ok()) return 2;
      n += fs.host_events + fs.device_ops;
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = CpuSeconds() - c0;
    printf("reader alone, %s (decode only, 1 thread): %.2f s wall, %.2f s CPU, %.2f M records/s "
           "per core\n", fast ? "ScanFile" : "VisitFile", sec, cpu, n / cpu / 1e6);
  }
  ChildRun summary_run;
  for (int with_csv = 0; with_csv < 2; ++with_csv) {
    ChildRun run;
    if (!MeasureChild(dir, ranks, with_csv, &run)) {
      fprintf(stderr, "report child failed\n");
      return 2;
    }
    printf("report %s: %.2f M records/s per core (CPU time: %.2f s), %.2f M records/s wall "
           "(%.2f s), max RSS %.1f MB; %s\n",
           with_csv ? "with ops.csv   " : "(summary only)", total / run.cpu_s / 1e6, run.cpu_s,
           total / run.wall_s / 1e6, run.wall_s, run.max_rss_mb, run.out.c_str());
    if (!with_csv) summary_run = run;
  }
  const char* growth = getenv("REPORT_BENCH_GROWTH");
  if (growth == nullptr || std::string(growth) != "0") {
    const std::string dir2 = dir + "_x2";
    const uint64_t total2 = Generate(dir2, ranks, 2 * records);
    ChildRun run2;
    if (total2 == 0 || !MeasureChild(dir2, ranks, false, &run2)) return 2;
    // Steps are the reference rank's; every rank file holds as many, each with 160 NVTX ranges.
    const double steps = std::strtod(summary_run.out.c_str(), nullptr);
    const double steps2 = std::strtod(run2.out.c_str(), nullptr);
    const double added = (run2.max_rss_mb - summary_run.max_rss_mb) * 1048576.0;
    printf("memory growth (summary only): max RSS %.1f MB at %.1f M records, %.1f MB at %.1f M "
           "records: %.0f bytes per added step per rank file (160 NVTX ranges, %.0f records)\n",
           summary_run.max_rss_mb, total / 1e6, run2.max_rss_mb, total2 / 1e6,
           added / ((steps2 - steps) * ranks), double(total2 - total) / ((steps2 - steps) * ranks));
  }
  return 0;
}

