// Tests of `profanalyze report`/`stats`: a small two-rank profile built here with the generated
// protobuf classes goes in; summary.json, report.md and ops.csv must equal the hand-checked
// goldens in analyzer/testdata/report_golden_*; key numbers are also asserted one by one (they
// are computed on paper in the comments). Bad inputs must give a one-line error naming the file.
//
// To regenerate the goldens after a deliberate change:
//   bazel test //analyzer/report:report_test --test_env=PROFAGENT_UPDATE_GOLDEN=$PWD/analyzer/testdata
// and re-check the diff by hand.
#include "analyzer/report/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "analyzer/reader.h"
#include "analyzer/report/analysis.h"
#include "analyzer/report/profile_builder.h"

namespace profagent {
namespace analyzer {
namespace {

constexpr uint64_t kUs = 1000;  // ns

std::string TmpDir(const std::string& name) {
  const char* base = getenv("TEST_TMPDIR");
  std::string d = absl::StrCat(base != nullptr ? base : "/tmp", "/", name);
  mkdir(d.c_str(), 0755);
  return d;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reports on `dir` into `dir` with the default options (summary.json, report.md, ops.csv) and
// returns the summary it wrote.
Json ReportInPlace(const std::string& dir) {
  std::string printed;
  REQUIRE(RunReport(dir, dir, ReportOptions(), &printed).ok());
  return Json::parse(ReadAll(dir + "/summary.json"));
}

// Whether one of the summary's warnings contains `text`.
bool HasWarning(const Json& s, const std::string& text) {
  for (const Json& w : s["meta"]["warnings"]) {
    if (w.get<std::string>().find(text) != std::string::npos) return true;
  }
  return false;
}

// An allocation or free (EV_ALLOC/EV_FREE) of 1 us, as the agent records them.
Event Mem(EventKind kind, uint64_t ptr, uint64_t bytes, uint32_t mkind, uint32_t dev,
          int32_t ret = 0) {
  Event e;
  e.set_kind(kind);
  e.set_dur(1000);
  e.set_ptr(ptr);
  e.set_bytes(bytes);
  e.set_copy_kind(mkind);
  e.set_device(dev);
  e.set_ret(ret);
  return e;
}

// summary.memory.devices as rows {device, allocs, frees, peak_bytes, final_bytes}.
std::vector<std::vector<int64_t>> MemoryRows(const Json& s) {
  std::vector<std::vector<int64_t>> rows;
  for (const Json& d : s["memory"]["devices"]) {
    rows.push_back({d["device"].get<int64_t>(), d["allocs"].get<int64_t>(),
                    d["frees"].get<int64_t>(), d["peak_bytes"].get<int64_t>(),
                    d["final_bytes"].get<int64_t>()});
  }
  return rows;
}

// The data rows of DIR/ops.csv, split at every ',' (for files whose fields are not quoted), each
// checked to have all 16 columns.
std::vector<std::vector<std::string>> OpsRows(const std::string& dir) {
  std::vector<std::string> lines =
      absl::StrSplit(ReadAll(dir + "/ops.csv"), '\n', absl::SkipEmpty());
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    rows.push_back(absl::StrSplit(lines[i], ','));
    REQUIRE(rows.back().size() >= 16);
  }
  return rows;
}

Event Coll(ProfileBuilder& b, uint64_t dur, uint64_t comm, uint64_t seq) {
  Event e;
  e.set_kind(EV_COLLECTIVE);
  e.set_dur(dur);
  e.set_api(b.Str("ncclAllReduce"));
  Collective* c = e.mutable_coll();
  c->set_lib(LIB_NCCL);
  c->set_op(b.Str("AllReduce"));
  c->set_bytes(1 << 20);
  c->set_count(1 << 19);
  c->set_comm(comm);
  c->set_seq(seq);
  return e;
}

// An MPI call of 1 us (`op` as the writer names it, "Isend"), on communicator 1.
Event MpiCall(ProfileBuilder& b, const char* op, uint64_t bytes, uint64_t seq, int peer) {
  Event e;
  e.set_kind(EV_COLLECTIVE);
  e.set_dur(1 * kUs);
  e.set_api(b.Str(std::string("MPI_") + op));
  Collective* c = e.mutable_coll();
  c->set_lib(LIB_MPI);
  c->set_op(b.Str(op));
  c->set_bytes(bytes);
  c->set_count(bytes);
  c->set_comm(1);
  c->set_seq(seq);
  c->set_peer(peer);
  return e;
}

// The records a rank of a job of `size` ranks writes before its calls: a zero clock offset to
// rank 0 and communicator 1 (`unique_id`, `size` members, this rank).
void WriteRankComm(ProfileBuilder* b, int rank, int size, CollLibrary lib,
                   const std::string& unique_id) {
  Record off;
  off.mutable_clock_offset()->set_offset_ns(0);
  off.mutable_clock_offset()->set_method("mpi-pingpong");
  b->Write(off);
  Record comm;
  comm.mutable_comm()->set_id(1);
  comm.mutable_comm()->set_lib(lib);
  comm.mutable_comm()->set_unique_id(unique_id);
  comm.mutable_comm()->set_size(size);
  comm.mutable_comm()->set_rank(rank);
  b->Write(comm);
}

void WriteTwoRankComm(ProfileBuilder* b, int rank, CollLibrary lib, const std::string& unique_id) {
  WriteRankComm(b, rank, 2, lib, unique_id);
}

DeviceOp Kernel(uint64_t dur) {
  DeviceOp op;
  op.set_kind(DOP_KERNEL);
  op.set_dur(dur);
  op.set_stream(7);
  return op;
}

// The golden profile. Times below are in microseconds (x kUs in the file).
//
// rank 0 (host h0), thread 1:
//   run "warm" warmup=1 [1000,3000): step A [1000,2000) tokens 8 kv 100: flash (dev 1200+300)
//   run "bs8" [10000,40000):
//     step B [10000,14000) 8 tok kv 600; NVTX decode [10050,13950) > layer 0 [10100,13000) >
//       qkv_proj [10100,10600), o_proj [11000,11500); decode > sampler [13000,13900)
//       launches (10 us each, device start = launch + 100 us):
//         10200 sm90 gemm in qkv_proj -> attn.qkv_proj, dev 200
//         10700 flash_fwd_splitkv_kernel -> attn.compute, dev 300
//         11100 sm90 gemm in o_proj -> attn.o_proj, dev 200
//         11600 vllm::rms_norm_kernel -> norm, dev 100
//         12000 ampere gemm, no projection range -> others, dev 400
//         13100 my_custom_kernel in sampler -> sampler (NVTX decides), dev 100
//       ncclAllReduce 13500 dur 50 (seq 0) inside sampler -> engine comm.nccl
//     step C [20000,26000) 8 tok kv 700: rms_norm launch 20100 dev 20200+100;
//       ncclAllReduce 25000 dur 40 (seq 1)
//     step D [30000,40000) 16 tok kv 1500: flash launch 30100, dev 30500+500;
//       cudaMemcpy h2d 30200 dur 20, dev 30300+100
//   memory: alloc 1 MiB @500, alloc 2 MiB @600, free the 1 MiB @700. Drops: 3.
// rank 1 (host h1, clock 5000 us behind rank 0, ClockOffset +5000 us), thread 1:
//   nccl kernel launch 8500 (dev 8510+60); ncclAllReduce 8530 dur 20 (seq 0, its kernel: corr 1,
//   so timed 60 us on the device, arriving at 8510), 20010 dur 30 (seq 1, no kernel: host time)
void WriteGoldenProfile(const std::string& dir) {
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h0", GPU_TIMING_CUPTI);
    Record comm;
    comm.mutable_comm()->set_id(1);
    comm.mutable_comm()->set_unique_id("c1");
    comm.mutable_comm()->set_size(2);
    b.Write(comm);
    const uint32_t gemm = b.Str("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
    const uint32_t flash = b.Str("flash_fwd_splitkv_kernel");
    const uint32_t norm = b.Str("vllm::rms_norm_kernel");
    const uint32_t ampere = b.Str("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn");
    const uint32_t custom = b.Str("my_custom_kernel");
    const uint32_t decode = b.Str("decode");
    Event ev;
    ev.set_kind(EV_ALLOC);
    ev.set_dur(5 * kUs);
    ev.set_bytes(1 << 20);
    ev.set_ptr(0x1000);
    b.Host(1, 500 * kUs, 0, ev);
    ev.set_bytes(2 << 20);
    ev.set_ptr(0x2000);
    b.Host(1, 600 * kUs, 0, ev);
    Event fr;
    fr.set_kind(EV_FREE);
    fr.set_dur(5 * kUs);
    fr.set_ptr(0x1000);
    b.Host(1, 700 * kUs, 0, fr);

    Event run = ProfileBuilder::Step(2000 * kUs, -1, -1, 0, true);
    run.set_kind(EV_RUN);
    run.mutable_step()->set_label(b.Str("warm"));
    run.mutable_step()->set_index(1);
    b.Host(1, 1000 * kUs, 0, run);
    b.Host(1, 1000 * kUs, 0, ProfileBuilder::Step(1000 * kUs, 8, 100, decode, false));
    b.Host(1, 1100 * kUs, 1, ProfileBuilder::Launch(flash, 10 * kUs));

    Event run2 = ProfileBuilder::Step(30000 * kUs, -1, -1, 0, false);
    run2.set_kind(EV_RUN);
    run2.mutable_step()->set_label(b.Str("bs8"));
    run2.mutable_step()->set_index(2);
    b.Host(1, 10000 * kUs, 0, run2);
    b.Host(1, 10000 * kUs, 0, ProfileBuilder::Step(4000 * kUs, 8, 600, decode, false));
    b.Host(1, 10050 * kUs, 0, ProfileBuilder::Nvtx(decode, 3900 * kUs, 0));
    b.Host(1, 10100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("layer 0"), 2900 * kUs, 1));
    b.Host(1, 10100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("qkv_proj"), 500 * kUs, 2));
    b.Host(1, 10200 * kUs, 2, ProfileBuilder::Launch(gemm, 10 * kUs));
    b.Host(1, 10700 * kUs, 3, ProfileBuilder::Launch(flash, 10 * kUs));
    b.Host(1, 11000 * kUs, 0, ProfileBuilder::Nvtx(b.Str("o_proj"), 500 * kUs, 2));
    b.Host(1, 11100 * kUs, 4, ProfileBuilder::Launch(gemm, 10 * kUs));
    b.Host(1, 11600 * kUs, 5, ProfileBuilder::Launch(norm, 10 * kUs));
    b.Host(1, 12000 * kUs, 6, ProfileBuilder::Launch(ampere, 10 * kUs));
    b.Host(1, 13000 * kUs, 0, ProfileBuilder::Nvtx(b.Str("sampler"), 900 * kUs, 1));
    b.Host(1, 13100 * kUs, 7, ProfileBuilder::Launch(custom, 10 * kUs));
    b.Host(1, 13500 * kUs, 0, Coll(b, 50 * kUs, 1, 0));
    b.Host(1, 20000 * kUs, 0, ProfileBuilder::Step(6000 * kUs, 8, 700, decode, false));
    b.Host(1, 20100 * kUs, 8, ProfileBuilder::Launch(norm, 10 * kUs));
    b.Host(1, 25000 * kUs, 0, Coll(b, 40 * kUs, 1, 1));
    b.Host(1, 30000 * kUs, 0, ProfileBuilder::Step(10000 * kUs, 16, 1500, decode, false));
    b.Host(1, 30100 * kUs, 9, ProfileBuilder::Launch(flash, 10 * kUs));
    Event cp;
    cp.set_kind(EV_MEMCPY);
    cp.set_dur(20 * kUs);
    cp.set_bytes(4096);
    cp.set_copy_kind(1);
    // The host stack of this copy is shown before the longest idle gap (10 ms, before it).
    Record stack;
    stack.mutable_stack()->set_id(1);
    Frame* f = stack.mutable_stack()->add_frames();
    f->set_symbol(b.Str("copy_inputs(Batch const&)"));
    f = stack.mutable_stack()->add_frames();
    f->set_module(b.Str("/usr/bin/engine"));
    f->set_offset(0x1234);
    b.Write(stack);
    cp.set_stack(1);
    b.Host(1, 30200 * kUs, 10, cp);
    b.Flush();

    b.Device(0, 1200 * kUs, 1, Kernel(300 * kUs));
    b.Device(0, 10300 * kUs, 2, Kernel(200 * kUs));
    b.Device(0, 10800 * kUs, 3, Kernel(300 * kUs));
    b.Device(0, 11200 * kUs, 4, Kernel(200 * kUs));
    b.Device(0, 11700 * kUs, 5, Kernel(100 * kUs));
    b.Device(0, 12100 * kUs, 6, Kernel(400 * kUs));
    b.Device(0, 13200 * kUs, 7, Kernel(100 * kUs));
    b.Device(0, 20200 * kUs, 8, Kernel(100 * kUs));
    DeviceOp mc;
    mc.set_kind(DOP_MEMCPY);
    mc.set_dur(100 * kUs);
    mc.set_copy_kind(1);
    mc.set_bytes(4096);
    // Device order: the copy (corr 10) starts before the flash kernel (corr 9).
    b.Device(0, 30300 * kUs, 10, mc);
    DeviceOp fl = Kernel(500 * kUs);
    b.Device(0, 30500 * kUs, 9, fl);
    Record drops;
    drops.mutable_drops()->set_thread(1);
    drops.mutable_drops()->set_count(3);
    b.Write(drops);
    b.Close(true);
  }
  {
    ProfileBuilder b(dir + "/rank1.pb");
    b.WriteHeader(1, 2, "h1", GPU_TIMING_CUPTI);
    Record off;
    off.mutable_clock_offset()->set_offset_ns(5000 * kUs);
    off.mutable_clock_offset()->set_method("mpi-pingpong");
    b.Write(off);
    Record comm;
    comm.mutable_comm()->set_id(7);
    comm.mutable_comm()->set_unique_id("c1");
    comm.mutable_comm()->set_size(2);
    b.Write(comm);
    b.Host(1, 8500 * kUs, 1,
           ProfileBuilder::Launch(b.Str("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), 10 * kUs));
    Event first = Coll(b, 20 * kUs, 7, 0);
    first.mutable_coll()->set_corr(1);  // its kernel: the launch above (device 60 us)
    b.Host(1, 8530 * kUs, 0, first);
    b.Host(1, 20010 * kUs, 0, Coll(b, 30 * kUs, 7, 1));
    b.Flush();
    b.Device(0, 8510 * kUs, 1, Kernel(60 * kUs));
    b.Close(true);
  }
}

std::string Normalize(std::string s, const std::string& dir) {
  return absl::StrReplaceAll(s, {{dir, "<dir>"}});
}

void CheckGolden(const std::string& got, const std::string& name) {
  const char* update = getenv("PROFAGENT_UPDATE_GOLDEN");
  if (update != nullptr) {
    std::ofstream(absl::StrCat(update, "/", name), std::ios::binary) << got;
    return;
  }
  std::string want = ReadAll("analyzer/testdata/" + name);
  REQUIRE(!want.empty());
  CHECK(got == want);
}

TEST_CASE("golden two-rank profile: summary.json, report.md, ops.csv") {
  const std::string dir = TmpDir("golden");
  WriteGoldenProfile(dir);
  std::string printed;
  ReportOptions opt;
  opt.threads = 2;
  REQUIRE(RunReport(dir, dir, opt, &printed).ok());
  INFO(printed);

  Json s = Json::parse(ReadAll(dir + "/summary.json"));
  CHECK(s["schema"] == "profagent.summary/1");
  CHECK(s["meta"]["ranks"] == Json::array({0, 1}));
  CHECK(s["meta"]["drops"] == 3);
  CHECK(s["meta"]["options"]["step_source"] == "agent");
  // Steps B, C, D (A is in the warm-up run): 4, 6, 10 ms; 32 tokens over 20 ms.
  const Json& st = s["stats"];
  CHECK(st["steps"] == 3);
  CHECK(st["tokens"] == 32);
  CHECK(st["total_time_ms"] == 20.0);
  CHECK(st["tokens_per_s"] == 1600.0);
  CHECK(st["step_latency_ms"]["mean"] == Approx(6.666667));
  CHECK(st["step_latency_ms"]["std"] == Approx(2.494438));
  CHECK(st["step_latency_ms"]["p50"] == 6.0);
  CHECK(st["step_latency_ms"]["p90"] == 10.0);
  CHECK(st["step_latency_ms_samples"] == Json::array({4.0, 6.0, 10.0}));
  // Busy per step: B 1.3, C 0.1, D 0.6 ms.
  CHECK(st["gpu_busy_ms_per_step"] == Approx(0.666667));
  // Model buckets over B, C, D (2000 us of device time, 3 steps).
  const Json& bm = s["buckets_model_avg_ms"];
  std::vector<std::string> order;
  for (auto it = bm.begin(); it != bm.end(); ++it) order.push_back(it.key());
  CHECK(order == std::vector<std::string>{"attn.qkv_proj", "attn.compute", "attn.o_proj", "norm",
                                          "sampler", "memcpy.h2d", "others"});
  CHECK(bm["attn.qkv_proj"]["ms"] == Approx(0.2 / 3));
  CHECK(bm["attn.qkv_proj"]["share"] == 0.1);
  CHECK(bm["attn.compute"]["share"] == 0.4);
  CHECK(bm["sampler"]["share"] == 0.05);
  CHECK(bm["others"]["share"] == 0.2);
  // Engine: decode 3900-900 = 3000 us excl., sampler 900-50 = 850, comm.nccl 50+40,
  // others = 20000 - 3940 us.
  const Json& be = s["buckets_engine_avg_ms"];
  CHECK(be["decode"]["ms"] == 1.0);
  CHECK(be["sampler"]["ms"] == Approx(0.85 / 3));
  CHECK(be["comm.nccl"]["ms"] == 0.03);
  CHECK(be["others"]["ms"] == Approx(16.06 / 3));
  // Runs: the warm-up run keeps its own stats; the aggregate covers run 2 only.
  REQUIRE(s["runs"].size() == 2);
  CHECK(s["runs"][0]["warmup"] == true);
  CHECK(s["runs"][0]["stats"]["steps"] == 1);
  CHECK(s["runs"][0]["buckets_model_avg_ms"]["attn.compute"]["ms"] == 0.3);
  CHECK(s["runs"][1]["label"] == "bs8");
  CHECK(s["runs"][1]["start_ms"] == 9.5);
  CHECK(s["runs_aggregate"]["runs"] == 1);
  CHECK(s["runs_aggregate"]["metrics"]["tokens_per_s"]["mean"] == 1600.0);
  // KV bins: [512,1024) B and C; [1024,2048) D.
  const Json& kv = s["decode_length_buckets"];
  CHECK(kv[1]["lo"] == 512);
  CHECK(kv[1]["steps"] == 2);
  CHECK(kv[1]["latency_ms"]["mean"] == 5.0);
  CHECK(kv[1]["tokens_per_s"] == 1600.0);
  CHECK(kv[2]["steps"] == 1);
  CHECK(kv[6]["hi"].is_null());
  // Kernels over both ranks' measured steps: 2360 us of device time less the warm-up step A's
  // flash (300 us, counted apart); flash 2 x (300, 500).
  const Json& k0 = s["kernels"][0];
  CHECK(k0["name"] == "flash_fwd_splitkv_kernel");
  CHECK(k0["count"] == 2);
  CHECK(k0["total_ms"] == 0.8);
  CHECK(k0["p50_us"] == 300.0);
  CHECK(k0["p99_us"] == 500.0);
  CHECK(k0["share"] == Approx(800.0 / 2060));
  CHECK(s["kernels_scope"] ==
        Json::parse(R"({"scope": "measured steps", "outside_ops": 1, "outside_ms": 0.3,
                          "ranks_whole": [1]})"));
  CHECK(s["kernels"].back()["bucket"] == "comm.allreduce");
  // Collectives: 4 calls of 1 MiB: 50, 40, 30 us on the host and one timed by its kernel, 60 us
  // on the device (not its 20 us enqueue): 180 us; the mean and algbw of the device-timed call
  // alone (an NCCL call's host time is only its enqueue): 1048576 B / 60000 ns.
  const Json& co = s["collectives"]["ops"][0];
  CHECK(co["count"] == 4);
  CHECK(co["size_class"] == "1MiB-4MiB");
  CHECK(co["time_ms"] == 0.18);
  CHECK(co["time_source"] == "mixed");
  CHECK(co["device_timed"] == 1);
  CHECK(co["mean_us"] == 60.0);
  CHECK(co["algbw_gbps"] == Approx(1048576.0 / 60000));
  CHECK(co["busbw_gbps"] == Approx(1048576.0 / 60000));  // n = 2: factor 2(n-1)/n = 1
  CHECK(s["collectives"]["per_rank"][1]["time_ms"] == 0.09);
  // Stragglers: rank 1 arrives 10 us after rank 0 both times (after the clock offset): at its
  // kernel's device start (8510 + 5000 us) for seq 0, at its host call for seq 1.
  const Json& sg = s["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 2);
  CHECK(sg["skew_us"]["mean"] == 10.0);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.02);
  CHECK(sg["most_frequent_last_arriver"] == 1);
  // Host: 10 launch-to-start latencies: eight of 90 us, 390 and 80 -> mean 119.
  const Json& h = s["host"];
  CHECK(h["launch_to_start_us"]["mean"] == 119.0);
  CHECK(h["launch_to_start_us"]["p50"] == 90.0);
  CHECK(h["wall_ms"] == 39.5);
  CHECK(h["gpu_busy_ms"] == 2.3);
  CHECK(h["idle_gaps"]["count"] == 9);
  CHECK(h["idle_gaps"]["total_ms"] == 27.5);
  CHECK(h["longest_gaps"][0]["gap_us"] == 10000.0);
  CHECK(h["longest_gaps"][0]["stack"] ==
        Json::array({"copy_inputs(Batch const&)", "/usr/bin/engine+0x1234"}));
  // Memory: 1 MiB + 2 MiB live at 600 us (0.1 ms after the first event), 2 MiB at the end.
  const Json& m = s["memory"]["devices"][0];
  CHECK(m["peak_bytes"] == 3 << 20);
  CHECK(m["peak_at_ms"] == 0.1);
  CHECK(m["final_bytes"] == 2 << 20);

  std::string csv = ReadAll(dir + "/ops.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 11);
  CheckGolden(Normalize(ReadAll(dir + "/summary.json"), dir), "report_golden_summary.json");
  CheckGolden(Normalize(ReadAll(dir + "/report.md"), dir), "report_golden_report.md");
  CheckGolden(Normalize(csv, dir), "report_golden_ops.csv");
}

// A warm-up run that wraps run ranges of its own (round-23 sweep, options hand3): its steps are
// warm-up, though each counts toward its innermost run (before, the outer run showed "warm-up,
// 0 steps" and its 5 ms steps were measured). A --run-pattern that matches nothing says so
// (before, the warm-up run's steps were measured without a word), and so does a message both
// patterns match.
TEST_CASE("runs inside a warm-up run are warm-up; a run pattern matching nothing is said") {
  const std::string dir = TmpDir("nested_warm");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    const uint32_t step = b.Str("step tokens=1"), inner = b.Str("run label=inner");
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("run label=outer warmup=1"), 100 * kUs, 0));
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(inner, 40 * kUs, 1));
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(step, 30 * kUs, 2));
    b.Host(1, 50 * kUs, 0, ProfileBuilder::Nvtx(inner, 40 * kUs, 1));
    b.Host(1, 50 * kUs, 0, ProfileBuilder::Nvtx(step, 30 * kUs, 2));
    b.Host(1, 200 * kUs, 0, ProfileBuilder::Nvtx(b.Str("run label=measured"), 100 * kUs, 0));
    b.Host(1, 200 * kUs, 0, ProfileBuilder::Nvtx(step, 10 * kUs, 1));
    b.Host(1, 250 * kUs, 0, ProfileBuilder::Nvtx(b.Str("step run tokens=1"), 10 * kUs, 1));
    // Not a warm-up step: `warmup=1` only, as the agent parses it (before, re-derived steps
    // took `true` too, and the same profile's measured set changed with --step-pattern).
    b.Host(1, 270 * kUs, 0, ProfileBuilder::Nvtx(b.Str("step warmup=true"), 10 * kUs, 1));
    b.Close(true);
  }
  ReportOptions opt;
  auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 3);  // the measured run's three steps
  CHECK((*s)["stats"]["step_latency_ms"]["mean"] == 0.01);
  auto warned = [&](const std::string& text) {
    for (const auto& w : (*s)["meta"]["warnings"]) {
      if (w.get<std::string>().find(text) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(!warned("no runs found"));
  opt.step_pattern = "^step\\b";
  opt.run_pattern = "^Run\\b";
  opt.patterns_explicit = true;
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 5);  // re-derived: `warmup=true` is no warm-up either
  CHECK(warned("no runs found (no NVTX range matches the run pattern `^Run\\b`)"));
  opt.run_pattern = "run\\b";  // also "step run tokens=1"
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK(
      warned("1 NVTX message(s) match both the step and the run pattern, taken as steps (e.g. "
             "`step run tokens=1`)"));
}

TEST_CASE("steps re-derived from NVTX ranges with the report's own patterns") {
  const std::string dir = TmpDir("nvtx");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t k = b.Str("vllm::act_and_mul_kernel");
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("run label=a warmup=1"), 100 * kUs, 0));
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("step tokens=4 kv=10,20"), 100 * kUs, 1));
    b.Host(1, 200 * kUs, 0, ProfileBuilder::Nvtx(b.Str("run label=b"), 300 * kUs, 0));
    b.Host(1, 200 * kUs, 0,
           ProfileBuilder::Nvtx(b.Str("step phase=decode tokens=8 kv=600,700,900"), 100 * kUs, 1));
    b.Host(1, 250 * kUs, 1, ProfileBuilder::Launch(k, 5 * kUs));
    b.Host(1, 300 * kUs, 0, ProfileBuilder::Nvtx(b.Str("iteration tokens=8 kv=3000"), 200 * kUs, 1));
    b.Flush();
    b.Device(0, 260 * kUs, 1, Kernel(20 * kUs));
    b.Close(true);
  }
  ReportOptions opt;
  auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["meta"]["options"]["step_source"] == "nvtx");
  CHECK((*s)["stats"]["steps"] == 1);  // the run "a" is warm-up; "iteration" is not a step
  CHECK((*s)["stats"]["tokens"] == 8);
  CHECK((*s)["decode_length_buckets"][1]["steps"] == 1);  // kv mean(600,700,900) = 733
  CHECK((*s)["buckets_model_avg_ms"]["mlp.act"]["ms"] == 0.02);
  CHECK((*s)["runs"][1]["label"] == "b");

  // A different step pattern re-buckets the same file; kv reduced with max.
  opt.step_pattern = "^(step|iteration)\\b";
  opt.patterns_explicit = true;
  opt.kv_reduce = "max";
  opt.kv_edges = {0, 1000, 2000};
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 2);
  CHECK((*s)["stats"]["tokens"] == 16);
  CHECK((*s)["decode_length_buckets"][0]["steps"] == 1);  // max(600,700,900) = 900
  CHECK((*s)["decode_length_buckets"][2]["steps"] == 1);  // 3000, open bin
  // --warmup-runs 1 is redundant here (run a is warm-up already); 2 excludes run b too.
  opt.warmup_runs = 2;
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 0);  // "iteration" lies inside run b, now warm-up too
  auto warned = [&](const std::string& text) {
    for (const auto& w : (*s)["meta"]["warnings"]) {
      if (w.get<std::string>().find(text) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(warned("--warmup-runs 2 marks all 2 run(s) warm-up"));
  // Edges from 1000: the step with kv 900 falls in no bin, and the report says so.
  opt.warmup_runs = 0;
  opt.kv_edges = {1000, 2000};
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["decode_length_buckets"][0]["steps"] == 0);
  CHECK((*s)["decode_length_buckets"][1]["steps"] == 1);
  CHECK(!warned("--warmup-runs"));
  CHECK(warned("1 decode step(s) with a KV length below the first KV edge (1000)"));
}

// KV bins take decode steps (phase `decode` in any case: SGLang's DECODE) and steps without a
// phase; steps with kv= of other phases are counted in a warning (before, dropped silently).
TEST_CASE("KV bins: decode in any case binned, other phases with kv= in a warning") {
  const std::string dir = TmpDir("kv_phases");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const char* msgs[] = {"step phase=decode kv=100",  "step phase=DECODE kv=100",
                          "step phase=Decode kv=600",  "step kv=600",
                          "step phase=prefill kv=100", "step phase=mixed kv=100",
                          "step phase=MIXED kv=700",   "step phase=spec_decode kv=100"};
    uint64_t t = 0;
    for (const char* m : msgs) {
      b.Host(1, t, 0, ProfileBuilder::Nvtx(b.Str(m), 50 * kUs, 0));
      t += 100 * kUs;
    }
    b.Close(true);
  }
  ReportOptions opt;
  opt.kv_edges = {0, 512};
  auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 8);
  CHECK((*s)["decode_length_buckets"][0]["steps"] == 2);  // decode, DECODE at 100
  CHECK((*s)["decode_length_buckets"][1]["steps"] == 2);  // Decode and no phase at 600
  std::vector<std::string> kv_warnings;
  for (const auto& w : (*s)["meta"]["warnings"]) {
    if (w.get<std::string>().find("kv=") != std::string::npos) kv_warnings.push_back(w);
  }
  CHECK(kv_warnings ==
        std::vector<std::string>{"4 step(s) with a KV length (kv=) are in no "
                                 "decode_length_buckets bin for their phase (MIXED 1, mixed 1, "
                                 "prefill 1, spec_decode 1): the bins take phase=decode and "
                                 "steps without a phase"});
}

