// Benchmark of the Perfetto exporter: generates a profile of N records (default 10 million:
// half kernel launches on 4 host threads, half the matching kernels on 4 streams, plus NVTX
// ranges and allocations), converts it, and prints records/s. The exporter is single-threaded,
// so this is the per-core rate.
//
//   perfetto_bench [--records N] [--json] [--dir DIR] [--keep] [--input FILE]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "analyzer/perfetto/perfetto.h"
#include "analyzer/perfetto/test_profile.h"
#include "analyzer/reader.h"

namespace {

using profagent::Record;
using profagent::analyzer::testing::ProfileWriter;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Generate(const std::string& path, uint64_t records) {
  ProfileWriter w(path);
  w.Header(1234, "benchhost", 0, 1700000000000000000ull, 1000000000);
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

}  // namespace

int main(int argc, char** argv) {
  uint64_t records = 10000000;
  bool json = false, keep = false;
  std::string input;  // an existing profile instead of a generated one
  std::string dir = getenv("TEST_TMPDIR") != nullptr ? getenv("TEST_TMPDIR") : "/tmp";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--records") && i + 1 < argc) {
      records = strtoull(argv[++i], nullptr, 10);
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
      fprintf(stderr, "usage: perfetto_bench [--records N] [--json] [--dir DIR] [--keep] [--input FILE]\n");
      return 2;
    }
  }
  const std::string in =
      !input.empty() ? input : dir + "/perfetto_bench_" + std::to_string(getpid()) + ".pb";
  const std::string out = in + (json ? ".json" : ".pftrace");
  if (input.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    Generate(in, records);
    auto t1 = std::chrono::steady_clock::now();
    printf("generated %llu records in %.2f s (%s)\n", static_cast<unsigned long long>(records),
           Seconds(t0, t1), in.c_str());
  }

  {
    // Baseline: the reader alone (protobuf parsing + delta decoding), no output.
    profagent::analyzer::Visitor null_visitor;
    profagent::analyzer::FileSummary fs;
    auto r0 = std::chrono::steady_clock::now();
    const double c0 = CpuSeconds();
    absl::Status rs = profagent::analyzer::VisitFile(in, &null_visitor, &fs);
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
  profagent::analyzer::ExportOptions opts;
  opts.format = json ? profagent::analyzer::TraceFormat::kChromeJson
                     : profagent::analyzer::TraceFormat::kPerfetto;
  profagent::analyzer::ExportStats stats;
  auto t2 = std::chrono::steady_clock::now();
  const double c2 = CpuSeconds();
  absl::Status st = profagent::analyzer::ExportTrace({in}, out, opts, &stats);
  const double c3 = CpuSeconds();
  auto t3 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    fprintf(stderr, "export failed: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  const uint64_t n = stats.host_events + stats.device_ops;
  const double secs = Seconds(t2, t3);
  printf("exported %llu records (%llu host events, %llu device ops) -> %llu %s, %.1f MB in %.2f s "
         "wall, %.2f s CPU\n",
         static_cast<unsigned long long>(n), static_cast<unsigned long long>(stats.host_events),
         static_cast<unsigned long long>(stats.device_ops),
         static_cast<unsigned long long>(stats.output_events), json ? "JSON events" : "packets",
         stats.output_bytes / 1e6, secs, c3 - c2);
  printf("%.2f M records/s wall, %.2f M records/s per CPU second (single thread; goal >= 5 M "
         "records/s per core)\n",
         n / secs / 1e6, n / (c3 - c2) / 1e6);
  if (!keep) {
    remove(in.c_str());
    remove(out.c_str());
  }
  return 0;
}
