// Benchmark of the Perfetto exporter: generates a profile of N records (default 10 million:
// half kernel launches on 4 host threads, half the matching kernels on 4 streams, plus NVTX
// ranges and allocations), converts it, and prints records/s per core (CPU seconds of every
// thread), wall time, threads, output size and max RSS. Each export runs in a child process so
// its CPU time and RSS are its own. Then the same N records split into --ranks files in one
// directory, exported with one thread and with --threads (default: one per core).
//
//   perfetto_bench [--records N] [--ranks R] [--threads T] [--json] [--dir DIR] [--keep]
//                  [--input FILE]
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "analyzer/perfetto/perfetto.h"
#include "analyzer/perfetto/test_profile.h"
#include "analyzer/reader.h"

namespace {

using profagent::Record;
using profagent::analyzer::testing::ProfileWriter;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Generate(const std::string& path, uint64_t records, int rank) {
  ProfileWriter w(path);
  w.Header(1234 + rank, "benchhost", rank, 1700000000000000000ull, 1000000000, /*boot_id=*/1);
  w.String(1, "cudaLaunchKernel");
  w.String(2, "step");
  w.String(3, "cudaMalloc");
  w.String(4, "cudaFree");
  static const char* kKernels[] = {
      "void gemm_kernel<float, 128, 128>(float const*, float const*, float*, int, int, int)",
      "attention_decode_kernel", "rmsnorm_kernel", "rotary_embedding_kernel",
      "silu_mul_kernel", "ncclDevKernel_AllReduce_Sum_f16_RING_LL", "softmax_kernel",
      "kv_cache_append_kernel"};
  for (uint32_t i = 0; i < 8; ++i) w.String(10 + i, kKernels[i]);
  for (uint32_t t = 0; t < 4; ++t) w.Thread(t, 1234 + t, t == 0 ? "main" : "worker");

  const uint64_t kBatch = 1000;
  const uint64_t launches = records / 2;
  uint64_t written = 0;
  uint64_t corr = 0;
  uint64_t t_host = 1000000000;
  Record r;
  for (uint64_t done = 0; done < launches; done += kBatch) {
    const uint64_t n = std::min(kBatch, launches - done);
    const uint32_t thread = static_cast<uint32_t>((done / kBatch) % 4);
    const uint64_t corr_base = corr;
    r.Clear();
    profagent::EventBatch* b = r.mutable_batch();
    b->set_thread(thread);
    b->set_base_ns(t_host);
    b->set_corr_base(corr_base);
    for (uint64_t i = 0; i < n; ++i) {
      profagent::Event* e = b->add_events();
      e->set_dt(i == 0 ? 0 : 5000);
      e->set_dur(3000);
      if (i % 250 == 0) {
        e->set_kind(profagent::EV_NVTX_RANGE);
        e->set_name(2);
        e->set_dur(1000);
      } else if (i % 500 == 1) {
        e->set_kind(profagent::EV_ALLOC);
        e->set_name(3);
        e->set_bytes(1 << 20);
        e->set_ptr(0x100000 + done + i);
      } else {
        e->set_kind(profagent::EV_LAUNCH);
        e->set_name(10 + static_cast<uint32_t>(i % 8));
        e->set_api(1);
        e->set_grid_x(128);
        e->set_block_x(256);
        e->set_stream(static_cast<uint32_t>(i % 4));
        ++corr;
      }
    }
    w.Write(r);
    written += n;
    // The kernels of those launches, on device 0.
    r.Clear();
    profagent::DeviceBatch* d = r.mutable_device();
    d->set_device(0);
    d->set_base_ns(t_host + 2000);
    d->set_corr_base(corr_base);
    for (uint64_t i = 0; i < n; ++i) {
      if (i % 250 == 0 || i % 500 == 1) continue;
      profagent::DeviceOp* op = d->add_ops();
      op->set_dt(d->ops_size() == 1 ? 0 : 5000);
      op->set_dur(4000);
      op->set_name(10 + static_cast<uint32_t>(i % 8));
      op->set_stream(static_cast<uint32_t>(i % 4));
      op->set_grid_x(128);
      op->set_grid_y(1);
      op->set_grid_z(1);
      op->set_block_x(256);
      op->set_block_y(1);
      op->set_block_z(1);
    }
    // Keep the total at `records`: pad device ops up to the batch's event count.
    while (static_cast<uint64_t>(d->ops_size()) < n) {
      profagent::DeviceOp* op = d->add_ops();
      op->set_dt(100);
      op->set_dur(50);
      op->set_kind(profagent::DOP_MEMSET);
      op->set_bytes(4096);
      op->set_dcorr(1000000000);  // no host counterpart
    }
    w.Write(r);
    written += n;
    t_host += n * 5000;
  }
  r.Clear();
  r.mutable_footer()->set_records(written);
  r.mutable_footer()->set_reason("exit");
  w.Write(r);
}

// CPU seconds used by this process so far (the machine may be shared: wall time overstates).
double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Exports `inputs` to `out` in a child process; prints its figures. Returns false on failure.
bool BenchExport(const char* label, const std::vector<std::string>& inputs,
                 const std::string& out, bool json, int threads) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return false;
  auto t0 = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    close(pipefd[0]);
    profagent::analyzer::ExportOptions opts;
    opts.format = json ? profagent::analyzer::TraceFormat::kChromeJson
                       : profagent::analyzer::TraceFormat::kPerfetto;
    opts.threads = threads;
    profagent::analyzer::ExportStats stats;
    absl::Status st = profagent::analyzer::ExportTrace(inputs, out, opts, &stats);
    if (!st.ok()) {
      fprintf(stderr, "export failed: %s\n", std::string(st.message()).c_str());
      _exit(1);
    }
    const uint64_t figures[5] = {stats.host_events + stats.device_ops, stats.output_events,
                                 stats.output_bytes, static_cast<uint64_t>(stats.threads),
                                 static_cast<uint64_t>(inputs.size())};
    _exit(write(pipefd[1], figures, sizeof(figures)) == sizeof(figures) ? 0 : 1);
  }
  close(pipefd[1]);
  uint64_t f[5] = {};
  const bool got = read(pipefd[0], f, sizeof(f)) == sizeof(f);
  close(pipefd[0]);
  int status = 0;
  rusage ru;
  wait4(child, &status, 0, &ru);
  auto t1 = std::chrono::steady_clock::now();
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  const double wall = Seconds(t0, t1);
  const double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  const double n = static_cast<double>(f[0]);
  printf("%s: %llu records from %llu file(s), %llu thread(s) -> %llu %s, %.1f MB\n", label,
         static_cast<unsigned long long>(f[0]), static_cast<unsigned long long>(f[4]),
         static_cast<unsigned long long>(f[3]), static_cast<unsigned long long>(f[1]),
         json ? "JSON events" : "packets", f[2] / 1e6);
  printf("  %.2f s wall, %.2f s CPU (user %.2f, sys %.2f), max RSS %.1f MB\n", wall, cpu,
         ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
         ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss / 1024.0);
  printf("  %.2f M records/s per core (CPU time; goal >= 5), %.2f M records/s wall\n",
         n / cpu / 1e6, n / wall / 1e6);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t records = 10000000;
  int ranks = 2;
  int threads = 0;
  bool json = false, keep = false;
  std::string input;  // an existing profile instead of a generated one
  std::string dir = getenv("TEST_TMPDIR") != nullptr ? getenv("TEST_TMPDIR") : "/tmp";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--records") && i + 1 < argc) {
      records = strtoull(argv[++i], nullptr, 10);
    } else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
      ranks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--keep")) {
      keep = true;
    } else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
      input = argv[++i];
      keep = true;
    } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
      dir = argv[++i];
    } else {
      fprintf(stderr,
              "usage: perfetto_bench [--records N] [--ranks R] [--threads T] [--json] "
              "[--dir DIR] [--keep] [--input FILE]\n");
      return 2;
    }
  }
  const std::string base = dir + "/perfetto_bench_" + std::to_string(getpid());
  const std::string in = !input.empty() ? input : base + ".pb";
  const std::string ext = json ? ".json" : ".pftrace";
  const std::string out = in + ext;
  if (input.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    Generate(in, records, 0);
    auto t1 = std::chrono::steady_clock::now();
    printf("generated %llu records in %.2f s (%s)\n", static_cast<unsigned long long>(records),
           Seconds(t0, t1), in.c_str());
  }

  {
    // Baseline: the reader the exporter uses (ScanFile: hand decoding + delta decoding) alone,
    // no output.
    profagent::analyzer::ViewVisitor null_visitor;
    profagent::analyzer::FileSummary fs;
    auto r0 = std::chrono::steady_clock::now();
    const double c0 = CpuSeconds();
    absl::Status rs = profagent::analyzer::ScanFile(in, &null_visitor, &fs);
    const double c1 = CpuSeconds();
    auto r1 = std::chrono::steady_clock::now();
    if (!rs.ok()) {
      fprintf(stderr, "read failed: %s\n", std::string(rs.message()).c_str());
      return 1;
    }
    const double nr = static_cast<double>(fs.host_events + fs.device_ops);
    printf("reader alone: %.2f s wall, %.2f s CPU (%.2f M records/s per CPU second)\n",
           Seconds(r0, r1), c1 - c0, nr / (c1 - c0) / 1e6);
  }
  bool ok = BenchExport("one file", {in}, out, json, 1);
  if (!keep) {
    remove(in.c_str());
    remove(out.c_str());
  }
  if (ok && input.empty() && ranks > 1) {
    const std::string ranks_dir = base + "_ranks";
    mkdir(ranks_dir.c_str(), 0755);
    std::vector<std::string> files;
    for (int r = 0; r < ranks; ++r) {
      files.push_back(ranks_dir + "/rank" + std::to_string(r) + ".pb");
      Generate(files.back(), records / ranks, r);
    }
    const std::string dir_out = ranks_dir + "/trace" + ext;
    ok = BenchExport("directory, 1 thread", files, dir_out, json, 1) &&
         BenchExport("directory, parallel", files, dir_out, json, threads);
    if (!keep) {
      for (const std::string& f : files) remove(f.c_str());
      remove(dir_out.c_str());
      rmdir(ranks_dir.c_str());
    }
  }
  return ok ? 0 : 1;
}