// Prefill steps alone with kv= are what the bins mean to leave out: no warning.
TEST_CASE("KV bins: prefill steps with kv= leave no warning") {
  const std::string dir = TmpDir("kv_prefill");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("step phase=prefill kv=100"), 50 * kUs, 0));
    b.Host(1, 100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("step phase=decode kv=100"), 50 * kUs, 0));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  for (const auto& w : (*s)["meta"]["warnings"]) {
    CHECK(w.get<std::string>().find("kv=") == std::string::npos);
  }
}

// A CPU-only rank (an MPI frontend) never sets GPU timing up: its "unknown" does not make the
// job "mixed", or diff could never see a timing-mode change between two such jobs.
TEST_CASE("meta.gpu_timing: ranks without GPU timing left out, mixed only for real mixes") {
  const std::string dir = TmpDir("timing_mix");
  auto write = [&](int rank, GpuTimingMode timing) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 3, "h0", timing);
    if (timing != GPU_TIMING_UNKNOWN) {
      b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    }
    b.Close(true);
  };
  write(0, GPU_TIMING_UNKNOWN);
  write(1, GPU_TIMING_CUPTI);
  write(2, GPU_TIMING_EVENTS);
  auto timing = [&](std::vector<std::string> ranks) {
    std::vector<std::string> files;
    for (const auto& r : ranks) files.push_back(dir + "/rank" + r + ".pb");
    auto s = BuildSummary(files, ReportOptions(), "");
    REQUIRE(s.ok());
    return (*s)["meta"]["gpu_timing"].get<std::string>();
  };
  CHECK(timing({"0", "1"}) == "cupti");
  CHECK(timing({"0", "2"}) == "events");
  CHECK(timing({"0", "1", "2"}) == "mixed");
  CHECK(timing({"0"}) == "unknown");
}

// Records dropped took a warm-up run's record: its step (the agent's StepInfo.run names the run)
// is left out with a warning, not counted as measured. Without drops, a run with no record (one
// still open at exit) leaves its steps counted.
TEST_CASE("a step whose run record was dropped is in no aggregate") {
  for (bool drops : {true, false}) {
    INFO("drops " << drops);
    const std::string dir = TmpDir(drops ? "lost_run" : "open_run");
    {
      ProfileBuilder b(dir + "/rank0.pb");
      b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
      // Run 1 (warm-up) lost: only its step. Run 2 recorded, two steps.
      Event lost = ProfileBuilder::Step(1000 * kUs, 4, -1, 0, false);
      lost.mutable_step()->set_run(1);
      b.Host(1, 0, 0, lost);
      Event run = ProfileBuilder::Step(5000 * kUs, -1, -1, 0, false);
      run.set_kind(EV_RUN);
      run.mutable_step()->set_index(2);
      b.Host(1, 2000 * kUs, 0, run);
      for (int i = 0; i < 2; ++i) {
        Event st = ProfileBuilder::Step(2000 * kUs, 8, -1, 0, false);
        st.mutable_step()->set_run(2);
        b.Host(1, (2000 + 2000 * i) * kUs, 0, st);
      }
      if (drops) {
        Record r;
        r.mutable_drops()->set_thread(1);
        r.mutable_drops()->set_count(438);
        b.Write(r);
      }
      b.Close(true);
    }
    auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
    REQUIRE(s.ok());
    CHECK((*s)["stats"]["steps"] == (drops ? 2 : 3));
    CHECK((*s)["stats"]["tokens"] == (drops ? 16 : 20));
    CHECK(HasWarning(*s, "1 step(s) of runs whose records were dropped") == drops);
    // Nothing lost: run 1 was still open when the file ended (a signal, a crash), its range not
    // recorded: a run from its step to the end, label unknown, flagged open.
    const Json& runs = (*s)["runs"];
    REQUIRE(runs.size() == (drops ? 1 : 2));
    if (!drops) {
      CHECK(runs[0]["open"] == true);
      CHECK(runs[0]["label"] == "");
      CHECK(runs[0]["stats"]["steps"] == 1);
      CHECK_FALSE(runs[1].contains("open"));
      CHECK(runs[1]["stats"]["steps"] == 2);
      CHECK(HasWarning(*s, "run 1 was still open when the profile ended"));
    }
  }
}

// NVTX ranges still open when the file ended (a server exiting from inside `serve_loop`) enclose
// the work launched in them in ops.csv's NVTX path, as they do in the Perfetto trace (before, a
// kernel under an unclosed range had an empty path). A range without a message is "nvtx range".
TEST_CASE("ops.csv NVTX path: ranges still open at the file's end enclose later work") {
  const std::string dir = TmpDir("open_path");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(b.Str("before_k"), kUs));
    b.Host(1, 3000 * kUs, 2, ProfileBuilder::Launch(b.Str("inside_k"), kUs));
    Event open = ProfileBuilder::Nvtx(b.Str("serve_loop"), 0, 0);
    open.set_kind(EV_NVTX_PUSH);
    b.Host(1, 2000 * kUs, 0, open);
    b.Host(1, 2900 * kUs, 0, ProfileBuilder::Nvtx(0, 600 * kUs, 1));  // no message: a color
    b.Flush();
    b.Device(0, 110 * kUs, 1, Kernel(10 * kUs));
    b.Device(0, 3010 * kUs, 2, Kernel(10 * kUs));
    b.Close(true);
  }
  ReportInPlace(dir);
  const auto rows = OpsRows(dir);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0][15] == "");  // launched before the range opened
  // Inside it (still open at exit), inside a range with no message ("nvtx range", as Perfetto
  // names it; before, an empty segment).
  CHECK(rows[1][15] == "serve_loop/nvtx range");
}

// A server stopped by a signal: its serving run's NVTX range is still open at the end (the agent
// writes it as EV_NVTX_PUSH, no EV_RUN). It is a run up to the file's last host event, its steps
// counted in it (also when the file has drops: that run's record was not lost, it never was).
TEST_CASE("a run still open when the profile ended is a run up to its end, flagged open") {
  for (bool drops : {false, true}) {
    INFO("drops " << drops);
    const std::string dir = TmpDir(drops ? "open_serve_drops" : "open_serve");
    {
      ProfileBuilder b(dir + "/rank0.pb");
      b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
      Event warm = ProfileBuilder::Step(1000 * kUs, -1, -1, 0, true);
      warm.set_kind(EV_RUN);
      warm.mutable_step()->set_label(b.Str("warm"));
      warm.mutable_step()->set_index(1);
      b.Host(1, 0, 0, warm);
      Event ws = ProfileBuilder::Step(1000 * kUs, 2, -1, 0, false);
      ws.mutable_step()->set_run(1);
      b.Host(1, 0, 0, ws);
      for (int i = 0; i < 3; ++i) {
        Event st = ProfileBuilder::Step(1000 * kUs, 4, -1, 0, false);
        st.mutable_step()->set_run(2);
        b.Host(1, (3000 + 2000 * i) * kUs, 0, st);
      }
      Event api;
      api.set_kind(EV_API);
      api.set_name(b.Str("cudaStreamSynchronize"));
      api.set_dur(500 * kUs);
      b.Host(1, 8500 * kUs, 0, api);  // the last host event ends at 9000 us
      Event open = ProfileBuilder::Nvtx(b.Str("run label=serve"), 0, 0);
      open.set_kind(EV_NVTX_PUSH);
      b.Host(1, 2500 * kUs, 0, open);
      Event open_step = ProfileBuilder::Nvtx(b.Str("step tokens=4"), 0, 1);  // cut: no step
      open_step.set_kind(EV_NVTX_PUSH);
      b.Host(1, 9000 * kUs, 0, open_step);
      if (drops) {
        Record r;
        r.mutable_drops()->set_thread(1);
        r.mutable_drops()->set_count(10);
        b.Write(r);
      }
      b.Close(true);
    }
    auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
    REQUIRE(s.ok());
    const Json& runs = (*s)["runs"];
    REQUIRE(runs.size() == 2);
    CHECK(runs[0]["label"] == "warm");
    CHECK_FALSE(runs[0].contains("open"));
    CHECK(runs[1]["label"] == "serve");
    CHECK(runs[1]["open"] == true);
    CHECK(runs[1]["warmup"] == false);
    CHECK(runs[1]["duration_ms"].get<double>() == Approx(6.5));
    CHECK(runs[1]["stats"]["steps"] == 3);
    CHECK((*s)["stats"]["steps"] == 3);  // the warm-up run's step left out
    CHECK((*s)["stats"]["tokens"] == 12);
    CHECK(HasWarning(*s, "run 'serve' was still open when the profile ended"));
    CHECK_FALSE(HasWarning(*s, "records were dropped left out"));
  }
}

TEST_CASE("host timing mode uses launch API times and says so") {
  const std::string dir = TmpDir("hostmode");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(b.Str("vllm::rms_norm_kernel"), 30 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["meta"]["gpu_timing"] == "host");
  CHECK((*s)["buckets_model_avg_ms"]["norm"]["ms"] == 0.03);
  CHECK(HasWarning(*s, "host launch API times"));
}

// Host timing with launch API times sampled 1 in N: an untimed launch counts as the mean of its
// own kernel's timed launches (norm 30 us, gemm 10 us), or of all timed launches (20 us) for a
// kernel never timed (act).
TEST_CASE("host timing: an untimed launch counts as its own kernel's timed mean") {
  const std::string dir = TmpDir("hostmode_sampled");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    const struct {
      const char* name;
      uint64_t dur_us;
    } launches[] = {{"vllm::rms_norm_kernel", 30},
                    {"vllm::rms_norm_kernel", 0},
                    {"gemm_kernel", 10},
                    {"gemm_kernel", 0},
                    {"gemm_kernel", 0},
                    {"vllm::act_and_mul_kernel", 0}};
    uint64_t t = 100;
    for (const auto& l : launches) {
      b.Host(1, t * kUs, t, ProfileBuilder::Launch(b.Str(l.name), l.dur_us * kUs));
      t += 100;
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::map<std::string, double> total_us;
  for (const auto& k : (*s)["kernels"]) {
    total_us[k["name"].get<std::string>()] = k["total_ms"].get<double>() * 1e3;
  }
  CHECK(total_us["vllm::rms_norm_kernel"] == Approx(60));
  CHECK(total_us["gemm_kernel"] == Approx(30));
  CHECK(total_us["vllm::act_and_mul_kernel"] == Approx(20));
  CHECK(HasWarning(*s, "2 of 6 launches timed"));
}

// Launch API durations timed on 1 in N launches (Header.launch_api_sample): 4 launches of a
// norm kernel at 100, 200, 300, 400 us; only the second is timed (8 us, dur 0 = not timed).
// Device: each kernel 50 us, starting 20 us after its launch.
void WriteSampledLaunches(const std::string& path, GpuTimingMode timing) {
  ProfileBuilder b(path, 1, 1);
  b.WriteHeader(0, 1, "h0", timing);
  b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 4, -1, 0, false));
  for (uint64_t i = 0; i < 4; ++i) {
    Event l = ProfileBuilder::Launch(b.Str("vllm::rms_norm_kernel"), i == 1 ? 8 * kUs : 0);
    l.set_api(b.Str("cudaLaunchKernel"));
    b.Host(1, (100 + 100 * i) * kUs, i + 1, l);
    if (timing == GPU_TIMING_CUPTI) b.Device(0, (120 + 100 * i) * kUs, i + 1, Kernel(50 * kUs));
  }
  b.Close(true);
}

TEST_CASE("launches timed 1 in N: API time estimated from the timed ones, untimed left empty") {
  const std::string dir = TmpDir("sampled");
  WriteSampledLaunches(dir + "/rank0.pb", GPU_TIMING_CUPTI);
  Json s = ReportInPlace(dir);
  const Json* launch = nullptr;
  for (const Json& a : s["host"]["api"]) {
    if (a["name"] == "cudaLaunchKernel") launch = &a;
  }
  REQUIRE(launch != nullptr);
  CHECK((*launch)["count"] == 4);
  CHECK((*launch)["timed"] == 1);
  CHECK((*launch)["mean_us"] == 8.0);
  CHECK((*launch)["total_ms"] == 0.032);  // the timed mean x 4 calls
  // Launch to start only where the launch's end is known: 120+100 - (200+8) = 12 us.
  CHECK(s["host"]["launch_to_start_us"]["count"] == 1);
  CHECK(s["host"]["launch_to_start_us"]["mean"] == 12.0);
  CHECK(s["kernels"][0]["count"] == 4);
  // ops.csv: launch_ns, api_dur_ns, ..., launch_to_start_ns (empty when not timed).
  std::string csv = ReadAll(dir + "/ops.csv");
  std::vector<std::string> rows = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  REQUIRE(rows.size() == 5);
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(rows[i], ',');
    REQUIRE(f.size() >= 14);
    INFO(rows[i]);
    CHECK(f[9] == (i == 2 ? "8000" : ""));     // api_dur_ns
    CHECK(f[13] == (i == 2 ? "12000" : ""));   // launch_to_start_ns
    CHECK(f[12] == "50000");                   // device dur_ns: always there
  }
  CHECK(ReadAll(dir + "/report.md").find("| cudaLaunchKernel | 4 | 1 | 0.032 | 8.000 |") !=
        std::string::npos);
}

// A run of polls (Event.calls/busy) is every one of its calls, and the time inside them: one
// record of 1000 not-ready cudaEventQuery calls spanning 1000 us (400 us inside the calls), then
// the successful one (2 us).
TEST_CASE("a run of polls counts its calls and their busy time in the host API table") {
  const std::string dir = TmpDir("polls");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(2000 * kUs, 1, -1, 0, false));
    Event run;
    run.set_kind(EV_API);
    run.set_name(b.Str("cudaEventQuery"));
    run.set_dur(1000 * kUs);
    run.set_ret(600);
    run.set_calls(1000);
    run.set_busy(400 * kUs);
    b.Host(1, 100 * kUs, 0, run);
    Event done;
    done.set_kind(EV_API);
    done.set_name(b.Str("cudaEventQuery"));
    done.set_dur(2 * kUs);
    b.Host(1, 1100 * kUs, 0, done);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json* query = nullptr;
  for (const Json& a : (*s)["host"]["api"]) {
    if (a["name"] == "cudaEventQuery") query = &a;
  }
  REQUIRE(query != nullptr);
  CHECK((*query)["count"] == 1001);
  CHECK((*query)["timed"] == 1001);
  CHECK((*query)["total_ms"] == 0.402);
}

// Copies, sets, allocations and frees carry their API's name: 3 cudaMemcpyAsync and a
// cudaMemcpy2D are not 4 cudaMemcpy, a cudaHostAlloc is not a cudaMalloc. Unnamed ones (an older
// file) fall back to the kind's usual API.
TEST_CASE("the host API table names copies, sets and allocations by the API called") {
  const std::string dir = TmpDir("apinames");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    auto ev = [&](EventKind kind, const char* api, uint64_t dur) {
      Event e;
      e.set_kind(kind);
      if (api != nullptr) e.set_name(b.Str(api));
      e.set_dur(dur);
      return e;
    };
    uint64_t t = 0;
    for (int i = 0; i < 3; ++i) b.Host(1, t += 10 * kUs, 0, ev(EV_MEMCPY, "cudaMemcpyAsync", kUs));
    b.Host(1, t += 10 * kUs, 0, ev(EV_MEMCPY, "cudaMemcpy2D", 4 * kUs));
    b.Host(1, t += 10 * kUs, 0, ev(EV_MEMSET, "cudaMemsetAsync", 2 * kUs));
    b.Host(1, t += 10 * kUs, 0, ev(EV_ALLOC, "cudaHostAlloc", 8 * kUs));
    b.Host(1, t += 10 * kUs, 0, ev(EV_FREE, "cudaFreeHost", 6 * kUs));
    b.Host(1, t += 10 * kUs, 0, ev(EV_MEMCPY, nullptr, 5 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::map<std::string, std::pair<int, double>> api;  // name -> count, mean us
  for (const auto& a : (*s)["host"]["api"]) {
    api[a["name"].get<std::string>()] = {a["count"].get<int>(), a["mean_us"].get<double>()};
  }
  CHECK(api.size() == 6);
  CHECK(api["cudaMemcpyAsync"] == std::make_pair(3, 1.0));
  CHECK(api["cudaMemcpy2D"] == std::make_pair(1, 4.0));
  CHECK(api["cudaMemsetAsync"] == std::make_pair(1, 2.0));
  CHECK(api["cudaHostAlloc"] == std::make_pair(1, 8.0));
  CHECK(api["cudaFreeHost"] == std::make_pair(1, 6.0));
  CHECK(api["cudaMemcpy"] == std::make_pair(1, 5.0));
}

// More kernels than report.md's top-kernels table shows (25): it says how many more.
TEST_CASE("the top kernels table says what it leaves out") {
  const std::string dir = TmpDir("kernelrows");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    for (uint64_t i = 1; i <= 28; ++i) {  // kernel_i runs i us: kernel_1..3 are the smallest
      b.Host(1, i * 100 * kUs, i, ProfileBuilder::Launch(b.Str(absl::StrCat("kernel_", i)), kUs));
    }
    b.Flush();
    for (uint64_t i = 1; i <= 28; ++i) b.Device(0, i * 100 * kUs + 5 * kUs, i, Kernel(i * kUs));
    b.Close(true);
  }
  ReportInPlace(dir);
  const std::string md = ReadAll(dir + "/report.md");
  CHECK(md.find("| (3 more kernels: summary.json `kernels`) |") != std::string::npos);
  CHECK(md.find("| kernel_4 |") != std::string::npos);
  CHECK(md.find("| kernel_3 |") == std::string::npos);
}

// The kernel table covers the measured steps, as every aggregate: rank 0's start-up kernel, the
// kernel of its warm-up step and the one after its last step are counted apart; one between two
// measured steps is in (the window runs from the first measured start to the last end). Rank 1
// marks no step: its whole profile is in.
TEST_CASE("the kernel table covers the measured steps; start-up and warm-up counted apart") {
  const std::string dir = TmpDir("kernelscope");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h0", GPU_TIMING_CUPTI);
    // (launch at, name, device duration); steps: warm-up [1000, 2000), [3000, 4000), [5000, 6000)
    const std::vector<std::tuple<uint64_t, std::string, uint64_t>> launches = {
        {100, "startup_k", 50},  {1100, "warm_k", 40}, {3100, "step_k", 10},
        {4500, "between_k", 20}, {5100, "step_k", 30}, {7000, "teardown_k", 60}};
    b.Host(1, 1000 * kUs, 0, ProfileBuilder::Step(1000 * kUs, 1, 10, 0, true));
    b.Host(1, 3000 * kUs, 0, ProfileBuilder::Step(1000 * kUs, 1, 10, 0, false));
    b.Host(1, 5000 * kUs, 0, ProfileBuilder::Step(1000 * kUs, 1, 10, 0, false));
    uint64_t corr = 0;
    for (const auto& [at, name, dur] : launches) {
      b.Host(2, at * kUs, ++corr, ProfileBuilder::Launch(b.Str(name), kUs));
    }
    b.Flush();
    corr = 0;
    for (const auto& [at, name, dur] : launches) {
      b.Device(0, (at + 10) * kUs, ++corr, Kernel(dur * kUs));
    }
    b.Close(true);
  }
  {
    ProfileBuilder b(dir + "/rank1.pb");
    b.WriteHeader(1, 2, "h1", GPU_TIMING_CUPTI);
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(b.Str("worker_k"), kUs));
    b.Flush();
    b.Device(0, 110 * kUs, 1, Kernel(70 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  INFO((*s)["kernels"].dump(1));
  std::map<std::string, std::pair<int, double>> got;  // name -> count, total ms
  for (const Json& k : (*s)["kernels"]) {
    got[k["name"]] = {k["count"].get<int>(), k["total_ms"].get<double>()};
  }
  const std::map<std::string, std::pair<int, double>> want = {
      {"worker_k", {1, 0.07}}, {"step_k", {2, 0.04}}, {"between_k", {1, 0.02}}};
  CHECK(got == want);
  CHECK((*s)["kernels"][0]["share"] == Approx(70.0 / 130));
  CHECK((*s)["kernels_scope"] ==
        Json::parse(R"({"scope": "measured steps", "outside_ops": 3, "outside_ms": 0.15,
                          "ranks_whole": [1]})"));
  {  // A bucket named with `|` (a rules file's) stays in its table cell (round-23 sweep).
    Json m = *s;
    m["buckets_model_avg_ms"]["a|b"] = {{"ms", 1.0}, {"share", 0.5}};
    m["kernels"][0]["bucket"] = "a|b";
    const std::string md = RenderMarkdown(m);
    CHECK(md.find("| a\\|b | 1.000 | 50.0% |") != std::string::npos);
    CHECK(md.find("a|b") == std::string::npos);
  }
  const std::string md = RenderMarkdown(*s);
  CHECK(md.find("Left out: 3 ops, 0.150 ms of device time outside them (start-up, warm-up). "
                "Rank 1 marked no measured step: counted whole, start-up and warm-up "
                "included.") != std::string::npos);

  // Without measured steps (rank 1 alone) the table is the whole profile.
  auto s1 = BuildSummary({dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s1.ok());
  CHECK((*s1)["kernels_scope"] ==
        Json::parse(R"({"scope": "all ops", "outside_ops": 0, "outside_ms": 0.0,
                          "ranks_whole": []})"));
  CHECK(RenderMarkdown(*s1).find("Every rank, the whole profile (no measured steps)") !=
        std::string::npos);
}

// More APIs than report.md's table shows: it says how many more (before, rows beyond 15 vanished
// silently), and APIs without a timed call (launches sampled 1 in N) rank by calls among
// themselves, so the engine's launch API is not the first left out.
TEST_CASE("the host API table says what it leaves out; untimed APIs rank by calls") {
  const std::string dir = TmpDir("apirows");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    uint64_t t = 0;
    for (int i = 0; i < 15; ++i) {  // 15 timed APIs
      Event e;
      e.set_kind(EV_API);
      e.set_name(b.Str(absl::StrCat("cudaApi", 10 + i)));
      e.set_dur(uint64_t(i + 1) * kUs);
      b.Host(1, t += 10 * kUs, 0, e);
    }
    // Launches whose end was not read (dur 0): 2 through one API, 40 through another.
    const uint32_t k = b.Str("some_kernel");
    for (int i = 0; i < 42; ++i) {
      Event l = ProfileBuilder::Launch(k, 0);
      l.set_api(b.Str(i < 2 ? "cudaLaunchKernelExC" : "cudaLaunchKernel"));
      b.Host(1, t += 10 * kUs, uint64_t(i + 1), l);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& api = (*s)["host"]["api"];
  REQUIRE(api.size() == 17);
  CHECK(api[15]["name"] == "cudaLaunchKernel");
  CHECK(api[16]["name"] == "cudaLaunchKernelExC");
  ReportInPlace(dir);
  const std::string md = ReadAll(dir + "/report.md");
  CHECK(md.find("| (2 more APIs: summary.json `host.api`) |") != std::string::npos);
  CHECK(md.find("| cudaApi24 |") != std::string::npos);
  CHECK(md.find("| cudaLaunchKernel |") == std::string::npos);
}

// A cudaDeviceReset that released two allocations: the agent records the reset and a free per
// allocation, under the reset's API. The table counts one reset call (before: 3, with the
// reset's time thrice); the memory is freed all the same.
TEST_CASE("the frees a device reset implies are memory, not calls") {
  const std::string dir = TmpDir("resetfrees");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    const uint32_t malloc_id = b.Str("cudaMalloc"), reset = b.Str("cudaDeviceReset");
    auto mem = [&](EventKind kind, uint32_t api, uint64_t t, uint64_t dur, uint64_t ptr) {
      Event e;
      e.set_kind(kind);
      e.set_name(api);
      e.set_dur(dur);
      e.set_ptr(ptr);
      e.set_bytes(1 << 20);
      b.Host(1, t, 0, e);
    };
    mem(EV_ALLOC, malloc_id, 10 * kUs, kUs, 0x1000);
    mem(EV_ALLOC, malloc_id, 20 * kUs, kUs, 0x2000);
    Event r;
    r.set_kind(EV_API);
    r.set_name(reset);
    r.set_dur(1500 * kUs);
    b.Host(1, 30 * kUs, 0, r);
    mem(EV_FREE, reset, 30 * kUs, 1500 * kUs, 0x1000);
    mem(EV_FREE, reset, 30 * kUs, 1500 * kUs, 0x2000);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::map<std::string, std::pair<int, double>> api;  // name -> count, total ms
  for (const auto& a : (*s)["host"]["api"]) {
    api[a["name"].get<std::string>()] = {a["count"].get<int>(), a["total_ms"].get<double>()};
  }
  CHECK(api["cudaDeviceReset"] == std::make_pair(1, 1.5));
  const auto& devs = (*s)["memory"]["devices"];
  REQUIRE(devs.size() == 1);
  CHECK(devs[0]["peak_bytes"] == 2 << 20);
  CHECK(devs[0]["frees"] == 2);
  CHECK(devs[0]["final_bytes"] == 0);
}

// The memory table is device memory that was allocated: a failed cudaMalloc (out of memory: a
// petabyte asked for) and pinned or registered host memory are not in it.
TEST_CASE("memory: device allocations that succeeded, per device; host memory and failures out") {
  const std::string dir = TmpDir("memory");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    uint64_t t = 0;
    auto mem = [&](EventKind kind, uint64_t ptr, uint64_t bytes, uint32_t mkind, uint32_t dev,
                   int32_t ret) {
      b.Host(1, t += 10 * kUs, 0, Mem(kind, ptr, bytes, mkind, dev, ret));
    };
    mem(EV_ALLOC, 0x1000, 1 << 20, MEM_DEVICE, 0, 0);
    mem(EV_ALLOC, 0, 1ull << 50, MEM_DEVICE, 0, 2);  // cudaErrorMemoryAllocation
    mem(EV_ALLOC, 0x9000, 64 << 20, MEM_HOST_PINNED, 0, 0);
    mem(EV_ALLOC, 0x2000, 2 << 20, MEM_ASYNC, 0, 0);
    mem(EV_ALLOC, 0x3000, 4 << 20, MEM_DEVICE, 1, 0);
    mem(EV_FREE, 0x2000, 2 << 20, MEM_ASYNC, 0, 0);
    mem(EV_FREE, 0xdead, 0, MEM_DEVICE, 0, 1);  // cudaErrorInvalidValue: nothing freed
    mem(EV_FREE, 0x9000, 64 << 20, MEM_HOST_PINNED, 0, 0);
    mem(EV_FREE, 0x1000, 1 << 20, MEM_DEVICE, 0, 0);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK(MemoryRows(*s) ==
        std::vector<std::vector<int64_t>>{{0, 2, 2, 3 << 20, 0}, {1, 1, 0, 4 << 20, 4 << 20}});
}

// Physical memory of the driver's virtual memory management (cuMemCreate/cuMemRelease, MemKind
// MEM_VMM) is known by its handle, which may equal some allocation's address: the two are kept
// apart. A free counts on the device of what it frees, whichever device its call named (a
// cuMemRelease or a cudaFree made while another device was current).
TEST_CASE("memory: VMM handles apart from pointers; frees count on their allocation's device") {
  const std::string dir = TmpDir("memory_vmm");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    uint64_t t = 0;
    auto mem = [&](EventKind kind, uint64_t ptr, uint64_t bytes, uint32_t mkind, uint32_t dev) {
      b.Host(1, t += 10 * kUs, 0, Mem(kind, ptr, bytes, mkind, dev));
    };
    mem(EV_ALLOC, 0x5000, 1 << 20, MEM_DEVICE, 0);
    mem(EV_ALLOC, 0x5000, 2 << 20, MEM_VMM, 1);  // handle 0x5000 on device 1
    mem(EV_ALLOC, 0x6000, 4 << 20, MEM_VMM, 1);
    mem(EV_FREE, 0x5000, 0, MEM_VMM, 0);     // released while device 0 was current
    mem(EV_FREE, 0x5000, 0, MEM_DEVICE, 1);  // and the cudaFree while device 1 was
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK(MemoryRows(*s) ==
        std::vector<std::vector<int64_t>>{{0, 1, 1, 1 << 20, 0}, {1, 2, 1, 6 << 20, 4 << 20}});
}

// A free on one thread between two allocations on another: the file holds the allocating
// thread's batch first (the writer drains one ring at a time), but the peak is in time order.
TEST_CASE("memory: allocations and frees from several threads count in time order") {
  const std::string dir = TmpDir("memory_threads");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_HOST);
    auto mem = [&](uint32_t thread, uint64_t t, EventKind kind, uint64_t ptr) {
      Event e;
      e.set_kind(kind);
      e.set_dur(kUs);
      e.set_ptr(ptr);
      e.set_bytes(1 << 20);
      e.set_copy_kind(MEM_DEVICE);
      b.Host(thread, t, 0, e);
    };
    mem(1, 10 * kUs, EV_ALLOC, 0x1000);
    mem(1, 30 * kUs, EV_ALLOC, 0x2000);  // after thread 2 freed 0x1000
    b.Flush();                             // thread 1's batch first in the file
    mem(2, 20 * kUs, EV_FREE, 0x1000);
    mem(2, 40 * kUs, EV_FREE, 0x2000);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const auto& devs = (*s)["memory"]["devices"];
  REQUIRE(devs.size() == 1);
  CHECK(devs[0]["allocs"] == 2);
  CHECK(devs[0]["frees"] == 2);
  CHECK(devs[0]["peak_bytes"] == 1 << 20);
  CHECK(devs[0]["final_bytes"] == 0);
}

// A cudaFree waits for the device before it frees: the memory is held until it returns, so what
// another thread allocates meanwhile adds to the peak (Perfetto's counter drew 96 MiB while the
// report said 64). A free of memory the profile never saw allocated (a driver-API allocation
// under CUDA-event timing, which records runtime calls only) frees nothing recorded.
TEST_CASE("memory: a free holds its memory until it returns; unknown frees are no frees") {
  const std::string dir = TmpDir("memory_long_free");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_EVENTS);
    b.Host(1, 10 * kUs, 0, Mem(EV_ALLOC, 0x1000, 64 << 20, MEM_DEVICE, 0));
    Event long_free = Mem(EV_FREE, 0x1000, 64 << 20, MEM_DEVICE, 0);
    long_free.set_dur(50000 * kUs);  // [100 us, 50.1 ms)
    b.Host(1, 100 * kUs, 0, long_free);
    b.Host(1, 60000 * kUs, 0, Mem(EV_FREE, 0x9000, 0, MEM_DEVICE, 0));  // cuMemAlloc'd
    b.Flush();
    b.Host(2, 1000 * kUs, 0, Mem(EV_ALLOC, 0x2000, 32 << 20, MEM_DEVICE, 0));
    b.Host(2, 70000 * kUs, 0, Mem(EV_FREE, 0x2000, 32 << 20, MEM_DEVICE, 0));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK(MemoryRows(*s) == std::vector<std::vector<int64_t>>{{0, 2, 2, 96 << 20, 0}});
  CHECK((*s)["memory"]["devices"][0]["peak_at_ms"] == 0.99);  // thread 2's allocation, on the
                                                              // job clock from the first event
}

// Bus bandwidth as nccl-tests computes it, on 4 ranks, each call 1 ms: size = the whole buffer
// (a reduce-scatter's and an all-to-all's are n times the per-rank or per-peer bytes the agent
// records, a gather's and a scatter's n times the block), busbw = size / time x 2(n-1)/n for an
// allreduce, (n-1)/n for allgather, reduce-scatter, all-to-all, gather and scatter, 1 otherwise;
// MPI's nonblocking collectives as their blocking ones.
TEST_CASE("collectives: sizes and bus bandwidth follow nccl-tests' conventions") {
  const std::string dir = TmpDir("busbw");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 4, "h0", GPU_TIMING_CUPTI);
    uint64_t t = 0, corr = 0;
    std::vector<std::pair<uint64_t, uint64_t>> kernels;  // (start, corr) of the NCCL calls'
    // 1 ms each: an MPI call on the host, an NCCL call by its kernel (its host time is only
    // the enqueue).
    auto call = [&](CollLibrary lib, const char* op, uint64_t bytes, uint64_t recv_bytes) {
      Event e = MpiCall(b, op, bytes, 0, -1);
      e.set_dur(1000 * kUs);
      e.mutable_coll()->set_lib(lib);
      e.mutable_coll()->set_recv_bytes(recv_bytes);
      t += 2000 * kUs;
      if (lib == LIB_NCCL) {
        e.set_dur(5 * kUs);
        e.mutable_coll()->set_corr(++corr);
        kernels.push_back({t + 10 * kUs, corr});
      }
      b.Host(1, t, 0, e);
    };
    const uint64_t MiB = 1 << 20;
    call(LIB_NCCL, "ReduceScatter", MiB, MiB);        // recvcount: 1 MiB per rank -> 4 MiB
    call(LIB_NCCL, "AlltoAll", MiB, 4 * MiB);         // 1 MiB per peer -> 4 MiB
    call(LIB_NCCL, "AllGather", MiB, 4 * MiB);        // 4 MiB gathered
    call(LIB_MPI, "Iallreduce", 4 * MiB, 4 * MiB);    // factor 1.5 as Allreduce
    call(LIB_MPI, "Reduce_scatter_block", MiB, MiB);  // recvcount -> 4 MiB
    call(LIB_MPI, "Reduce_scatter", 4 * MiB, MiB);    // sum(recvcounts) is already 4 MiB
    call(LIB_MPI, "Bcast", 4 * MiB, 4 * MiB);
    call(LIB_NCCL, "Bcast", 4 * MiB, 4 * MiB);  // ncclBcast: in the Broadcast row
    call(LIB_NCCL, "Gather", MiB, 4 * MiB);     // sendcount: 1 MiB per rank -> 4 MiB
    call(LIB_NCCL, "Scatter", MiB, MiB);        // recvcount: 1 MiB per rank -> 4 MiB
    call(LIB_MPI, "Gather", MiB, 0);            // a non-root's block -> the root's 4 MiB
    call(LIB_MPI, "Iscatter", MiB, MiB);        // as Scatter
    call(LIB_MPI, "Barrier", 0, 0);             // no bytes: no bandwidth
    b.Flush();
    for (const auto& [start, c] : kernels) b.Device(0, start, c, Kernel(1000 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::map<std::string, std::pair<double, double>> bw;  // op -> algbw, busbw
  for (const auto& r : (*s)["collectives"]["ops"]) {
    if (r["op"] == "Barrier") {
      CHECK(r["count"] == 1);
      CHECK(r["algbw_gbps"].is_null());
      CHECK(r["busbw_gbps"].is_null());
      continue;
    }
    CHECK(r["bytes"] == 4 << 20);
    CHECK(r["size_class"] == "4MiB-16MiB");
    bw[r["op"].get<std::string>()] = {r["algbw_gbps"].get<double>(),
                                      r["busbw_gbps"].get<double>()};
  }
  const double alg = (4 << 20) / 1e6;  // bytes per ns = GB/s: 4.194
  CHECK(bw.size() == 11);  // 12 rows: NCCL's and MPI's Gather share a key here
  CHECK(bw.count("Broadcast") == 1);
  for (const auto& kv : bw) {
    INFO(kv.first);
    CHECK(kv.second.first == Approx(alg));
  }
  CHECK(bw["ReduceScatter"].second == Approx(alg * 0.75));
  CHECK(bw["AlltoAll"].second == Approx(alg * 0.75));
  CHECK(bw["AllGather"].second == Approx(alg * 0.75));
  CHECK(bw["Iallreduce"].second == Approx(alg * 1.5));
  CHECK(bw["Reduce_scatter_block"].second == Approx(alg * 0.75));
  CHECK(bw["Reduce_scatter"].second == Approx(alg * 0.75));
  CHECK(bw["Bcast"].second == Approx(alg));
  for (const char* op : {"Gather", "Scatter", "Iscatter"}) {
    INFO(op);
    CHECK(bw[op].second == Approx(alg * 0.75));
  }
}

// Rows of one op sort by size, as a size sweep reads (before: by the labels' text, 16KiB-64KiB
// before 1KiB-4KiB); a row mixing sizes (56 and 57 bytes) takes algbw from the exact mean size, so
// busbw / algbw is the bus factor (before: from the truncated integer mean, 1.5% off).
TEST_CASE("collectives: rows sort by size; mixed sizes keep busbw / algbw at the factor") {
  const std::string dir = TmpDir("coll_order");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 4, "h0", GPU_TIMING_HOST);
    uint64_t t = 0;
    auto call = [&](const char* op, uint64_t bytes) {
      Event e = MpiCall(b, op, bytes, 0, -1);
      e.set_dur(100 * kUs);
      b.Host(1, t += 200 * kUs, 0, e);
    };
    for (uint64_t bytes : {20u << 10, 2u << 20, 2u << 10, 56u, 57u, 300u << 10}) {
      call("Allreduce", bytes);
    }
    call("Barrier", 0);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::vector<std::string> order;
  for (const auto& r : (*s)["collectives"]["ops"]) {
    order.push_back(r["op"].get<std::string>() + " " + r["size_class"].get<std::string>());
    if (r["size_class"] == "0B-1KiB" && r["op"] == "Allreduce") {
      CHECK(r["bytes"] == 56);  // (the mean, truncated)
      CHECK(r["busbw_gbps"].get<double>() / r["algbw_gbps"].get<double>() ==
            Approx(1.5).epsilon(1e-4));
      CHECK(r["algbw_gbps"].get<double>() == Approx(56.5 / 100e3).epsilon(1e-3));
    }
  }
  CHECK(order == std::vector<std::string>{"Allreduce 0B-1KiB", "Allreduce 1KiB-4KiB",
                                          "Allreduce 16KiB-64KiB", "Allreduce 256KiB-1MiB",
                                          "Allreduce 1MiB-4MiB", "Barrier 0B-1KiB"});
}

// Two ranks, four allreduces: rank 1 arrives 2 us after rank 0 three times, rank 0 arrives 3 ms
// after rank 1 once. Rank 1 is the most frequent last arriver, but rank 0 is the straggler: the
// others waited 3 ms for it, 6 us for rank 1.
TEST_CASE("stragglers: the straggler is the rank waited for longest, not most often last") {
  const std::string dir = TmpDir("straggler_weight");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    for (uint64_t i = 0; i < 4; ++i) {
      uint64_t at = (1000 + 10000 * i) * kUs;
      if (i < 3 && rank == 1) at += 2 * kUs;
      if (i == 3 && rank == 0) at += 3000 * kUs;
      Event e = MpiCall(b, "Allreduce", 64, i, -1);
      e.set_dur(4000 * kUs);  // a call lasts at least as long as it waits
      b.Host(1, at, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 4);
  CHECK(sg["most_frequent_last_arriver"] == 1);
  CHECK(sg["straggler"] == 0);
  CHECK(sg["wait_caused_ms_by_rank"]["0"] == 3.0);
  CHECK(sg["wait_caused_ms_by_rank"]["1"] == 0.006);
}

// Start-up is no serving loop: rank 1 arrives 50 ms late at a broadcast before the steps
// (loading its model), rank 0 arrives 1 ms late at each of the 3 allreduces inside its steps.
// The straggler of the measured steps is rank 0; the broadcast is summed apart (before, its
// 50 ms made rank 1 the straggler).
TEST_CASE("stragglers: calls outside the measured steps are summed apart, not in the verdict") {
  const std::string dir = TmpDir("straggler_scope");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    Event bcast = MpiCall(b, "Bcast", 128, 0, 0);
    bcast.set_dur(60000 * kUs);
    b.Host(1, (rank == 1 ? 51000 : 1000) * kUs, 0, bcast);
    const uint32_t step = b.Str("step tokens=1");
    for (uint64_t i = 0; i < 3; ++i) {
      const uint64_t t = (100000 + 10000 * i) * kUs;
      b.Host(1, t, 0, ProfileBuilder::Nvtx(step, 5000 * kUs, 0));
      Event e = MpiCall(b, "Allreduce", 64, i + 1, -1);
      e.set_dur(2000 * kUs);
      b.Host(1, t + (rank == 0 ? 1100 : 100) * kUs, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  INFO(sg.dump(1));
  CHECK(sg["calls_matched"] == 4);
  CHECK(sg["scope"] == "measured steps");
  CHECK(sg["straggler"] == 0);
  CHECK(sg["wait_ms_by_rank"]["1"] == 3.0);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.0);  // rank 0 waited for no one in the steps
  CHECK(sg["outside_steps"]["calls"] == 1);
  CHECK(sg["outside_steps"]["wait_ms_by_rank"]["0"] == 50.0);
  CHECK(sg["skew_us"]["count"] == 3);
  const std::string md = RenderMarkdown(*s);
  CHECK(md.find("1 calls outside the measured steps (start-up, warm-up) left out") !=
        std::string::npos);
}

// Three ranks on world (size 3) and a pair: rank 2 arrives 5 ms late at four allreduces; rank
// 0 sends rank 1 one message. With every file, rank 2 is the straggler. Without rank 2's file
// (or with --ranks 0,1) the allreduces are incomplete: their last arrival is unknown, so they
// are left out (counted, with a warning) rather than make rank 1 the straggler; the 0 -> 1
// transfer, complete, still matches. With rank 0 alone nothing matches: its wait is null.
TEST_CASE("stragglers: calls missing some of their ranks are left out, not misread") {
  const std::string dir = TmpDir("partial");
  for (int rank = 0; rank < 3; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 3, "h", GPU_TIMING_HOST);
    WriteRankComm(&b, rank, 3, LIB_MPI, "world");
    for (uint64_t i = 0; i < 4; ++i) {
      uint64_t at = (1000 + 10000 * i + (rank == 1 ? 100 : 0)) * kUs;
      if (rank == 2) at += 5000 * kUs;
      Event e = MpiCall(b, "Allreduce", 64, i, -1);
      e.set_dur(8000 * kUs);
      b.Host(1, at, 0, e);
    }
    if (rank < 2) {
      Event p = MpiCall(b, rank == 0 ? "Send" : "Recv", 64, 0, 1 - rank);
      p.set_dur(3000 * kUs);
      b.Host(1, (50000 + (rank == 0 ? 2000 : 0)) * kUs, 0, p);  // rank 1 waits 2 ms
    }
    b.Close(true);
  }
  const std::string r0 = dir + "/rank0.pb", r1 = dir + "/rank1.pb", r2 = dir + "/rank2.pb";
  auto all = BuildSummary({r0, r1, r2}, ReportOptions(), "");
  REQUIRE(all.ok());
  const Json& full = (*all)["collectives"]["stragglers"];
  CHECK(full["calls_matched"] == 5);
  CHECK(full["calls_incomplete"] == 0);
  CHECK(full["straggler"] == 2);

  auto check_partial = [](const Json& s) {
    const Json& sg = s["collectives"]["stragglers"];
    INFO(sg.dump());
    CHECK(sg["calls_matched"] == 1);  // the transfer
    CHECK(sg["calls_incomplete"] == 4);
    CHECK(sg["straggler"] == 0);     // rank 1 waited 2 ms for rank 0's send
    CHECK(sg["wait_ms_by_rank"]["1"] == 2.0);
    bool warned = false;
    for (const Json& w : s["meta"]["warnings"])
      warned = warned || w.get<std::string>().find("4 collective or point-to-point calls were "
                                                   "seen on only some") == 0;
    CHECK(warned);
  };
  auto missing = BuildSummary({r0, r1}, ReportOptions(), "");
  REQUIRE(missing.ok());
  check_partial(*missing);
  ReportOptions some;
  some.ranks = {0, 1};
  auto selected = BuildSummary({r0, r1, r2}, some, "");
  REQUIRE(selected.ok());
  check_partial(*selected);

  auto alone = BuildSummary({r0}, ReportOptions(), "");
  REQUIRE(alone.ok());
  const Json& c = (*alone)["collectives"];
  CHECK(c["stragglers"]["calls_matched"] == 0);
  CHECK(c["stragglers"]["calls_incomplete"] == 5);
  CHECK(c["stragglers"]["straggler"].is_null());
  REQUIRE(c["per_rank"].size() == 1);
  CHECK(c["per_rank"][0]["wait_ms"].is_null());
}

// A rank waits for a later one at most as long as its own call lasted: rank 0's small MPI_Send
// returns at once (eagerly, 1 us) though rank 1 posts the receive 20 ms later; its receive then
// waits 30 ms in a 30 ms call for rank 0's second send. Before, rank 0 was charged 20 ms of waiting
// for a call of 1 us, and rank 1 was the straggler.
TEST_CASE("stragglers: a call waits at most its own duration (an eager send returns at once)") {
  const std::string dir = TmpDir("eager");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    if (rank == 0) {
      b.Host(1, 1000 * kUs, 0, MpiCall(b, "Send", 64, 0, 1));   // 1 us
      b.Host(1, 51000 * kUs, 0, MpiCall(b, "Send", 64, 1, 1));  // 1 us
    } else {
      Event r0 = MpiCall(b, "Recv", 64, 0, 0);
      b.Host(1, 21000 * kUs, 0, r0);
      Event r1 = MpiCall(b, "Recv", 64, 1, 0);
      r1.set_dur(30000 * kUs);
      b.Host(1, 21002 * kUs, 0, r1);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  INFO(sg.dump());
  CHECK(sg["calls_matched"] == 2);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.001);
  CHECK(sg["wait_ms_by_rank"]["1"] == 29.998);
  CHECK(sg["straggler"] == 0);
}

// PROFAGENT_STEP_RULE=graph on an engine that also marks NVTX steps: the agent writes both, which
// overlap. The application's NVTX steps win: 3 steps of 10 ms (not 3 + 4 graph-launch steps of
// 7 ms), and a warning says what was left out.
TEST_CASE("steps from the step rule give way to the application's NVTX steps") {
  const std::string dir = TmpDir("rule_and_nvtx");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    const uint32_t nvtx = b.Str("nvtx"), graph = b.Str("graph");
    for (uint64_t i = 0; i < 4; ++i) {
      Event g = ProfileBuilder::Step(7000 * kUs, -1, -1, 0, false);
      g.mutable_step()->set_source(graph);
      b.Host(1, (1000 + 7000 * i) * kUs, 0, g);
    }
    for (uint64_t i = 0; i < 3; ++i) {
      Event n = ProfileBuilder::Step(10000 * kUs, 4, 100, 0, false);
      n.mutable_step()->set_source(nvtx);
      b.Host(2, (1000 + 10000 * i) * kUs, 0, n);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 3);
  CHECK((*s)["stats"]["step_latency_ms"]["mean"] == 10.0);
  CHECK((*s)["meta"]["warnings"].dump().find("4 steps from PROFAGENT_STEP_RULE left out") !=
        std::string::npos);
}

// One row (AllReduce, 1 MiB) mixing three calls on a 2-rank tensor-parallel group (bus factor
// 2(n-1)/n = 1) and one on the 4-rank world (1.5): busbw is the calls' mean of size x factor over
// the mean time, not the last call's factor for all.
TEST_CASE("collectives: a row mixing communicator sizes weighs each call's bus factor") {
  const std::string dir = TmpDir("busbw_mixed");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 4, "h0", GPU_TIMING_CUPTI);
    Record comm;
    comm.mutable_comm()->set_id(2);
    comm.mutable_comm()->set_lib(LIB_NCCL);
    comm.mutable_comm()->set_unique_id("tp0");
    comm.mutable_comm()->set_size(2);
    comm.mutable_comm()->set_rank(0);
    b.Write(comm);
    uint64_t t = 0, corr = 0;
    for (uint64_t comm_id : {2, 2, 2, 9}) {  // 9: no CommDef, the world's size
      Event e = Coll(b, 5 * kUs, comm_id, t / (2000 * kUs));  // kernels of 1 ms, below
      e.mutable_coll()->set_corr(++corr);
      b.Host(1, t += 2000 * kUs, 0, e);
    }
    b.Flush();
    for (uint64_t c = 1; c <= corr; ++c)
      b.Device(0, c * 2000 * kUs + 10 * kUs, c, Kernel(1000 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  REQUIRE((*s)["collectives"]["ops"].size() == 1);
  const Json& row = (*s)["collectives"]["ops"][0];
  CHECK(row["count"] == 4);
  const double alg = (1 << 20) / 1e6;
  CHECK(row["algbw_gbps"].get<double>() == Approx(alg));
  CHECK(row["busbw_gbps"].get<double>() == Approx(alg * (3 * 1.0 + 1.5) / 4));
}

// Device ops of several streams come in the order their records arrived, not by start: A
// [100, 200) us, C [400, 500), then B [150, 450) that spans both. The GPU was busy 400 us without
// a gap; before, B added nothing (it started before the end so far), busy read 200 us and a
// 200 us gap was reported before C.
TEST_CASE("GPU busy time and idle gaps: device ops out of start order (concurrent streams)") {
  const std::string dir = TmpDir("busy");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t k = b.Str("k");
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    for (int i = 1; i <= 3; ++i) b.Host(1, 10 * kUs * i, i, ProfileBuilder::Launch(k, kUs));
    b.Flush();
    b.Device(0, 100 * kUs, 1, Kernel(100 * kUs));
    b.Device(0, 400 * kUs, 3, Kernel(100 * kUs));
    b.Device(0, 150 * kUs, 2, Kernel(300 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["host"]["gpu_busy_ms"] == 0.4);
  CHECK((*s)["host"]["idle_gaps"]["count"] == 0);
  CHECK((*s)["host"]["per_step"]["gpu_busy_ms"]["mean"] == 0.4);
}

// Two runs written to one directory: rank 0's files of two unrelated processes (pids 500 and
// 600) are flagged; a forked child's file (ppid = the parent's pid) is not.
TEST_CASE("meta: files of one rank from unrelated processes are flagged as several runs") {
  auto write = [](const std::string& path, uint32_t pid, uint32_t ppid) {
    ProfileBuilder b(path);
    Record r;
    Header* h = r.mutable_header();
    h->set_pid(pid);
    h->set_ppid(ppid);
    h->set_hostname("h0");
    h->set_rank(0);
    h->set_world_size(1);
    h->set_rank_source("env:RANK");
    h->set_gpu_timing(GPU_TIMING_HOST);
    b.Write(r);
    b.Close(true);
  };
  auto flagged = [](const std::vector<std::string>& files) {
    auto s = BuildSummary(files, ReportOptions(), "");
    REQUIRE(s.ok());
    for (const Json& w : (*s)["meta"]["warnings"]) {
      if (w.get<std::string>().rfind("several unrelated files hold rank(s) 0 (", 0) == 0) return true;
    }
    return false;
  };
  const std::string dir = TmpDir("two_runs");
  write(dir + "/rank0.pb", 500, 1);
  write(dir + "/rank0.600.pb", 600, 1);
  write(dir + "/rank0.501.pb", 501, 500);  // forked by 500
  CHECK(flagged({dir + "/rank0.pb", dir + "/rank0.600.pb"}));
  CHECK_FALSE(flagged({dir + "/rank0.pb", dir + "/rank0.501.pb"}));
}

// Files without a rank: two unrelated processes that ran one after the other (two runs of a
// single-process program into one directory) are flagged; two that ran side by side (one
// job's workers) are not.
TEST_CASE("meta: unranked files of processes that ran one after the other are flagged") {
  auto write = [](const std::string& path, uint32_t pid, uint64_t start_us,
                  const std::string& job = "", uint32_t ppid = 0) {
    ProfileBuilder b(path);
    Record r;
    Header* h = r.mutable_header();
    h->set_pid(pid);
    h->set_ppid(ppid != 0 ? ppid : 1000 + pid);
    h->set_job(job);
    h->set_hostname("h0");
    h->set_rank(-1);
    h->set_gpu_timing(GPU_TIMING_HOST);
    b.Write(r);
    b.Host(1, start_us * kUs, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Close(true);
  };
  auto flagged = [](const std::vector<std::string>& files) {
    auto s = BuildSummary(files, ReportOptions(), "");
    REQUIRE(s.ok());
    return (*s)["meta"]["warnings"].dump().find("ran one after the other") != std::string::npos;
  };
  const std::string dir = TmpDir("two_pid_runs");
  write(dir + "/pid500.pb", 500, 0);
  write(dir + "/pid600.pb", 600, 5000);  // started after pid 500 ended
  write(dir + "/pid700.pb", 700, 500);   // beside pid 500
  CHECK(flagged({dir + "/pid500.pb", dir + "/pid600.pb"}));
  CHECK_FALSE(flagged({dir + "/pid500.pb", dir + "/pid700.pb"}));
  // One job's processes (a daemon's workers, whose parent had gone when they started: ppid 1):
  // the job they inherited ties them; another job's are still flagged.
  write(dir + "/pid800.pb", 800, 0, "42.1700000000000000000");
  write(dir + "/pid900.pb", 900, 5000, "42.1700000000000000000");
  write(dir + "/pid950.pb", 950, 9000, "43.1700000000000000000");
  CHECK_FALSE(flagged({dir + "/pid800.pb", dir + "/pid900.pb"}));
  CHECK(flagged({dir + "/pid900.pb", dir + "/pid950.pb"}));
  // Two runs started from one shell (siblings: one parent), each its own job: flagged (before,
  // the shared parent made them related).
  write(dir + "/pid1100.pb", 1100, 0, "1100.1", 77);
  write(dir + "/pid1200.pb", 1200, 5000, "1200.2", 77);
  CHECK(flagged({dir + "/pid1100.pb", dir + "/pid1200.pb"}));
}

// Files without ranks have positions, not ranks: the reference is the one with the most steps
// (an image and the one it exec'd, a launcher and its engine process), not the first listed.
TEST_CASE("meta: among unranked files the reference is the one with the most steps") {
  const std::string dir = TmpDir("unranked_ref");
  auto write = [&](const std::string& name, uint32_t pid, int steps) {
    ProfileBuilder b(dir + "/" + name);
    Record r;
    Header* h = r.mutable_header();
    h->set_pid(pid);
    h->set_hostname("h0");
    h->set_rank(-1);
    h->set_gpu_timing(GPU_TIMING_HOST);
    h->set_job("7.1");
    b.Write(r);
    for (int i = 0; i < steps; ++i) {
      b.Host(1, (1000 + 2000 * i) * kUs, 0, ProfileBuilder::Step(1000 * kUs, 2, -1, 0, false));
    }
    b.Close(true);
  };
  write("pid10.5.pb", 10, 2);
  write("pid10.pb", 10, 5);
  auto s = BuildSummary({dir + "/pid10.5.pb", dir + "/pid10.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 5);
  CHECK((*s)["stats"]["tokens"] == 10);
}

// Under CUDA-event timing, back-to-back kernels whose start and the previous end were rounded
// apart (1 ns) have no gap; a 5 us one is a gap. Under CUPTI every gap counts.
TEST_CASE("idle gaps: sub-microsecond gaps are not gaps under CUDA-event timing") {
  for (GpuTimingMode mode : {GPU_TIMING_EVENTS, GPU_TIMING_CUPTI}) {
    const std::string dir = TmpDir(mode == GPU_TIMING_EVENTS ? "gaps_events" : "gaps_cupti");
    {
      ProfileBuilder b(dir + "/rank0.pb");
      b.WriteHeader(0, 1, "h0", mode);
      const uint32_t k = b.Str("k");
      for (int i = 1; i <= 3; ++i) b.Host(1, 10 * kUs * i, i, ProfileBuilder::Launch(k, kUs));
      b.Flush();
      b.Device(0, 100 * kUs, 1, Kernel(100 * kUs));
      b.Device(0, 200 * kUs + 1, 2, Kernel(100 * kUs));   // 1 ns after
      b.Device(0, 305 * kUs + 1, 3, Kernel(100 * kUs));   // 5 us after
      b.Close(true);
    }
    auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
    REQUIRE(s.ok());
    CHECK((*s)["host"]["idle_gaps"]["count"] == (mode == GPU_TIMING_EVENTS ? 1 : 2));
  }
}

// MPI_Isend: posted in 1 us, reported complete by an MPI_Wait 64 us after the posting began;
// a second one never seen completing has no time (counted `untimed`), so the row's mean and
// bandwidth are those of the first: 64 KiB in 64 us = 1.024 GB/s. Before, the posting call's
// 1 us made it 65 GB/s.
TEST_CASE("nonblocking MPI calls are timed from posting to completion") {
  const std::string dir = TmpDir("isend");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h0", GPU_TIMING_HOST);
    for (int i = 0; i < 2; ++i) {
      Event e = MpiCall(b, "Isend", 64000, uint64_t(i), 1);
      e.mutable_coll()->set_nonblocking(true);
      const uint64_t start = (100 + 200 * uint64_t(i)) * kUs;
      if (i == 0) e.mutable_coll()->set_complete_ns(start + 64 * kUs);
      b.Host(1, start, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  REQUIRE((*s)["collectives"]["ops"].size() == 1);
  const Json& row = (*s)["collectives"]["ops"][0];
  CHECK(row["op"] == "Isend");
  CHECK(row["count"] == 2);
  CHECK(row["untimed"] == 1);
  CHECK(row["mean_us"] == 64.0);
  CHECK(row["time_ms"] == 0.064);
  CHECK(row["algbw_gbps"] == 1.0);
}

// Point-to-point calls are numbered per ordered pair of ranks, collectives per communicator: the
// n-th send from 0 to 1 meets the n-th receive of 1 from 0, not the n-th collective. Two ranks
// on one communicator: Allreduce #0 (rank 1 arrives 10 us late), a Send 0->1 / Recv 1<-0 (the
// receiver posts 50 us before the sender), a rank's Send to itself (no one waits), Allreduce #1
// (rank 1 30 us late). Before, keying by sequence number alone merged Allreduce #0 with the
// transfer and the self-send into one "call".
// A post / compute / test loop under Open MPI's progress rule (round-16 sweep, nbwait): ranks 0
// and 1 post an MPI_Iallreduce every 340 us; rank 0 tests 20 us later, rank 1 computes 300 us
// first. Rank 2 is fast too, but its request completes only when rank 1 next enters MPI (its
// next test, 3 us before), so it posts every later call 305 us late and arrives last, 25 us
// after rank 1. By arrivals alone, rank 2 is the straggler and rank 1 caused nothing. Rank 2's
// time blocked after the last arrival is a wait for rank 1 (whose entry into MPI let it
// complete), and so is the lateness it brings to its next call: rank 1 is the straggler.
TEST_CASE(
    "stragglers: a rank held back by MPI progress passes the blame to the one it waited for") {
  const std::string dir = TmpDir("progress_hold");
  constexpr int kIters = 10;
  auto t = [](int k) { return (1000 + 340 * uint64_t(k)) * kUs; };
  for (int rank = 0; rank < 3; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 3, "h", GPU_TIMING_HOST);
    WriteRankComm(&b, rank, 3, LIB_MPI, "world");
    for (int k = 0; k < kIters; ++k) {
      uint64_t post = t(k), arrive = 0, complete = 0;
      if (rank == 0) {
        arrive = post + 20 * kUs;
        complete = t(k) + 328 * kUs;  // (rank 2's arrival, 3 us)
      } else if (rank == 1) {
        arrive = post + 300 * kUs;
        complete = t(k) + 330 * kUs;
      } else {
        if (k > 0) post = t(k) + 305 * kUs;  // its previous call completed 303 us into this one
        arrive = post + 20 * kUs;
        complete = t(k + 1) + 303 * kUs;  // at rank 1's next test
      }
      Event e = MpiCall(b, "Iallreduce", 64, uint64_t(k), -1);
      e.mutable_coll()->set_nonblocking(true);
      e.mutable_coll()->set_wait_ns(arrive);
      e.mutable_coll()->set_complete_ns(complete);
      b.Host(1, post, 0, e);
    }
    b.Close(true);
  }
  auto s =
      BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb", dir + "/rank2.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  INFO(sg.dump());
  CHECK(sg["calls_matched"] == kIters);
  CHECK(sg["last_arriver_counts"]["2"] == kIters - 1);  // rank 2 arrives last from call 1 on
  CHECK(sg["straggler"] == 1);
  const double by1 = sg["wait_caused_ms_by_rank"]["1"].get<double>();
  const double by2 = sg["wait_caused_ms_by_rank"].value("2", 0.0);
  CHECK(by1 > 10 * by2);
  // Rank 2's own waits: 280 us for rank 1 in call 0 (the only one it is not last at), then held
  // 315 us after the last arrival (343 or 318 us, less the 28 or 3 us the quickest needed) in
  // every call but the last, whose completion no later test of rank 1 explains.
  CHECK(sg["wait_ms_by_rank"]["2"].get<double>() == Approx(0.280 + 0.315 * (kIters - 1)));
  CHECK(by2 == 0.0);  // its lateness is rank 1's doing
}

// Two requests completed by MPI_Test on each in turn (round-23 sweep, osu nb-test): rank 0
// posts an MPI_Iallreduce and an MPI_Ibcast, tests the first 1 us later and the second 2 us
// later (each request's wait starts at its own first test), and both complete when rank 1
// arrives, 20 us after the posting. Rank 0 waited 20 us per iteration, once: its two waits
// overlap (before, they were summed, 39 us, as if it had waited twice as long as it was there).
TEST_CASE("stragglers: overlapping waits of requests tested one by one count once") {
  const std::string dir = TmpDir("test_loop");
  constexpr int kIters = 5;
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    for (int k = 0; k < kIters; ++k) {
      const uint64_t t = (1000 + 100 * uint64_t(k)) * kUs;
      const char* ops[2] = {"Iallreduce", "Ibcast"};
      for (int i = 0; i < 2; ++i) {
        Event e = MpiCall(b, ops[i], 64, uint64_t(2 * k + i), -1);
        e.mutable_coll()->set_nonblocking(true);
        if (rank == 0) {
          e.mutable_coll()->set_wait_ns(t + uint64_t(1 + i) * kUs);
        } else {
          e.mutable_coll()->set_wait_ns(t + 21 * kUs);
        }
        e.mutable_coll()->set_complete_ns(t + 22 * kUs);
        b.Host(1, rank == 0 ? t : t + 20 * kUs, 0, e);
      }
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  INFO(sg.dump());
  CHECK(sg["calls_matched"] == 2 * kIters);
  CHECK(sg["wait_ms_by_rank"]["0"].get<double>() == Approx(0.020 * kIters));
  CHECK(sg["wait_caused_ms_by_rank"]["1"].get<double>() == Approx(0.020 * kIters));
  CHECK(sg["straggler"] == 1);
}

TEST_CASE("stragglers: point-to-point calls are matched per ordered pair of ranks") {
  const std::string dir = TmpDir("p2p");
  auto mpi = [](ProfileBuilder& b, const char* op, uint64_t seq, int peer) {
    Event e = MpiCall(b, op, 64, seq, peer);
    e.set_dur(100 * kUs);  // each call lasts until its match arrived
    return e;
  };
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    if (rank == 0) {
      b.Host(1, 100 * kUs, 0, mpi(b, "Allreduce", 0, -1));
      b.Host(1, 200 * kUs, 0, mpi(b, "Send", 0, 1));
      b.Host(1, 250 * kUs, 0, mpi(b, "Send", 0, 0));  // to itself
      b.Host(1, 260 * kUs, 0, mpi(b, "Recv", 0, 0));
      b.Host(1, 300 * kUs, 0, mpi(b, "Allreduce", 1, -1));
      // Calls the agent could not number match nothing (before, they were merged into one
      // "call" across ranks): an MPI_ANY_SOURCE receive, a send to MPI_PROC_NULL.
      Event any = mpi(b, "Recv", 0xffffffffu, -1);
      any.set_name(any.api());  // as the agent writes it: the API in `name`
      any.clear_api();
      b.Host(1, 400 * kUs, 0, any);
      b.Host(1, 410 * kUs, 0, mpi(b, "Send", 0xffffffffu, -2));
    } else {
      b.Host(1, 110 * kUs, 0, mpi(b, "Allreduce", 0, -1));
      b.Host(1, 150 * kUs, 0, mpi(b, "Recv", 0, 0));
      b.Host(1, 330 * kUs, 0, mpi(b, "Allreduce", 1, -1));
      b.Host(1, 900 * kUs, 0, mpi(b, "Recv", 0xffffffffu, -1));
      b.Host(1, 950 * kUs, 0, mpi(b, "Send", 0xffffffffu, -2));
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 3);
  CHECK(sg["skew_us"]["max"] == 50.0);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.04);  // 10 + 30 us
  CHECK(sg["wait_ms_by_rank"]["1"] == 0.05);  // the receive posted 50 us early
  CHECK(sg["last_arriver_counts"]["1"] == 2);
  CHECK(sg["last_arriver_counts"]["0"] == 1);
  // The host API table names each MPI call (not one "collective" row).
  std::map<std::string, int> api;
  for (const auto& a : (*s)["host"]["api"]) api[a["name"].get<std::string>()] = a["count"];
  CHECK(api == std::map<std::string, int>{{"MPI_Allreduce", 2}, {"MPI_Send", 3}, {"MPI_Recv", 2}});
}

// A ring exchange with MPI_Sendrecv on 2 ranks (each sends to and receives from the other):
// rank 1 calls it 300 us after rank 0 each time. Each Sendrecv is both a send and a receive, so
// it meets the other rank's call both ways (before, only send sides were kept and nothing
// matched): 2 matched transfers per exchange, and rank 0's call waited 300 us once (each side
// counts for half).
TEST_CASE("stragglers: MPI_Sendrecv is matched on its send and its receive side") {
  const std::string dir = TmpDir("sendrecv");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_MPI, "world");
    for (uint64_t i = 0; i < 3; ++i) {
      Event e = MpiCall(b, "Sendrecv", 64, i, 1 - rank);
      e.set_dur(400 * kUs);
      e.mutable_coll()->set_recv_peer(1 - rank);
      e.mutable_coll()->set_recv_seq(i);
      b.Host(1, (1000 * i + (rank == 0 ? 0 : 300)) * kUs, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 6);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.9);  // 3 x 300 us
  CHECK(sg["wait_ms_by_rank"]["1"] == 0.0);
  CHECK(sg["last_arriver_counts"]["1"] == 6);
}

// An NCCL group of 4 AllReduce calls runs as one fused kernel of 400 us per rank; rank 1 reaches
// it 100 us after rank 0. Each call is charged a quarter of the kernel (mean 100 us, not 400),
// and rank 0's wait is the group's 100 us once (not once per call: 400).
TEST_CASE("collectives: the calls of an NCCL group share their fused kernel's time and wait") {
  const std::string dir = TmpDir("group");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_CUPTI);
    WriteTwoRankComm(&b, rank, LIB_NCCL, "nccl-clique");
    for (uint64_t i = 0; i < 4; ++i) {
      Event e = MpiCall(b, "AllReduce", 1 << 20, i, -1);
      e.mutable_coll()->set_lib(LIB_NCCL);
      e.mutable_coll()->set_group(1);
      e.mutable_coll()->set_corr(77);
      b.Host(1, (100 + i) * kUs, 0, e);
    }
    b.Flush();
    b.Device(0, (rank == 0 ? 200 : 300) * kUs, 77, Kernel(400 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& row = (*s)["collectives"]["ops"][0];
  CHECK(row["count"] == 8);
  CHECK(row["device_timed"] == 8);
  CHECK(row["mean_us"] == 100.0);
  CHECK(row["time_ms"] == 0.8);
  const Json& sg = (*s)["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 4);
  CHECK(sg["wait_ms_by_rank"]["0"] == 0.1);
  CHECK(sg["wait_ms_by_rank"]["1"] == 0.0);
  CHECK(sg["last_arriver_counts"]["1"] == 4);
}

// CUPTI's record of an NCCL kernel can reach the file before the host batch that holds the
// driver launch made inside the NCCL call and, after it, the call: the launch takes the device
// op first, and the call must still find its kernel (device time, not host enqueue time).
TEST_CASE("collectives: an NCCL call finds its kernel when the device record came first") {
  const std::string dir = TmpDir("coll_kernel_first");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    WriteTwoRankComm(&b, 0, LIB_NCCL, "nccl-clique");
    const uint32_t k = b.Str("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    for (uint64_t i = 0; i < 3; ++i) {
      b.Device(0, (1000 + 1000 * i) * kUs, 10 + i, Kernel(400 * kUs));
    }
    b.Flush();  // the device batch first in the file
    for (uint64_t i = 0; i < 3; ++i) {
      const uint64_t t = (900 + 1000 * i) * kUs;
      b.Host(1, t, 10 + i, ProfileBuilder::Launch(k, 5 * kUs));
      Event e = MpiCall(b, "AllReduce", 1 << 20, i, -1);
      e.mutable_coll()->set_lib(LIB_NCCL);
      e.mutable_coll()->set_corr(10 + i);
      b.Host(1, t + 1 * kUs, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& row = (*s)["collectives"]["ops"][0];
  CHECK(row["count"] == 3);
  CHECK(row["device_timed"] == 3);
  CHECK(row["time_source"] == "device");
  CHECK(row["mean_us"] == 400.0);
}

// `n` ncclAllReduce calls of 1 MiB, one every 1000 us from 1000 us, each with the launch of its
// kernel (correlation 10 + i) just before it on thread 1.
void WriteNcclAllReduces(ProfileBuilder* b, uint64_t n) {
  const uint32_t k = b->Str("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t t = (1000 + 1000 * i) * kUs;
    b->Host(1, t, 10 + i, ProfileBuilder::Launch(k, 5 * kUs));
    Event e = MpiCall(*b, "AllReduce", 1 << 20, i, -1);
    e.mutable_coll()->set_lib(LIB_NCCL);
    e.mutable_coll()->set_corr(10 + i);
    b->Host(1, t + 1 * kUs, 0, e);
  }
}

// Three AllReduce calls enqueued, the third hung (its communicator aborted): no kernel ever ran
// for it. With CUPTI timing it is untimed (no time, no arrival), not a call as long as its
// enqueue; the two that ran keep their kernels' time.
TEST_CASE("collectives: an NCCL call whose kernel never ran is untimed") {
  const std::string dir = TmpDir("coll_hung");
  for (int r = 0; r < 2; ++r) {
    ProfileBuilder b(dir + "/rank" + std::to_string(r) + ".pb");
    b.WriteHeader(r, 2, "h", GPU_TIMING_CUPTI);
    WriteTwoRankComm(&b, r, LIB_NCCL, "nccl-clique");
    WriteNcclAllReduces(&b, 3);
    b.Flush();
    // Rank 1 reaches the two kernels that ran 100 us later.
    for (uint64_t i = 0; i < 2; ++i) {
      b.Device(0, (1010 + 1000 * i + 100 * r) * kUs, 10 + i, Kernel((400 - 100 * r) * kUs));
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& row = (*s)["collectives"]["ops"][0];
  INFO(row.dump());
  CHECK(row["count"] == 6);
  CHECK(row["device_timed"] == 4);
  CHECK(row["untimed"] == 2);
  CHECK(row["time_ms"] == 1.4);    // the kernels: 2 x 400 + 2 x 300 us
  CHECK(row["mean_us"] == 350.0);  // over the 4 timed calls
  // Two calls matched (the hung one has no arrival): rank 0 waited 100 us in each.
  const Json& st = (*s)["collectives"]["stragglers"];
  INFO(st.dump());
  CHECK(st["calls_matched"] == 2);
  CHECK(st["wait_ms_by_rank"]["0"] == 0.2);
  CHECK(st["straggler"] == 1);
}

// A rank killed (MPI_Abort, SIGTERM) before CUPTI delivered any device record: its file has
// NCCL calls under CUPTI timing and no kernel. They are untimed, not timed by their enqueue.
TEST_CASE("collectives: NCCL calls of a file with no device record at all are untimed") {
  const std::string dir = TmpDir("coll_nodev");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    WriteNcclAllReduces(&b, 3);
    b.Close(false);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& row = (*s)["collectives"]["ops"][0];
  INFO(row.dump());
  CHECK(row["count"] == 3);
  CHECK(row["untimed"] == 3);
  CHECK(row["time_ms"] == 0.0);
}

// A grouped ncclSend + ncclRecv (sendrecv_perf's exchange) share one 1000 us kernel: each row's
// time is its half (the totals count the kernel once), but each transfer ran the whole kernel,
// so its mean and bandwidth use 1000 us, as nccl-tests reports them.
TEST_CASE("collectives: grouped sends and receives get their kernel's whole time for bandwidth") {
  const std::string dir = TmpDir("group_p2p");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h", GPU_TIMING_CUPTI);
    WriteTwoRankComm(&b, 0, LIB_NCCL, "nccl-clique");
    for (const char* op : {"Send", "Recv"}) {
      Event e = MpiCall(b, op, 1 << 20, 0, 1);
      e.mutable_coll()->set_lib(LIB_NCCL);
      e.mutable_coll()->set_group(1);
      e.mutable_coll()->set_corr(40);
      b.Host(1, 100 * kUs, 0, e);
    }
    b.Flush();
    b.Device(0, 200 * kUs, 40, Kernel(1000 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  REQUIRE((*s)["collectives"]["ops"].size() == 2);
  for (const Json& row : (*s)["collectives"]["ops"]) {
    INFO(row["op"]);
    CHECK(row["count"] == 1);
    CHECK(row["device_timed"] == 1);
    CHECK(row["time_ms"] == 0.5);
    CHECK(row["mean_us"] == 1000.0);
    CHECK(row["algbw_gbps"].get<double>() == Approx((1 << 20) / 1e6));
    CHECK(row["busbw_gbps"].get<double>() == Approx((1 << 20) / 1e6));
  }
}

// Two threads serve concurrently, each marking its own run and steps (NVTX), interleaved in
// time: thread 1's run A (warm-up) holds 4 steps, thread 2's run B, starting 3 ms later, holds
// its own 4; each step launches one kernel. Every step belongs to its own thread's run, so the
// totals exclude exactly A's 4 steps, and its GPU busy time is its own kernel's. Before, a step went to the last run started before it on
// any thread: A 2 steps, B 6, and 6 steps counted.
TEST_CASE("runs and steps of concurrent threads: each step in its own thread's run") {
  const std::string dir = TmpDir("thread_runs");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t run_a = b.Str("run label=A warmup=1"), run_b = b.Str("run label=B");
    const uint32_t step = b.Str("step tokens=100"), k = b.Str("decode_kernel");
    uint64_t corr = 0;
    for (uint32_t thread = 1; thread <= 2; ++thread) {
      const uint64_t t0 = (thread == 1 ? 1000 : 4000) * kUs;
      b.Host(thread, t0, 0, ProfileBuilder::Nvtx(thread == 1 ? run_a : run_b, 9000 * kUs, 0));
      for (uint64_t i = 0; i < 4; ++i) {
        const uint64_t st = t0 + 100 * kUs + i * 2000 * kUs;
        b.Host(thread, st, 0, ProfileBuilder::Nvtx(step, 1500 * kUs, 1));
        // Late in the step: after the other thread's step that started meanwhile.
        b.Host(thread, st + 1200 * kUs, ++corr, ProfileBuilder::Launch(k, 5 * kUs));
      }
    }
    b.Flush();
    for (uint64_t c = 1; c <= corr; ++c) {
      const uint64_t thread_t0 = (c <= 4 ? 1000 : 4000) * kUs;
      b.Device(0, thread_t0 + 1310 * kUs + ((c - 1) % 4) * 2000 * kUs, c, Kernel(100 * kUs));
    }
    b.Close(true);
  }
  Json s = ReportInPlace(dir);
  CHECK(s["stats"]["steps"] == 4);
  CHECK(s["stats"]["tokens"] == 400);
  REQUIRE(s["runs"].size() == 2);
  for (const Json& r : s["runs"]) CHECK(r["stats"]["steps"] == 4);
  // A step's GPU busy time is its own thread's kernel (100 us), not also the other thread's
  // that ran in its window (thread 1's steps 2 and 3 hold thread 2's kernels 0 and 1).
  CHECK(s["stats"]["gpu_busy_ms_per_step"] == 0.1);
  for (const Json& r : s["runs"]) CHECK(r["stats"]["gpu_busy_ms_per_step"] == 0.1);
  // ops.csv: each kernel in its own thread's step (0-3 thread 1, 4-7 thread 2; steps are
  // numbered in start order across threads).
  std::string csv = ReadAll(dir + "/ops.csv");
  std::vector<std::string> rows = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  REQUIRE(rows.size() == 9);
  std::multiset<std::string> steps;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(rows[i], ',');
    REQUIRE(f.size() >= 15);
    steps.insert(f[14]);
  }
  CHECK(steps == std::multiset<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
}

// TensorRT-LLM's executor pattern: a scheduler thread opens each step (a start/end range) one
// step ahead, the executor thread ends it and marks the runs. A step opened before the
// executor's run began, or while its previous run was still open, belongs to the run it ends in
// (before: step 0 fell in no run and counted as measured, step 2 in the warm-up run).
TEST_CASE("a step opened ahead of its run by another thread belongs to the run it ends in") {
  const std::string dir = TmpDir("ahead_runs");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t warm = b.Str("run label=warm warmup=1"), serve = b.Str("run label=serve");
    const uint32_t small = b.Str("step tokens=1"), big = b.Str("step tokens=256");
    b.Host(2, 100 * kUs, 0, ProfileBuilder::Nvtx(warm, 200 * kUs, 0));   // 100-300
    b.Host(2, 310 * kUs, 0, ProfileBuilder::Nvtx(serve, 690 * kUs, 0));  // 310-1000
    auto step = [&](uint32_t name, uint64_t start, uint64_t end) {
      Event e = ProfileBuilder::StartEndRange(name, (end - start) * kUs);
      b.Host(2, start * kUs, 0, e);  // recorded on the ending (executor) thread
    };
    step(small, 50, 150);   // opened before any run: warm
    step(small, 200, 280);  // warm
    step(big, 250, 400);    // opened during warm, ends in serve: serve
    step(small, 400, 500);  // serve
    b.Close(true);
  }
  Json s = ReportInPlace(dir);
  REQUIRE(s["runs"].size() == 2);
  CHECK(s["runs"][0]["stats"]["steps"] == 2);
  CHECK(s["runs"][0]["stats"]["tokens"] == 2);
  CHECK(s["runs"][1]["stats"]["steps"] == 2);
  CHECK(s["runs"][1]["stats"]["tokens"] == 257);
  CHECK(s["stats"]["steps"] == 2);  // the warm-up run's steps excluded
  CHECK(s["stats"]["tokens"] == 257);
}

// Three runs, the last one wholly outside the schedule's active steps (no step recorded): it is
// listed under runs, but runs_aggregate averages the two with steps (4 steps each, not 2.67),
// counts the empty one apart and says so.
TEST_CASE("runs_aggregate leaves out runs without a recorded step") {
  const std::string dir = TmpDir("empty_run");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=10"), k = b.Str("decode_kernel");
    uint64_t corr = 0;
    for (uint64_t run = 0; run < 3; ++run) {
      const uint64_t t0 = (1000 + run * 10000) * kUs;
      b.Host(1, t0, 0, ProfileBuilder::Nvtx(b.Str("run label=r" + std::to_string(run)),
                                            9000 * kUs, 0));
      if (run == 2) continue;
      for (uint64_t i = 0; i < 4; ++i) {
        const uint64_t st = t0 + 100 * kUs + i * 2000 * kUs;
        b.Host(1, st, 0, ProfileBuilder::Nvtx(step, (1000 + run * 500) * kUs, 1));
        b.Host(1, st + 10 * kUs, ++corr, ProfileBuilder::Launch(k, 5 * kUs));
      }
    }
    b.Flush();
    for (uint64_t c = 1; c <= corr; ++c) {
      const uint64_t run = (c - 1) / 4, i = (c - 1) % 4;
      b.Device(0, (1000 + run * 10000 + 100 + i * 2000 + 20) * kUs, c, Kernel(100 * kUs));
    }
    b.Close(true);
  }
  Json s = ReportInPlace(dir);
  REQUIRE(s["runs"].size() == 3);
  CHECK(s["runs"][2]["stats"]["steps"] == 0);
  const Json& agg = s["runs_aggregate"];
  CHECK(agg["runs"] == 2);
  CHECK(agg["runs_without_steps"] == 1);
  CHECK(agg["metrics"]["steps"]["mean"] == 4.0);
  CHECK(agg["metrics"]["steps"]["std"] == 0.0);
  CHECK(agg["metrics"]["tokens"]["mean"] == 40.0);
  CHECK(agg["metrics"]["step_latency_ms.mean"]["mean"] == 1.25);
  CHECK(HasWarning(s, "no recorded step"));
}

// Speculative decoding: a draft step [100, 300) us nested in its verify step [0, 1000). The
// draft's kernel (launched at 150) is the draft step's; the target's kernel (launched at 400,
// after the draft ended) is the verify step's, not in no step. The steps cover 1 ms of wall
// time, not 1.2: total_time_ms and tokens/s count the nested time once.
TEST_CASE("nested steps: an op after the inner step ends belongs to the enclosing step") {
  const std::string dir = TmpDir("nested_steps");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("step phase=decode tokens=4"), 1000 * kUs, 0));
    b.Host(1, 100 * kUs, 0,
           ProfileBuilder::Nvtx(b.Str("step phase=draft tokens=0"), 200 * kUs, 1));
    b.Host(1, 150 * kUs, 1, ProfileBuilder::Launch(b.Str("vllm::rms_norm_kernel"), 5 * kUs));
    b.Host(1, 400 * kUs, 2, ProfileBuilder::Launch(b.Str("vllm::act_and_mul_kernel"), 5 * kUs));
    b.Flush();
    b.Device(0, 160 * kUs, 1, Kernel(50 * kUs));
    b.Device(0, 410 * kUs, 2, Kernel(100 * kUs));
    b.Close(true);
  }
  Json s = ReportInPlace(dir);
  CHECK(s["stats"]["steps"] == 2);
  CHECK(s["stats"]["tokens"] == 4);
  CHECK(s["stats"]["total_time_ms"] == 1.0);
  CHECK(s["stats"]["tokens_per_s"] == 4000.0);
  CHECK(s["buckets_model_avg_ms"]["norm"]["ms"] == 0.025);    // 50 us over 2 steps
  CHECK(s["buckets_model_avg_ms"]["mlp.act"]["ms"] == 0.05);  // 100 us over 2 steps
  std::vector<std::string> steps;
  for (const auto& f : OpsRows(dir)) steps.push_back(f[14]);
  CHECK(steps == std::vector<std::string>{"1", "0"});  // steps by start: verify 0, draft 1
}

// Async scheduling (vLLM v1), one thread: step 1's range [0, 100) us ends before its kernel
// starts (150); step 2 opens at 200. The kernel starts in no step window: it is step 1's (its
// launcher's), not lost from the buckets.
TEST_CASE("async scheduling: an op that starts between steps belongs to its launching step") {
  const std::string dir = TmpDir("async_steps");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=1");
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(step, 100 * kUs, 0));
    b.Host(1, 50 * kUs, 1, ProfileBuilder::Launch(b.Str("vllm::act_and_mul_kernel"), 5 * kUs));
    b.Host(1, 200 * kUs, 0, ProfileBuilder::Nvtx(step, 100 * kUs, 0));
    b.Flush();
    b.Device(0, 150 * kUs, 1, Kernel(30 * kUs));
    b.Close(true);
  }
  for (bool csv : {false, true}) {  // with and without ops.csv (launch steps kept for it)
    INFO("ops.csv " << csv);
    Json s;
    if (csv) {
      s = ReportInPlace(dir);
    } else {
      auto r = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
      REQUIRE(r.ok());
      s = *r;
    }
    CHECK(s["stats"]["steps"] == 2);
    CHECK(s["buckets_model_avg_ms"]["mlp.act"]["ms"] == 0.015);  // 30 us over 2 steps
  }
}

// Async scheduling across threads: the scheduler opens step i+1 (start/end ranges, ended by
// the executor) while the executor still works on step i. Work launched in the overlap is the
// older step's, the one still open (the newest step used to win, leaving step i's tail in i+1).
TEST_CASE("async scheduling: in overlapping steps, work belongs to the oldest open step") {
  const std::string dir = TmpDir("overlap_steps");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=1");
    for (uint64_t i = 0; i < 3; ++i) {  // [0, 100), [70, 200), [170, 300)
      Event e = ProfileBuilder::StartEndRange(step, (i == 0 ? 100 : 130) * kUs);
      b.Host(2, (i == 0 ? 0 : 100 * i - 30) * kUs, 0, e);
    }
    const uint64_t launches[] = {10, 80, 110, 180, 210};  // 80 and 180: in an overlap
    uint64_t corr = 0;
    for (uint64_t at : launches) {
      ++corr;
      b.Host(2, at * kUs, corr, ProfileBuilder::Launch(b.Str("k" + std::to_string(corr)), 2 * kUs));
    }
    b.Flush();
    for (uint64_t c = 1; c <= corr; ++c)
      b.Device(0, (launches[c - 1] + 5) * kUs, c, Kernel(10 * kUs));
    b.Close(true);
  }
  ReportInPlace(dir);
  std::vector<std::string> steps;
  for (const auto& f : OpsRows(dir)) steps.push_back(f[2] + ":" + f[14]);
  CHECK(steps == std::vector<std::string>{"k1:0", "k2:0", "k3:1", "k4:1", "k5:2"});
}

// Two threads serving concurrently, each 2 steps of 0.99 ms with 10 tokens, over the same 2 ms:
// 40 tokens in 2 ms of wall time is 20000 tokens/s (the sum of step times, 3.96 ms, would
// halve it). Per-step latency is unchanged.
TEST_CASE("concurrent steps: tokens/s over the wall time the steps cover") {
  const std::string dir = TmpDir("concurrent_tps");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=10");
    for (uint32_t thread = 1; thread <= 2; ++thread) {
      for (uint64_t i = 0; i < 2; ++i) {
        b.Host(thread, (i * 1000 + thread * 10) * kUs, 0, ProfileBuilder::Nvtx(step, 990 * kUs, 0));
      }
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 4);
  CHECK((*s)["stats"]["tokens"] == 40);
  CHECK((*s)["stats"]["step_latency_ms"]["mean"] == 0.99);
  CHECK((*s)["stats"]["total_time_ms"] == 2.0);  // [10, 2010) us
  CHECK((*s)["stats"]["tokens_per_s"] == 20000.0);
}

// NVTX start/end ranges need not nest: step 1 [0, 1000) us and step 2 [900, 2000) overlap, and
// "work" [1200, 1800) opens after step 1 ended. A kernel launched at 1300 is in step 2's work:
// path step/work (before, the ended step 1 stayed under step 2: step/step/work).
TEST_CASE("ops.csv NVTX path: overlapping start/end ranges, an ended one is not a parent") {
  const std::string dir = TmpDir("overlap");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=1"), work = b.Str("work"), k = b.Str("k");
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(step, 1000 * kUs, 0));
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(k, 5 * kUs));
    b.Host(1, 900 * kUs, 0, ProfileBuilder::Nvtx(step, 1100 * kUs, 0));
    b.Host(1, 1200 * kUs, 0, ProfileBuilder::Nvtx(work, 600 * kUs, 0));
    b.Host(1, 1300 * kUs, 2, ProfileBuilder::Launch(k, 5 * kUs));
    b.Flush();
    b.Device(0, 150 * kUs, 1, Kernel(10 * kUs));
    b.Device(0, 1350 * kUs, 2, Kernel(10 * kUs));
    b.Close(true);
  }
  ReportInPlace(dir);
  std::vector<std::string> paths;
  for (const auto& f : OpsRows(dir)) paths.push_back(f[15]);
  CHECK(paths == std::vector<std::string>{"step", "step/work"});
}

// A request range and a qkv_proj range started by the launching thread (1) and ended by a host
// callback thread (2), where the agent records them (Event.start_thread = 1): they enclose
// thread 1's kernels, in nvtx_path and in the model buckets. Thread 2's own launch is outside.
// ops.csv is in execution order: device records written out of order (under CUDA events the
// first step's ops came last once: the poller's ring and a synchronizing thread's are drained
// in turn) come out by device start, numbered in that order; one 4 s late (beyond the 250 ms
// reorder window) stays where it came.
TEST_CASE("ops.csv rows are in execution order, whatever order the records came in") {
  const std::string dir = TmpDir("ops_order");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t k = b.Str("k");
    for (uint32_t i = 1; i <= 4; ++i) {
      b.Host(1, (100 * i) * kUs, i, ProfileBuilder::Launch(k, 5 * kUs));
    }
    b.Host(1, 280 * kUs, 5, ProfileBuilder::Launch(k, 5 * kUs));
    b.Host(1, 4000000 * kUs, 6, ProfileBuilder::Launch(k, 5 * kUs));
    b.Flush();
    b.Device(0, 350 * kUs, 3, Kernel(10 * kUs));
    b.Device(0, 450 * kUs, 4, Kernel(10 * kUs));
    b.Flush();
    b.Device(0, 150 * kUs, 1, Kernel(10 * kUs));  // written after later ones: reordered
    b.Device(0, 250 * kUs, 2, Kernel(10 * kUs));
    b.Flush();
    b.Device(0, 4000050 * kUs, 6, Kernel(10 * kUs));
    b.Flush();
    b.Device(0, 300 * kUs, 5, Kernel(10 * kUs));  // 4 s behind the latest start seen: kept
    b.Close(true);
  }
  ReportInPlace(dir);
  std::vector<std::string> rows;
  for (const auto& f : OpsRows(dir)) rows.push_back(f[1] + "@" + f[10]);  // index@start_ns
  CHECK(rows == std::vector<std::string>{"0@50000", "1@150000", "2@250000", "3@350000", "4@200000",
                                         "5@3999950000"});
}

TEST_CASE("ops.csv NVTX path: a start/end range ended on another thread is its starter's") {
  const std::string dir = TmpDir("cross_thread_range");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    const uint32_t req = b.Str("request id=1"), qkv = b.Str("qkv_proj"), k = b.Str("k");
    auto ended_by_callback = [&](uint32_t name, uint64_t start, uint64_t dur) {
      Event e = ProfileBuilder::StartEndRange(name, dur * kUs);
      e.set_start_thread(1);
      b.Host(2, start * kUs, 0, e);
    };
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(k, 5 * kUs));
    b.Host(1, 200 * kUs, 2, ProfileBuilder::Launch(k, 5 * kUs));
    b.Host(2, 300 * kUs, 3, ProfileBuilder::Launch(k, 5 * kUs));
    ended_by_callback(qkv, 150, 500);
    ended_by_callback(req, 50, 900);
    b.Flush();
    b.Device(0, 150 * kUs, 1, Kernel(10 * kUs));
    b.Device(0, 250 * kUs, 2, Kernel(10 * kUs));
    b.Device(0, 350 * kUs, 3, Kernel(10 * kUs));
    b.Close(true);
  }
  ReportInPlace(dir);
  std::vector<std::string> paths, buckets;
  for (const auto& f : OpsRows(dir)) {
    paths.push_back(f[15]);
    buckets.push_back(f[3]);
  }
  CHECK(paths == std::vector<std::string>{"request id=1", "request id=1/qkv_proj", ""});
  CHECK(buckets[1] == "attn.qkv_proj");
}

// Under CUDA-event timing the agent times an NCCL call's kernel itself (an agent correlation id,
// no launch event): the call stands for the launch in ops.csv. An ungrouped call gives launch
// time, API duration and launch-to-start; a grouped one (its kernel launched by ncclGroupEnd)
// only its step and NVTX path. Either order of host and device records in the file.
TEST_CASE("ops.csv: an NCCL kernel timed with CUDA events is joined to its call") {
  const std::string dir = TmpDir("nccl_events_join");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h", GPU_TIMING_EVENTS);
    WriteTwoRankComm(&b, 0, LIB_NCCL, "nccl-clique");
    const uint32_t step = b.Str("step tokens=1"), ar = b.Str("ncclAllReduce"),
                   sr = b.Str("ncclSendRecv");
    const uint64_t c1 = kAgentCorrBase + 1, c2 = kAgentCorrBase + 2;
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(step, 5000 * kUs, 0));
    b.Device(0, 2100 * kUs, c2, Kernel(50 * kUs));  // the group's kernel, before its calls
    b.Flush();
    Event e = Coll(b, 5 * kUs, 1, 0);
    e.mutable_coll()->set_corr(c1);
    b.Host(1, 1000 * kUs, 0, e);
    for (uint64_t i = 0; i < 2; ++i) {
      Event m = MpiCall(b, i == 0 ? "Send" : "Recv", 4096, 0, 1);
      m.mutable_coll()->set_lib(LIB_NCCL);
      m.mutable_coll()->set_group(1);
      m.mutable_coll()->set_corr(c2);
      b.Host(1, (2000 + i) * kUs, 0, m);
    }
    b.Flush();
    b.Device(0, 1010 * kUs, c1, Kernel(100 * kUs));  // after its call
    b.Close(true);
    (void)ar;
    (void)sr;
  }
  ReportInPlace(dir);
  std::vector<std::string> got;
  for (const auto& f : OpsRows(dir)) {
    // launch_ns, api_dur_ns, start_ns, launch_to_start_ns, step, nvtx_path
    got.push_back(absl::StrJoin({f[8], f[9], f[10], f[13], f[14], f[15]}, ","));
  }
  // (In execution order: the ungrouped call's kernel ran first, though written last.)
  CHECK(got == std::vector<std::string>{"1000000,5000,1010000,5000,0,step", ",,2100000,,0,step"});
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["host"]["launch_to_start_us"]["count"] == 1);
  for (const auto& w : (*s)["meta"]["warnings"]) {
    CHECK(w.get<std::string>().find("without") == std::string::npos);  // nothing unmatched
  }
}

// A graph launch's nodes share its correlation id. Their records may reach the file before the
// launch (every one must still count, not the last alone), and the launch's latency is one
// sample, from its earliest node: later nodes wait for the graph's own work.
// Two calls, returning at 105 and 305 us, whose device ops all joined them (no "without" warning):
// one launch-to-start latency each, 5 and 15 us to their first op.
void CheckTwoCallsJoined(const Json& s) {
  const Json& l2s = s["host"]["launch_to_start_us"];
  CHECK(l2s["count"] == 2);
  CHECK(l2s["min"] == 5.0);
  CHECK(l2s["max"] == 15.0);
  CHECK(!HasWarning(s, "without"));
}

TEST_CASE("graph launches: every node counted in either record order; one latency per launch") {
  const std::string dir = TmpDir("graph_nodes");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    const uint32_t g = b.Str("cudaGraphLaunch"), k = b.Str("node_kernel");
    // Launch 1: its three nodes first in the file, out of start order.
    for (uint64_t start : {130, 110, 150}) {
      DeviceOp op = Kernel(10 * kUs);
      op.set_name(k);
      op.set_graph(0xabc);
      b.Device(0, start * kUs, 1, op);
    }
    b.Flush();
    const Event gl = ProfileBuilder::GraphLaunch(g, 5 * kUs, 0xabc);
    b.Host(1, 100 * kUs, 1, gl);  // returns at 105: 5 us to the first node
    b.Host(1, 300 * kUs, 2, gl);  // launch 2, host first: returns at 305
    b.Flush();
    for (uint64_t start : {320, 340, 360}) {
      DeviceOp op = Kernel(10 * kUs);
      op.set_name(k);
      op.set_graph(0xabc);
      b.Device(0, start * kUs, 2, op);
    }
    b.Close(true);
  }
  const Json summary = ReportInPlace(dir);
  const Json* s = &summary;
  REQUIRE((*s)["kernels"].size() == 1);
  CHECK((*s)["kernels"][0]["count"] == 6);
  CheckTwoCallsJoined(*s);
  CHECK(OpsRows(dir).size() == 6);
}

// A batch copy (cudaMemcpyBatchAsync) is one call whose copies CUPTI reports as a device op
// each, all with the call's correlation id: every op joins the call, whether the ops or the call
// come first in the file, and the call's launch-to-start latency counts once, to its first copy
// (before, only one op joined the call and the others were "device ops without a launch").
TEST_CASE("batch copies: every copy joins its call in either record order; one latency per call") {
  const std::string dir = TmpDir("batch_copies");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    const uint32_t batch = b.Str("cudaMemcpyBatchAsync");
    auto copy = [](uint32_t kind) {
      DeviceOp op;
      op.set_kind(DOP_MEMCPY);
      op.set_dur(10 * kUs);
      op.set_copy_kind(kind);
      op.set_bytes(4096);
      return op;
    };
    // Batch 1: its copies first in the file, out of start order.
    for (uint64_t start : {130, 110, 150}) b.Device(0, start * kUs, 1, copy(1));
    b.Flush();
    Event call;
    call.set_kind(EV_MEMCPY);
    call.set_name(batch);
    call.set_dur(5 * kUs);
    call.set_bytes(3 * 4096);
    call.set_copy_kind(4);          // cudaMemcpyDefault
    b.Host(1, 100 * kUs, 1, call);  // returns at 105: 5 us to the first copy
    b.Host(1, 300 * kUs, 2, call);  // batch 2, the call first: returns at 305
    b.Flush();
    for (uint64_t start : {320, 340}) b.Device(0, start * kUs, 2, copy(2));
    b.Close(true);
  }
  const Json summary = ReportInPlace(dir);
  const Json* s = &summary;
  CheckTwoCallsJoined(*s);
  std::map<std::string, int> buckets;
  for (const auto& cols : OpsRows(dir)) {
    CHECK(!cols[8].empty());  // launch_ns: joined to its call
    buckets[cols[3]]++;
  }
  CHECK(buckets == std::map<std::string, int>{{"memcpy.h2d", 3}, {"memcpy.d2h", 2}});
}

// A kernel a graph launch runs was launched, in the code, where its node was captured: the node
// (EV_GRAPH_NODE, DeviceOp.graph_node) carries the NVTX context it was made in (recorded whether
// or not those ranges were), and the copies instantiation made lead to it, even when the
// instantiating thread's records come first in the file. A node made outside any model range,
// a copy of a node the file does not have, and an op without a node keep the launch's context.
TEST_CASE("graph nodes: a replayed kernel takes the NVTX range its node was captured in") {
  const std::string dir = TmpDir("graph_node_context");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    const uint32_t step = b.Str("step tokens=4"), decode = b.Str("decode");
    const uint32_t gemm = b.Str("sm90_xmma_gemm_f16f16"), g = b.Str("cudaGraphLaunch");
    auto node = [](uint64_t id, uint64_t source, uint32_t context) {
      Event e;
      e.set_kind(EV_GRAPH_NODE);
      e.set_graph_node(id);
      e.set_source_graph_node(source);
      e.set_name(context);
      return e;
    };
    // Instantiation on thread 2 copies the nodes; its batch is in the file first.
    b.Host(2, 200 * kUs, 0, node(11, 1, 0));
    b.Host(2, 201 * kUs, 0, node(12, 2, 0));
    b.Host(2, 202 * kUs, 0, node(13, 3, 0));
    b.Host(2, 203 * kUs, 0, node(14, 99, 0));  // a copy of a node not in the file
    b.Flush();
    // The capture on thread 1, inside ranges that were not recorded (a paused schedule).
    Event captured = ProfileBuilder::Launch(gemm, 2 * kUs);
    captured.set_captured(true);
    b.Host(1, 11 * kUs, 1, captured);
    b.Host(1, 12 * kUs, 0,
           node(1, 0,
                b.Str("run warmup=1\x1f"
                      "capture\x1fqkv_proj")));
    b.Host(1, 31 * kUs, 2, captured);
    b.Host(1, 32 * kUs, 0, node(2, 0, b.Str("capture\x1fo_proj")));
    b.Host(1, 50 * kUs, 0, node(3, 0, b.Str("capture")));  // no model range
    b.Host(1, 300 * kUs, 0, ProfileBuilder::Nvtx(step, 300 * kUs, 0));
    b.Host(1, 300 * kUs, 0, ProfileBuilder::Nvtx(decode, 290 * kUs, 1));
    const Event gl = ProfileBuilder::GraphLaunch(g, 5 * kUs, 0xabc);
    b.Host(1, 310 * kUs, 3, gl);
    b.Flush();
    const uint64_t nodes[] = {11, 12, 13, 14, 0};
    for (int i = 0; i < 5; ++i) {
      DeviceOp op = Kernel(10 * kUs);
      op.set_name(gemm);
      op.set_graph(7);
      op.set_graph_node(nodes[i]);
      b.Device(0, (320 + 20 * i) * kUs, 3, op);
    }
    b.Close(true);
  }
  const Json summary = ReportInPlace(dir);
  const Json* s = &summary;
  std::map<std::string, int64_t> count_by_bucket;
  for (const auto& k : (*s)["kernels"]) {
    count_by_bucket[k["bucket"].get<std::string>()] += k["count"].get<int64_t>();
  }
  CHECK(count_by_bucket ==
        std::map<std::string, int64_t>{{"attn.qkv_proj", 1}, {"attn.o_proj", 1}, {"others", 3}});
  const Json& model = (*s)["buckets_model_avg_ms"];
  CHECK(model["attn.qkv_proj"]["ms"].get<double>() == Approx(0.010));
  CHECK(model["attn.o_proj"]["ms"].get<double>() == Approx(0.010));
  CHECK(model["others"]["ms"].get<double>() == Approx(0.030));
  // The metadata is no host call and does not stretch the profile's span.
  for (const auto& a : (*s)["host"]["api"]) {
    CHECK(a["name"].get<std::string>().find("GRAPH_NODE") == std::string::npos);
  }
  std::vector<std::string> paths;
  for (const auto& f : OpsRows(dir)) paths.push_back(f[15]);
  CHECK(paths == std::vector<std::string>{
                     "step/decode/(graph)/capture/qkv_proj", "step/decode/(graph)/capture/o_proj",
                     "step/decode/(graph)/capture", "step/decode/(graph)", "step/decode/(graph)"});
}

// CUDA-event timing: a graph launch is one op, named by its call, its ops.csv path marked
// "(graph)"; report.md says so.
TEST_CASE("events timing: a graph launch is one kernel row, and report.md says why") {
  const std::string dir = TmpDir("graph_events");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_EVENTS);
    const Event gl = ProfileBuilder::GraphLaunch(b.Str("cudaGraphLaunch"), 5 * kUs, 0xabc);
    b.Host(1, 100 * kUs, 1, gl);
    b.Flush();
    DeviceOp op;
    op.set_kind(DOP_OTHER);
    op.set_dur(50 * kUs);
    op.set_graph(0xabc);
    b.Device(0, 110 * kUs, 1, op);
    b.Close(true);
  }
  const Json summary = ReportInPlace(dir);
  const Json* s = &summary;
  REQUIRE((*s)["kernels"].size() == 1);
  CHECK((*s)["kernels"][0]["name"] == "cudaGraphLaunch");
  const auto rows = OpsRows(dir);  // launched in no NVTX range: still marked a graph's
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][15] == "(graph)");
  CHECK(ReadAll(dir + "/report.md").find("`cudaGraphLaunch` rows are whole graph launches") !=
        std::string::npos);
}

// Host timing: a graph launch is one op (its launch call's time), as under CUDA events, in
// its step's GPU time and buckets (before, host timing left graph launches out: steps made of
// graph launches had no GPU time at all).
TEST_CASE("host timing: a graph launch is one op, in its step") {
  const std::string dir = TmpDir("graph_host");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_HOST);
    b.Host(1, 100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("step tokens=1"), 100 * kUs, 0));
    const Event gl = ProfileBuilder::GraphLaunch(b.Str("cudaGraphLaunch"), 20 * kUs, 0xabc);
    b.Host(1, 120 * kUs, 1, gl);
    b.Close(true);
  }
  const Json s = ReportInPlace(dir);
  REQUIRE(s["kernels"].size() == 1);
  CHECK(s["kernels"][0]["name"] == "cudaGraphLaunch");
  CHECK(s["kernels"][0]["total_ms"] == 0.02);
  CHECK(s["host"]["per_step"]["gpu_busy_ms"]["mean"] == 0.02);
  const auto rows = OpsRows(dir);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][15] == "step/(graph)");
  CHECK(ReadAll(dir + "/report.md").find("host timing by its launch call") != std::string::npos);
}

// A sort is the sampler's unless an NVTX range says whose: the same CUB radix sort launched
// inside an `expert_sort` range (MoE routing) is moe.experts, outside any range sampler.
TEST_CASE("a radix sort inside a mapped NVTX range takes the range's bucket, else sampler") {
  const std::string dir = TmpDir("sort_bucket");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h", GPU_TIMING_CUPTI);
    const uint32_t sort = b.Str("void cub::DeviceRadixSortOnesweepKernel<int>(int*)");
    b.Host(1, 100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("expert_sort"), 50 * kUs, 0));
    b.Host(1, 110 * kUs, 1, ProfileBuilder::Launch(sort, 5 * kUs));
    b.Host(1, 300 * kUs, 2, ProfileBuilder::Launch(sort, 5 * kUs));
    b.Flush();
    b.Device(0, 120 * kUs, 1, Kernel(10 * kUs));
    b.Device(0, 310 * kUs, 2, Kernel(30 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::map<std::string, double> ms;
  for (const auto& k : (*s)["kernels"]) ms[k["bucket"]] += k["total_ms"].get<double>();
  CHECK(ms == std::map<std::string, double>{{"moe.experts", 0.01}, {"sampler", 0.03}});
}

// A launch whose call failed ran nothing: a warning of its own, not "without device activity".
// A process that launched nothing (a CPU-only MPI rank) gets no "no device activity" warning,
// and a row of nonblocking calls none of which was seen completing has no mean (null, not 0).
TEST_CASE("failed launches, CPU-only processes and never-completed calls: no false figures") {
  const std::string dir = TmpDir("failed");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 2, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(b.Str("ok_kernel"), 5 * kUs));
    Event bad = ProfileBuilder::Launch(b.Str("too_big_kernel"), 5 * kUs);
    bad.set_ret(9);  // cudaErrorInvalidConfiguration
    b.Host(1, 200 * kUs, 2, bad);
    b.Flush();
    b.Device(0, 110 * kUs, 1, Kernel(50 * kUs));
    b.Close(true);
  }
  {
    ProfileBuilder b(dir + "/rank1.pb");
    b.WriteHeader(1, 2, "h1", GPU_TIMING_HOST);
    Event e = MpiCall(b, "Isend", 64, 0, 0);
    e.mutable_coll()->set_nonblocking(true);  // freed with MPI_Request_free: never completes
    b.Host(1, 100 * kUs, 0, e);
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  std::string warnings;
  for (const auto& w : (*s)["meta"]["warnings"]) warnings += w.get<std::string>() + "\n";
  INFO(warnings);
  CHECK(warnings.find("rank0.pb: 1 launches, copies or sets failed") != std::string::npos);
  CHECK(warnings.find("without device activity") == std::string::npos);
  CHECK(warnings.find("rank1.pb: no device activity records") == std::string::npos);
  REQUIRE((*s)["kernels"].size() == 1);
  CHECK((*s)["kernels"][0]["name"] == "ok_kernel");
  REQUIRE((*s)["collectives"]["ops"].size() == 1);
  CHECK((*s)["collectives"]["ops"][0]["untimed"] == 1);
  CHECK((*s)["collectives"]["ops"][0]["mean_us"].is_null());
  CHECK((*s)["collectives"]["ops"][0]["busbw_gbps"].is_null());
}

TEST_CASE("files without a rank: a lone one is rank 0 quietly, several are numbered with a warning") {
  const std::string dir = TmpDir("norank");
  for (int i = 0; i < 2; ++i) {
    ProfileBuilder b(dir + "/pid" + std::to_string(100 + i) + ".pb");
    b.WriteHeader(-1, 0, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Close(true);
  }
  auto warnings = [](const auto& s) {
    std::string w;
    for (const auto& x : s["meta"]["warnings"]) w += x.template get<std::string>() + "\n";
    return w;
  };
  auto one = BuildSummary({dir + "/pid100.pb"}, ReportOptions(), "");
  REQUIRE(one.ok());
  CHECK(warnings(*one).find("no rank recorded") == std::string::npos);
  CHECK((*one)["meta"]["ranks"].dump() == "[0]");
  auto two = BuildSummary({dir + "/pid100.pb", dir + "/pid101.pb"}, ReportOptions(), "");
  REQUIRE(two.ok());
  CHECK(warnings(*two).find("pid100.pb: no rank recorded; using its position (0)") !=
        std::string::npos);
  CHECK(warnings(*two).find("pid101.pb: no rank recorded; using its position (1)") !=
        std::string::npos);
  // Both recorded steps: the figures are one process's, and the report says whose.
  CHECK(warnings(*two).find("2 processes without a rank recorded steps (pid100.pb, pid101.pb): "
                            "stats, runs, buckets and KV bins are pid100.pb's") !=
        std::string::npos);
  CHECK(warnings(*one).find("processes without a rank recorded steps") == std::string::npos);
}

// `engine api` rules map any recorded call by its API name: copies and launches too (before,
// only generic calls, synchronizations and collectives could match, so RULES.md's own
// `engine api kv.swap ^cudaMemcpyAsync$` did nothing).
TEST_CASE("engine api rules match copies and kernel launches by API name") {
  const std::string dir = TmpDir("engine_api");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    Event cp;
    cp.set_kind(EV_MEMCPY);
    cp.set_name(b.Str("cudaMemcpyAsync"));
    cp.set_dur(100 * kUs);
    b.Host(1, 100 * kUs, 1, cp);
    Event l = ProfileBuilder::Launch(b.Str("some_kernel"), 10 * kUs);
    l.set_api(b.Str("cudaLaunchKernel"));
    b.Host(1, 300 * kUs, 2, l);
    b.Close(true);
  }
  const std::string rules = dir + "/rules.txt";
  std::ofstream(rules) << "engine api kv.swap ^cudaMemcpyAsync$\n"
                       << "engine api kv.load ^cudaLaunchKernel$\n";
  ReportOptions opt;
  opt.rules_file = rules;
  auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  const auto& eng = (*s)["buckets_engine_avg_ms"];
  INFO(eng.dump());
  REQUIRE(eng.contains("kv.swap"));
  REQUIRE(eng.contains("kv.load"));
  CHECK(eng["kv.swap"]["ms"] == 0.1);
  CHECK(eng["kv.load"]["ms"] == 0.01);
}

// The agent's steps carry its own kv reduction (mean); --kv-reduce max re-derives them from the
// NVTX step ranges to reduce the lists with max (before, the option was ignored unless a step
// pattern was given too).
TEST_CASE("--kv-reduce re-reduces the kv lists of agent-recorded steps") {
  const std::string dir = TmpDir("kvreduce");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    Event st = ProfileBuilder::Step(100 * kUs, 4, 400, 0, false);  // kv mean of 100..700
    b.Host(1, 0, 0, st);
    b.Host(1, 0, 0, ProfileBuilder::Nvtx(b.Str("step tokens=4 kv=100,400,700"), 100 * kUs, 0));
    b.Close(true);
  }
  ReportOptions opt;
  opt.kv_edges = {0, 512, 1024};
  auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["meta"]["options"]["step_source"] == "agent");
  CHECK((*s)["meta"]["options"]["kv_reduce"] == "agent");
  CHECK((*s)["decode_length_buckets"][0]["steps"] == 1);  // 400
  opt.kv_reduce = "max";
  opt.kv_reduce_explicit = true;
  s = BuildSummary({dir + "/rank0.pb"}, opt, "");
  REQUIRE(s.ok());
  CHECK((*s)["meta"]["options"]["step_source"] == "nvtx");
  CHECK((*s)["meta"]["options"]["kv_reduce"] == "max");
  CHECK((*s)["stats"]["steps"] == 1);
  CHECK((*s)["decode_length_buckets"][1]["steps"] == 1);  // max = 700
}

// Steps re-derived from NVTX ranges (--kv-reduce, --step-pattern, or a file with no EV_STEP)
// use what the agent was told when the report is not told otherwise: its PROFAGENT_STEP_PATTERN
// (a prefill range the user excluded stays out) and PROFAGENT_KV_REDUCE. Before, the report's
// defaults: --kv-reduce alone brought the prefill step back.
// The header of a one-rank CUPTI job (rank 0, pid 1000, host h0) with the agent `config` given.
Record SingleRankHeader(const std::map<std::string, std::string>& config) {
  Record r;
  Header* h = r.mutable_header();
  h->set_pid(1000);
  h->set_hostname("h0");
  h->set_rank(0);
  h->set_world_size(1);
  h->set_agent_version("test-1.0");
  h->set_gpu_timing(GPU_TIMING_CUPTI);
  for (const auto& kv : config) (*h->mutable_config())[kv.first] = kv.second;
  return r;
}

// No step recorded under a schedule (a run shorter than its wait and warm-up): the warning says
// so, rather than blame the step pattern alone.
TEST_CASE("no steps under PROFAGENT_SCHEDULE: the warning names the schedule") {
  const std::string dir = TmpDir("sched_no_steps");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.Write(SingleRankHeader({{"PROFAGENT_SCHEDULE", "wait=95,warmup=0,active=10,repeat=1"}}));
    b.Host(1, 0, 1, ProfileBuilder::Launch(b.Str("k"), 5 * kUs));
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const std::string w = (*s)["meta"]["warnings"].dump();
  INFO(w);
  CHECK(w.find("no steps found") != std::string::npos);
  CHECK(w.find("PROFAGENT_SCHEDULE wait=95,warmup=0,active=10,repeat=1") != std::string::npos);
  // report.md's summary says the profile is a sample, whether or not it holds steps.
  CHECK(RenderMarkdown(*s).find("- recorded under PROFAGENT_SCHEDULE "
                                "wait=95,warmup=0,active=10,repeat=1: only the steps of its "
                                "active phases") != std::string::npos);
}

TEST_CASE("re-derived steps follow the agent's recorded step pattern and kv reduction") {
  for (bool agent_steps : {true, false}) {
    INFO("agent steps " << agent_steps);
    const std::string dir = TmpDir("recorded_patterns");
    {
      ProfileBuilder b(dir + "/rank0.pb");
      b.Write(SingleRankHeader(
          {{"PROFAGENT_STEP_PATTERN", "^step phase=decode"}, {"PROFAGENT_KV_REDUCE", "max"}}));
      const uint32_t prefill = b.Str("step phase=prefill tokens=100");
      const uint32_t decode = b.Str("step phase=decode tokens=4 kv=100,400,700");
      b.Host(1, 0, 0, ProfileBuilder::Nvtx(prefill, 900 * kUs, 0));
      for (int i = 0; i < 2; ++i) {
        const uint64_t t = (1000 + 200 * uint64_t(i)) * kUs;
        if (agent_steps) b.Host(1, t, 0, ProfileBuilder::Step(100 * kUs, 4, 700, 0, false));
        b.Host(1, t, 0, ProfileBuilder::Nvtx(decode, 100 * kUs, 0));
      }
      b.Close(true);
    }
    ReportOptions opt;
    opt.kv_edges = {0, 512, 1024};
    auto s = BuildSummary({dir + "/rank0.pb"}, opt, "");
    REQUIRE(s.ok());
    CHECK((*s)["stats"]["steps"] == 2);
    CHECK((*s)["meta"]["options"]["step_pattern"] == "^step phase=decode");
    CHECK((*s)["meta"]["options"]["step_source"] == (agent_steps ? "agent" : "nvtx"));
    CHECK((*s)["decode_length_buckets"][1]["steps"] == 2);  // max 700
    // --kv-reduce re-derives: still the two decode steps, reduced with the option's mean.
    opt.kv_reduce = "mean";
    opt.kv_reduce_explicit = true;
    s = BuildSummary({dir + "/rank0.pb"}, opt, "");
    REQUIRE(s.ok());
    CHECK((*s)["stats"]["steps"] == 2);
    CHECK((*s)["stats"]["tokens"] == 8);
    CHECK((*s)["meta"]["options"]["kv_reduce"] == "mean");
    CHECK((*s)["decode_length_buckets"][0]["steps"] == 2);  // mean 400
    // An explicit pattern wins; the kv lists are then reduced as the agent was told (max).
    opt = ReportOptions();
    opt.kv_edges = {0, 512, 1024};
    opt.patterns_explicit = true;
    s = BuildSummary({dir + "/rank0.pb"}, opt, "");
    REQUIRE(s.ok());
    CHECK((*s)["stats"]["steps"] == 3);
    CHECK((*s)["meta"]["options"]["step_pattern"] == "^step\\b");
    CHECK((*s)["meta"]["options"]["kv_reduce"] == "max");
    CHECK((*s)["decode_length_buckets"][1]["steps"] == 2);
  }
}

TEST_CASE("host timing with launches timed 1 in N: untimed kernels count as the timed mean") {
  const std::string dir = TmpDir("sampled_host");
  WriteSampledLaunches(dir + "/rank0.pb", GPU_TIMING_HOST);
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["buckets_model_avg_ms"]["norm"]["ms"] == 0.032);  // 4 x 8 us
  CHECK(HasWarning(*s, "1 of 4 launches timed"));
}

// ----- bad input -----

std::string WriteBytes(const std::string& dir, const std::string& name, const std::string& b) {
  std::string p = dir + "/" + name;
  std::ofstream(p, std::ios::binary) << b;
  return p;
}

std::string ReportError(const std::string& dir, const ReportOptions& opt = ReportOptions()) {
  std::string printed;
  absl::Status s = RunReport(dir, TmpDir("out"), opt, &printed);
  return s.ok() ? std::string() : std::string(s.message());
}

// A profile written as the agent writes one: every range at its end (children before their
// parent, the run after all its steps), launches as they happen, device ops in batches, an
// engine-mapped NCCL call inside each layer, a second thread, and on thread 1 one copy that
// starts before the launch written before it (time going backwards within a thread).
void WriteAgentOrderProfile(const std::string& dir, int steps) {
  ProfileBuilder b(dir + "/rank0.pb", 1, 0, 64);
  b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
  const uint32_t gemm = b.Str("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  const uint32_t flash = b.Str("flash_fwd_splitkv_kernel");
  const uint32_t topk = b.Str("topk_sampling_kernel");
  const uint32_t schedule = b.Str("schedule"), decode = b.Str("decode"),
                 qkv = b.Str("qkv_proj"), attn = b.Str("attention"), o = b.Str("o_proj"),
                 sampler = b.Str("sampler"), helper = b.Str("prefetch");
  uint64_t corr = 0;
  std::vector<std::pair<uint64_t, uint64_t>> dev;  // (start, corr)
  auto launch = [&](uint32_t thread, uint64_t t, uint32_t name) {
    b.Host(thread, t, ++corr, ProfileBuilder::Launch(name, 2 * kUs));
    dev.emplace_back(t + 3 * kUs, corr);
  };
  const uint64_t t0 = 1000 * kUs;
  uint64_t t = t0;
  for (int s = 0; s < steps; ++s) {
    const uint64_t step_start = t;
    dev.clear();
    b.Host(1, t, 0, ProfileBuilder::Nvtx(schedule, 5 * kUs, 1));
    t += 5 * kUs;
    const uint64_t decode_start = t;
    for (int l = 0; l < 3; ++l) {
      const uint64_t layer_start = t;
      launch(1, t + 1 * kUs, gemm);
      b.Host(1, t, 0, ProfileBuilder::Nvtx(qkv, 4 * kUs, 3));
      t += 4 * kUs;
      launch(1, t + 1 * kUs, flash);
      if (s == 7 && l == 1) {  // recorded after the flash launch, started before it
        Event cp;
        cp.set_kind(EV_MEMCPY);
        cp.set_dur(1 * kUs);
        cp.set_bytes(256);
        cp.set_copy_kind(1);
        b.Host(1, t + 500, ++corr, cp);
        dev.emplace_back(t + 3 * kUs + 500, corr);
      }
      b.Host(1, t, 0, ProfileBuilder::Nvtx(attn, 4 * kUs, 3));
      t += 4 * kUs;
      launch(1, t + 1 * kUs, gemm);
      b.Host(1, t, 0, ProfileBuilder::Nvtx(o, 4 * kUs, 3));
      t += 4 * kUs;
      b.Host(1, t, 0, Coll(b, 3 * kUs, 1, uint64_t(s * 3 + l)));
      t += 4 * kUs;
      b.Host(1, layer_start, 0, ProfileBuilder::Nvtx(b.Str("layer " + std::to_string(l)),
                                                     t - layer_start, 2));
    }
    b.Host(1, decode_start, 0, ProfileBuilder::Nvtx(decode, t - decode_start, 1));
    launch(1, t + 1 * kUs, topk);
    b.Host(1, t, 0, ProfileBuilder::Nvtx(sampler, 5 * kUs, 1));
    t += 5 * kUs;
    b.Host(1, step_start, 0,
           ProfileBuilder::Nvtx(b.Str("step tokens=8 kv=" + std::to_string(100 + s)),
                                t - step_start, 0));
    // Thread 2: a helper range with a launch in it.
    launch(2, step_start + 2 * kUs, gemm);
    b.Host(2, step_start + 1 * kUs, 0, ProfileBuilder::Nvtx(helper, 10 * kUs, 0));
    for (auto& d : dev) {
      DeviceOp op;
      op.set_kind(DOP_KERNEL);
      op.set_dur(2 * kUs);
      op.set_stream(7);
      b.Device(0, d.first, d.second, op);
    }
    t += 20 * kUs;
  }
  b.Host(1, t0, 0, ProfileBuilder::Nvtx(b.Str("run label=agent-order"), t - t0, 0));
  b.Close(true);
}

TEST_CASE("NVTX ranges beyond the memory budget: the same report, spilled or not") {
  const std::string dir = TmpDir("agent_order");
  WriteAgentOrderProfile(dir, 400);
  const std::vector<std::string> files = {dir + "/rank0.pb"};
  ReportOptions in_memory;
  auto a = BuildSummary(files, in_memory, dir + "/ops_a.csv");
  REQUIRE(a.ok());
  ReportOptions spilled;
  spilled.range_budget = 64;  // the store's smallest buffer: spills every 64 ranges
  auto b = BuildSummary(files, spilled, dir + "/ops_b.csv");
  REQUIRE(b.ok());
  CHECK(a->dump(1) == b->dump(1));
  const std::string csv = ReadAll(dir + "/ops_a.csv");
  CHECK(csv == ReadAll(dir + "/ops_b.csv"));

  // And the nesting is right: 400 steps (the run is a frame, not a step).
  const Json& j = *a;
  CHECK(j["stats"]["steps"].get<int>() == 400);
  // Engine: schedule 5 us, sampler 5 us, decode 3 x 16 us minus the NCCL calls (3 x 3 us,
  // comm.nccl) = 39 us per step.
  const Json& eng = j["buckets_engine_avg_ms"];
  CHECK(eng["schedule"]["ms"].get<double>() == Approx(0.005));
  CHECK(eng["sampler"]["ms"].get<double>() == Approx(0.005));
  CHECK(eng["decode"]["ms"].get<double>() == Approx(0.039));
  CHECK(eng["comm.nccl"]["ms"].get<double>() == Approx(0.009));
  // Model: the gemm in qkv_proj / o_proj ranges goes to those buckets (2 us each, 3 layers).
  const Json& model = j["buckets_model_avg_ms"];
  CHECK(model["attn.qkv_proj"]["ms"].get<double>() == Approx(0.006));
  CHECK(model["attn.o_proj"]["ms"].get<double>() == Approx(0.006));
  // ops.csv paths: the full chain, the run and the step by their first word (a path names the
  // code, not the step's data), the step in its own column (step 0: kv=100).
  CHECK(csv.find(",0,run/step/decode/layer 0/qkv_proj,0\n") != std::string::npos);
  CHECK(csv.find(",399,run/step/sampler,0\n") != std::string::npos);
  CHECK(csv.find("kv=") == std::string::npos);
  CHECK(csv.find(",prefetch,0\n") != std::string::npos);
}

TEST_CASE("bad inputs give one-line errors naming the file") {
  std::string good = ReadAll([] {
    const std::string d = TmpDir("good");
    ProfileBuilder b(d + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Close(true);
    return d + "/rank0.pb";
  }());
  REQUIRE(good.size() > 20);

  const std::string empty_dir = TmpDir("emptydir");
  CHECK(ReportError(empty_dir).find("no profile files") != std::string::npos);
  CHECK(ReportError(empty_dir + "/missing").find("cannot open directory") != std::string::npos);

  // A rank file left empty (its process died before its first flush) is skipped with a
  // warning: the other ranks are still read. Alone, it is an error naming the directory.
  const std::string d1 = TmpDir("empty");
  WriteBytes(d1, "rank0.pb", "");
  std::string e = ReportError(d1);
  CHECK(e.find(d1 + ": no profile file with a complete header") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  WriteBytes(d1, "rank1.pb", good);
  {
    std::string printed;
    const std::string out = TmpDir("empty_out");
    REQUIRE(RunReport(d1, out, ReportOptions(), &printed).ok());
    const Json s = Json::parse(ReadAll(out + "/summary.json"));
    CHECK(s["meta"]["warnings"].dump().find(d1 + "/rank0.pb: no complete header") !=
          std::string::npos);
    CHECK(s["stats"]["steps"] == 1);
  }

  const std::string d2 = TmpDir("magic");
  WriteBytes(d2, "rank0.pb", "NOTAPROFxxxx");
  CHECK(ReportError(d2).find("bad magic") != std::string::npos);

  const std::string d3 = TmpDir("version");
  std::string v2 = good;
  v2[8] = 2;
  WriteBytes(d3, "rank0.pb", v2);
  CHECK(ReportError(d3).find("major version 2") != std::string::npos);

  const std::string d4 = TmpDir("corrupt");
  std::string bad = good + std::string("\xff\xff\xff\xff\x7f", 5) + "junk";
  WriteBytes(d4, "rank0.pb", bad);
  e = ReportError(d4);
  CHECK(e.find(d4 + "/rank0.pb: offset " + std::to_string(good.size())) != std::string::npos);
  CHECK(e.find("corrupt") != std::string::npos);

  const std::string d5 = TmpDir("ranks");
  WriteBytes(d5, "rank0.pb", good);
  ReportOptions opt;
  opt.ranks = {0, 3};
  CHECK(ReportError(d5, opt).find("rank 3 was requested") != std::string::npos);
}

TEST_CASE("implausible values in a file: saturated sums, bounded lists, long names matched") {
  // Each of these overflowed, allocated gigabytes or overflowed the stack (the fuzzer's
  // regression seeds in testdata/fuzz_corpus hold them too).
  const std::string d = TmpDir("implausible");
  {
    ProfileBuilder b(d + "/rank0.pb");
    b.WriteHeader(0, INT32_MAX, "h0", GPU_TIMING_CUPTI);  // a world of 2^31 - 1 ranks
    const uint32_t step = b.Str("step tokens=9223372036854775807 kv=9223372036854775807,1");
    b.Host(1, 1000 * kUs, 0, ProfileBuilder::Nvtx(step, 100 * kUs, 0));
    b.Host(1, 2000 * kUs, 0, ProfileBuilder::Nvtx(step, 100 * kUs, 0));
    // 40,000 characters: std::regex's recursion on `nccl.*broadcast` overflowed 8 MB of stack.
    const uint32_t kernel = b.Str("ncclDevKernel_Broadcast" + std::string(40000, 'x'));
    b.Host(1, 2010 * kUs, 1, ProfileBuilder::Launch(kernel, 5 * kUs));
    b.Flush();
    b.Device(0, 2020 * kUs, 1, Kernel(10 * kUs));
    DeviceOp unnamed = Kernel(10 * kUs);
    unnamed.set_name(0xffffffffu);  // an undefined string id (ops.csv cached names per id)
    b.Device(0, 2040 * kUs, 7, unnamed);
    Record far;
    far.mutable_string()->set_id(1u << 23);  // ids are dense: one this far is corrupt
    far.mutable_string()->set_value("far");
    b.Write(far);
    b.Close(true);
  }
  ReportOptions opt;
  opt.kv_reduce = "sum";
  auto s = BuildSummary({d + "/rank0.pb"}, opt, d + "/ops.csv");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 2);
  CHECK((*s)["stats"]["tokens"] == INT64_MAX);  // saturated
  CHECK((*s)["decode_length_buckets"].back()["steps"] == 2);  // kv sum saturated: last bin
  opt.kv_reduce = "mean";
  auto mean = BuildSummary({d + "/rank0.pb"}, opt, "");
  REQUIRE(mean.ok());
  CHECK((*mean)["decode_length_buckets"].back()["steps"] == 2);  // mean 2^62, exact
  bool missing = false, far = false;
  for (const auto& w : (*s)["meta"]["warnings"]) {
    const std::string t = w.get<std::string>();
    if (t.find("ranks missing") != std::string::npos) {
      missing = true;
      CHECK(t.find("world size 2147483647): 1,2,3,") != std::string::npos);
      CHECK(t.find(",64,... (2147483646 in all)") != std::string::npos);
    }
    far |= t.find("1 string definitions with an implausible id ignored") != std::string::npos;
  }
  CHECK(missing);
  CHECK(far);
  bool broadcast = false;
  for (const auto& k : (*s)["kernels"]) broadcast |= k["bucket"] == "comm.broadcast";
  CHECK(broadcast);  // matched on the name's first kMaxMatchBytes
  CHECK(ReadAll(d + "/ops.csv").find("\n0,1,,others,kernel,") != std::string::npos);
}

TEST_CASE("a profile directory whose name is not UTF-8 (summary.json escapes it)") {
  const std::string d = TmpDir("latin1_caf\xe9");
  {
    ProfileBuilder b(d + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Close(true);
  }
  const Json j = ReportInPlace(d);
  CHECK(j["meta"]["files"][0]["path"].get<std::string>().find("caf\xef\xbf\xbd") !=
        std::string::npos);
}

TEST_CASE("a truncated file is a warning and its complete prefix is used") {
  const std::string d = TmpDir("trunc_src");
  {
    ProfileBuilder b(d + "/rank0.pb", 1, 0, 1);  // one event per batch: many frames
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    for (int i = 0; i < 10; ++i) {
      b.Host(1, uint64_t(i) * 1000 * kUs, 0,
             ProfileBuilder::Step(500 * kUs, 2, -1, 0, false));
    }
    b.Close(false);
  }
  std::string all = ReadAll(d + "/rank0.pb");
  const std::string t = TmpDir("trunc");
  WriteBytes(t, "rank0.pb", all.substr(0, all.size() - 3));  // cut the last step's frame
  auto s = BuildSummary({t + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK((*s)["stats"]["steps"] == 9);
  CHECK((*s)["meta"]["files"][0]["truncated"] == true);
  CHECK(HasWarning(*s, "truncated"));
  auto st = RunStats(t + "/rank0.pb");
  REQUIRE(st.ok());
  CHECK(st->find("TRUNCATED") != std::string::npos);
  CHECK(st->find("EV_STEP 9") != std::string::npos);
}

TEST_CASE("CLI: exit code 2 and one stderr line on bad input; stats counts") {
  const std::string d = TmpDir("cli_golden");
  WriteGoldenProfile(d);
  {
    CLI::App app;
    int code = -1;
    AddReportCommands(app, &code);
    std::vector<std::string> argv = {"stats", d};
    std::vector<const char*> cargv = {"profanalyze"};
    for (auto& a : argv) cargv.push_back(a.c_str());
    app.parse(int(cargv.size()), const_cast<char**>(cargv.data()));
    CHECK(code == 0);
  }
  auto st = RunStats(d);
  REQUIRE(st.ok());
  CHECK(st->find("rank0.pb: schema 1.0, rank 0, host h0") != std::string::npos);
  CHECK(st->find("device ops: 10 (DOP_KERNEL 9, DOP_MEMCPY 1)") != std::string::npos);
  CHECK(st->find("drops: 3") != std::string::npos);
  CHECK(st->find("end: finished (exit") != std::string::npos);
  {
    CLI::App app;
    int code = -1;
    AddReportCommands(app, &code);
    const std::string empty = TmpDir("cli_empty");
    std::vector<const char*> cargv = {"profanalyze", "report", empty.c_str()};
    app.parse(int(cargv.size()), const_cast<char**>(cargv.data()));
    CHECK(code == 2);
  }
  // Options that are wrong in value: exit 2 before anything is read or written.
  const std::vector<std::vector<std::string>> bad = {
      {"--ranks", "2147483646-2147483647"},  // (once an endless loop to bad_alloc)
      {"--ranks", "0-2000000000"},
      {"--ranks", "0,,1"},
      {"--kv-edges", ""},
      {"--kv-edges", "0,,5"},
      {"--rules", d},  // a directory
  };
  for (const auto& extra : bad) {
    INFO(extra[0] << " '" << extra[1] << "'");
    CLI::App app;
    int code = -1;
    AddReportCommands(app, &code);
    const std::string out = TmpDir("cli_bad_out");
    std::vector<const char*> cargv = {"profanalyze", "report", d.c_str(), "-o", out.c_str(),
                                      extra[0].c_str(), extra[1].c_str()};
    app.parse(int(cargv.size()), const_cast<char**>(cargv.data()));
    CHECK(code == 2);
    struct stat st;
    CHECK(stat((out + "/summary.json").c_str(), &st) != 0);
  }
  CHECK(ParseRankList("0,2-3")->size() == 3);
  // "all", as --help names the default: every rank (an empty list).
  REQUIRE(ParseRankList("all").ok());
  CHECK(ParseRankList("all")->empty());
  CHECK(ParseRankList("0-99999")->size() == 100000);
  CHECK(!ParseRankList("0-99999,100000-100001").ok());  // over 100000 ranks in all
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent

namespace profagent {
namespace analyzer {
namespace {

TEST_CASE("every prefix and single-byte corruption of a file: an answer or an error, no crash") {
  const std::string src = TmpDir("fuzz_src");
  WriteGoldenProfile(src);
  const std::string all = ReadAll(src + "/rank0.pb");
  const std::string d = TmpDir("fuzz");
  const std::string path = d + "/rank0.pb";
  size_t ok = 0, errors = 0;
  for (size_t n = 0; n <= all.size(); ++n) {
    WriteBytes(d, "rank0.pb", all.substr(0, n));
    auto s = BuildSummary({path}, ReportOptions(), d + "/ops.csv");
    if (s.ok()) {
      ++ok;
      if (n < all.size()) CHECK((*s)["meta"]["files"][0]["truncated"].get<bool>() |
                                !(*s)["meta"]["files"][0]["clean_end"].get<bool>());
    } else {
      ++errors;
      CHECK(std::string(s.status().message()).find(path) == 0);
    }
  }
  CHECK(ok > all.size() / 2);  // every cut after the preamble keeps the complete prefix
  for (size_t i = 12; i < all.size(); i += 3) {
    std::string bad = all;
    bad[i] = char(bad[i] ^ 0x5a);
    WriteBytes(d, "rank0.pb", bad);
    auto s = BuildSummary({path}, ReportOptions(), "");
    if (!s.ok()) CHECK(std::string(s.status().message()).find(path) == 0);
  }
  INFO(ok << " prefixes analysed, " << errors << " rejected");
  CHECK(errors >= 12);  // the cuts inside the 12-byte preamble
}

// report.md's kernel table: long templated names shortened, short ones as they are.
TEST_CASE("ShortKernelName keeps short names and elides the bulk of long templated ones") {
  CHECK(ShortKernelName("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn");
  const std::string cutlass =
      "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>("
      "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)";
  CHECK(ShortKernelName(cutlass) ==
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(…)");
  CHECK(ShortKernelName(cutlass, 200) == cutlass);
  // One scope per qualified name; arguments of arguments elided.
  CHECK(ShortKernelName("void cub::CUB_300001_SM_750::detail::for_each::static_kernel<cub::"
                        "CUB_300001_SM_750::detail::for_each::policy_hub_t::policy_500_t, long, "
                        "thrust::THRUST_300001_SM_750_NS::cuda_cub::__tabulate::functor<thrust::"
                        "detail::normal_iterator<float*>, long> >(long, int)") ==
        "for_each::static_kernel<policy_hub_t::policy_500_t, long, __tabulate::functor<…> >(…)");
  // Still too long: every template argument elided. An anonymous namespace goes; empty
  // parameters stay "()"; an operator is kept as written.
  const std::string many(150, 'x');
  CHECK(ShortKernelName("void (anonymous namespace)::k<" + many + ">()") == "k<…>()");
  // A library's versioned namespace is no scope: the one before it is.
  CHECK(ShortKernelName("void cub::CUB_300001_SM_750::DeviceRadixSortOnesweepKernel<" + many +
                        ">(cuda::std::__4::tuple<int>)") ==
        "cub::DeviceRadixSortOnesweepKernel<…>(…)");
  CHECK(ShortKernelName("void k<cuda::std::__4::tuple<int>, " + many.substr(0, 90) + ">()") ==
        "k<std::tuple<…>, " + many.substr(0, 90) + ">()");
  CHECK(ShortKernelName("void ns::Functor<" + many + ">::operator()<int>(int)", 60) ==
        "ns::Functor<…>::operator()<int>(…)");
}

// Events or host timing, steps, and not one launch: the calls bypassed the interposers (a ctypes
// handle; an agent injected without LD_PRELOAD): a warning says so. A CPU-only process (no
// timing set up) and a CUPTI-timed one get none.
TEST_CASE("steps without any CUDA work under events or host timing: a warning says why") {
  for (GpuTimingMode timing :
       {GPU_TIMING_EVENTS, GPU_TIMING_HOST, GPU_TIMING_UNKNOWN, GPU_TIMING_CUPTI}) {
    INFO(int(timing));
    const std::string dir = TmpDir("no_cuda_work_" + std::to_string(int(timing)));
    {
      ProfileBuilder b(dir + "/rank0.pb");
      b.WriteHeader(0, 1, "h0", timing);
      const uint32_t step = b.Str("step tokens=1");
      for (uint64_t i = 0; i < 3; ++i) {
        b.Host(1, i * 100 * kUs, 0, ProfileBuilder::Nvtx(step, 50 * kUs, 0));
      }
      b.Close(true);
    }
    auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
    REQUIRE(s.ok());
    const bool want = timing == GPU_TIMING_EVENTS || timing == GPU_TIMING_HOST;
    CHECK(HasWarning(*s, "3 steps but no kernel launch or device op recorded") == want);
  }
}

// A file the agent ended at a limit (file size, full disk): its footer says so, and the report
// warns with the records kept and dropped.
TEST_CASE("a file ended at a size limit or a full disk: the report says where and what was lost") {
  const std::string dir = TmpDir("limit_footer");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    b.WriteHeader(0, 1, "h0", GPU_TIMING_CUPTI);
    b.Host(1, 0, 0, ProfileBuilder::Step(1000 * kUs, 1, -1, 0, false));
    b.Close(true, "the disk is full (No space left on device); recording stopped", 1234);
  }
  auto s = BuildSummary({dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  CHECK(HasWarning(*s,
                   "the disk is full (No space left on device); recording stopped at 1 "
                   "records; 1234 were dropped then, and nothing after was recorded"));
  CHECK(HasWarning(*s, "the agent dropped 1234 records"));
}

// A copy of a rank file (or a symlink to it) beside it is the same process: its work is not
// counted twice; the report says which file was left out.
TEST_CASE("a copy of a rank file is left out, not counted as a second process") {
  const std::string dir = TmpDir("copied_rank");
  {
    ProfileBuilder b(dir + "/rank0.pb");
    Record r;
    Header* h = r.mutable_header();
    h->set_pid(1000);
    h->set_hostname("h0");
    h->set_rank(0);
    h->set_world_size(1);
    h->set_gpu_timing(GPU_TIMING_CUPTI);
    h->set_start_monotonic_ns(123456789);  // as the agent writes: the process's identity
    b.Write(r);
    b.Host(1, 100 * kUs, 1, ProfileBuilder::Launch(b.Str("k"), 5 * kUs));
    b.Flush();
    b.Device(0, 110 * kUs, 1, Kernel(50 * kUs));
    b.Close(true);
  }
  const std::string copy = dir + "/rank0 (copy).pb";
  std::ofstream(copy, std::ios::binary) << ReadAll(dir + "/rank0.pb");
  auto s = BuildSummary({dir + "/rank0 (copy).pb", dir + "/rank0.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  REQUIRE((*s)["kernels"].size() == 1);
  CHECK((*s)["kernels"][0]["count"] == 1);
  CHECK((*s)["meta"]["files"].size() == 1);
  CHECK(HasWarning(*s, "the same process as"));
  CHECK(HasWarning(*s, "(a copy of it?): left out"));
}

// Host timing sees no NCCL kernel: an enqueue time is no arrival. Such calls are left out of
// the waits (before: waits of enqueue-time differences, uncapped), with a warning per file.
TEST_CASE("NCCL calls under host timing are left out of the waits, with a warning") {
  const std::string dir = TmpDir("host_nccl");
  for (int rank = 0; rank < 2; ++rank) {
    ProfileBuilder b(dir + "/rank" + std::to_string(rank) + ".pb");
    b.WriteHeader(rank, 2, "h", GPU_TIMING_HOST);
    WriteTwoRankComm(&b, rank, LIB_NCCL, "nccl-world");
    for (uint64_t i = 0; i < 3; ++i) {
      Event e = MpiCall(b, "AllReduce", 4096, i, -1);
      e.mutable_coll()->set_lib(LIB_NCCL);
      e.set_api(b.Str("ncclAllReduce"));
      e.set_dur(5 * kUs);
      b.Host(1, (1000 + 1000 * i + (rank == 1 ? 500 : 0)) * kUs, 0, e);
    }
    b.Close(true);
  }
  auto s = BuildSummary({dir + "/rank0.pb", dir + "/rank1.pb"}, ReportOptions(), "");
  REQUIRE(s.ok());
  const Json& sg = (*s)["collectives"]["stragglers"];
  CHECK(sg["calls_matched"] == 0);
  CHECK(sg["straggler"].is_null());
  CHECK(HasWarning(*s, "3 NCCL calls timed on the host only"));
  REQUIRE((*s)["collectives"]["ops"].size() == 1);
  const Json& row = (*s)["collectives"]["ops"][0];
  CHECK(row["count"] == 6);  // still counted as calls
  // Their 5 us are enqueue times: no bandwidth from them (before: 0.8 GB/s, 100-250 GB/s for
  // larger calls, on a link the kernels put at 1 GB/s).
  CHECK(row["time_source"] == "host");
  CHECK(row["mean_us"].is_null());
  CHECK(row["time_ms"] == 0.03);  // the calls' host time, as time_source says
  CHECK(row["algbw_gbps"].is_null());
  CHECK(row["busbw_gbps"].is_null());
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
