// Writes the generated seeds of the reader fuzzer's corpus (analyzer/testdata/fuzz_corpus,
// files gen_*) into a directory: small profiles that between them hold every record type
// and event kind, so that the fuzzer starts from inputs that reach deep into the report and the
// exporter. The corpus also holds files recorded by the agent on the simulator and truncations
// (see scripts/fuzz.sh).
//
// Usage: bazel-bin/analyzer/reader_fuzzer_seeds OUT_DIR
#include <cstdio>
#include <string>

#include "analyzer/report/profile_builder.h"
#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {
namespace {

constexpr uint64_t kUs = 1000;

Record HeaderRecord(int rank, GpuTimingMode timing, uint32_t launch_api_sample) {
  Record r;
  Header* h = r.mutable_header();
  h->set_pid(4242 + uint32_t(rank));
  h->set_hostname("node0");
  h->set_rank(rank);
  h->set_world_size(2);
  h->add_argv("./engine");
  h->set_start_realtime_ns(1700000000000000000ull);
  h->set_start_monotonic_ns(5 * kUs);
  h->set_agent_version("seed");
  (*h->mutable_config())["PROFAGENT_STACKS"] = "1";
  h->set_gpu_timing(timing);
  h->set_boot_id_hash(77);
  h->set_launch_api_sample(launch_api_sample);
  return r;
}

// NVTX-derived steps and runs, launches joined to kernels (shapes, sampled API times, stacks),
// copies, sets, memory, a collective on a communicator, a graph launch, and every metadata
// record type.
void NvtxProfile(const std::string& path) {
  ProfileBuilder b(path, 1, 1, 16);
  b.Write(HeaderRecord(0, GPU_TIMING_CUPTI, 4));
  Record rec;
  ThreadInfo* ti = rec.mutable_thread();
  ti->set_thread(1);
  ti->set_tid(4242);
  ti->set_name("main");
  b.Write(rec);
  rec.Clear();
  rec.mutable_device_info()->set_device(0);
  rec.mutable_device_info()->set_name("gpusim");
  b.Write(rec);
  rec.Clear();
  CommDef* comm = rec.mutable_comm();
  comm->set_id(9);
  comm->set_unique_id("comm-a");
  comm->set_size(2);
  b.Write(rec);
  rec.Clear();
  StackDef* stack = rec.mutable_stack();
  stack->set_id(1);
  stack->add_frames()->set_symbol(b.Str("forward()"));
  Frame* fr = stack->add_frames();
  fr->set_module(b.Str("/usr/bin/engine"));
  fr->set_offset(0x42);
  b.Write(rec);

  const uint32_t gemm = b.Str("_Z9sm90_gemmPfS_i");
  const uint32_t attn = b.Str("flash_fwd_kernel");
  const uint32_t launch_api = b.Str("cudaLaunchKernel");
  Event mem;
  mem.set_kind(EV_ALLOC);
  mem.set_dur(2 * kUs);
  mem.set_bytes(1 << 20);
  mem.set_ptr(0x1000);
  b.Host(1, 10 * kUs, 0, mem);
  mem.set_copy_kind(MEM_HOST_PINNED);
  mem.set_ptr(0x2000);
  b.Host(1, 12 * kUs, 0, mem);
  Event free_ev;
  free_ev.set_kind(EV_FREE);
  free_ev.set_dur(kUs);
  free_ev.set_ptr(0x1000);
  b.Host(1, 14 * kUs, 0, free_ev);

  b.Host(1, 100 * kUs, 0, ProfileBuilder::Nvtx(b.Str("run label=bs2 warmup=1"), 400 * kUs, 0));
  b.Host(1, 500 * kUs, 0, ProfileBuilder::Nvtx(b.Str("run label=bs2"), 800 * kUs, 0));
  uint64_t corr = 0;
  for (int step = 0; step < 4; ++step) {
    const uint64_t t = 100 * kUs + uint64_t(step) * 300 * kUs;
    const std::string msg = step == 0 ? "step phase=prefill tokens=8 bsz=2"
                                      : "step phase=decode tokens=2 kv=9,17 bsz=2";
    b.Host(1, t, 0, ProfileBuilder::Nvtx(b.Str(msg), 250 * kUs, 1));
    b.Host(1, t + 10 * kUs, 0, ProfileBuilder::Nvtx(b.Str("decode"), 200 * kUs, 2));
    b.Host(1, t + 20 * kUs, 0, ProfileBuilder::Nvtx(b.Str("qkv_proj"), 50 * kUs, 3));
    Event launch = ProfileBuilder::Launch(gemm, step % 2 == 0 ? 5 * kUs : 0);  // 0: not timed
    launch.set_api(launch_api);
    launch.set_stream(1);
    launch.set_grid_x(64);
    launch.set_grid_y(1);
    launch.set_block_x(128);
    launch.set_shmem(4096);
    launch.set_stack(1);
    b.Host(1, t + 25 * kUs, ++corr, launch);
    DeviceOp k;
    k.set_kind(DOP_KERNEL);
    k.set_dur(30 * kUs);
    k.set_name(gemm);
    k.set_stream(7);
    k.set_grid_x(64);
    k.set_block_x(128);
    b.Device(0, t + 40 * kUs, corr, k);
    b.Host(1, t + 80 * kUs, ++corr, ProfileBuilder::Launch(attn, 4 * kUs));  // repeats shape
    k.set_name(attn);
    k.set_dur(20 * kUs);
    b.Device(0, t + 90 * kUs, corr, k);
    Event cp;
    cp.set_kind(EV_MEMCPY);
    cp.set_dur(6 * kUs);
    cp.set_bytes(4096);
    cp.set_copy_kind(1);
    cp.set_stream(1);
    b.Host(1, t + 120 * kUs, ++corr, cp);
    DeviceOp dcp;
    dcp.set_kind(DOP_MEMCPY);
    dcp.set_dur(3 * kUs);
    dcp.set_bytes(4096);
    dcp.set_copy_kind(1);
    dcp.set_stream(7);
    b.Device(0, t + 130 * kUs, corr, dcp);
    Event coll;
    coll.set_kind(EV_COLLECTIVE);
    coll.set_dur(15 * kUs);
    coll.set_api(b.Str("ncclAllReduce"));
    Collective* c = coll.mutable_coll();
    c->set_lib(LIB_NCCL);
    c->set_op(b.Str("AllReduce"));
    c->set_bytes(1 << 16);
    c->set_count(1 << 14);
    c->set_comm(9);
    c->set_seq(uint64_t(step));
    c->set_peer(-1);
    c->set_corr(corr + 1);
    b.Host(1, t + 150 * kUs, 0, coll);
    b.Host(1, t + 151 * kUs, ++corr,
           ProfileBuilder::Launch(b.Str("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), 2 * kUs));
    k.set_name(0);  // an unnamed op: named by its launch
    k.set_dur(12 * kUs);
    b.Device(0, t + 160 * kUs, corr, k);
  }
  Event set;
  set.set_kind(EV_MEMSET);
  set.set_dur(3 * kUs);
  set.set_bytes(256);
  b.Host(1, 1300 * kUs, ++corr, set);
  DeviceOp dset;
  dset.set_kind(DOP_MEMSET);
  dset.set_dur(kUs);
  dset.set_bytes(256);
  b.Device(0, 1305 * kUs, corr, dset);
  Event graph;
  graph.set_kind(EV_GRAPH_LAUNCH);
  graph.set_dur(9 * kUs);
  graph.set_name(b.Str("cudaGraphLaunch"));
  graph.set_graph(0xabc);
  b.Host(1, 1310 * kUs, ++corr, graph);
  DeviceOp gk;
  gk.set_kind(DOP_KERNEL);
  gk.set_name(attn);
  gk.set_dur(5 * kUs);
  gk.set_graph(0xabc);
  b.Device(0, 1320 * kUs, corr, gk);
  b.Device(0, 1330 * kUs, corr, gk);  // a graph's kernels share its correlation id
  DeviceOp other;
  other.set_kind(DOP_OTHER);
  other.set_dur(kUs);
  b.Device(1, 1340 * kUs, 1000, other);  // no launch: unmatched
  Event sync;
  sync.set_kind(EV_SYNC);
  sync.set_dur(40 * kUs);
  sync.set_name(b.Str("cudaStreamSynchronize"));
  b.Host(1, 1350 * kUs, 0, sync);
  Event mark;
  mark.set_kind(EV_NVTX_MARK);
  mark.set_name(b.Str("checkpoint"));
  mark.set_domain(b.Str("engine"));
  mark.set_payload_i(-3);
  mark.set_has_payload(true);
  b.Host(1, 1360 * kUs, 0, mark);
  Event push = ProfileBuilder::Nvtx(b.Str("postproc"), 0, 0);
  push.set_kind(EV_NVTX_PUSH);
  b.Host(2, 1370 * kUs, 0, push);
  Event marker;
  marker.set_kind(EV_MARKER);
  b.Host(2, 1380 * kUs, 0, marker);
  b.Flush();

  rec.Clear();
  ProcessInfo* p = rec.mutable_process();
  p->set_rank(0);
  p->set_world_size(2);
  p->set_rank_source("MPI");
  b.Write(rec);
  rec.Clear();
  ClockOffset* off = rec.mutable_clock_offset();
  off->set_offset_ns(-250);
  off->set_error_ns(40);
  off->set_method("mpi-pingpong");
  b.Write(rec);
  rec.Clear();
  rec.mutable_drops()->set_thread(1);
  rec.mutable_drops()->set_count(2);
  b.Write(rec);
  rec.Clear();
  rec.mutable_note()->set_level("warning");
  rec.mutable_note()->set_text("seed note");
  b.Write(rec);
  b.Close(true);
}

// Steps and runs recorded by the agent (EV_STEP, EV_RUN), host timing (no device records).
void AgentStepsProfile(const std::string& path) {
  ProfileBuilder b(path, 1, 0, 8);
  b.Write(HeaderRecord(-1, GPU_TIMING_HOST, 0));
  const uint32_t kernel = b.Str("vllm::rms_norm_kernel");
  Event run = ProfileBuilder::Step(900 * kUs, -1, -1, 0, false);
  run.set_kind(EV_RUN);
  run.mutable_step()->set_label(b.Str("bs1"));
  run.mutable_step()->set_index(1);
  b.Host(1, 50 * kUs, 0, run);
  uint64_t corr = 0;
  for (int i = 0; i < 3; ++i) {
    const uint64_t t = 100 * kUs + uint64_t(i) * 250 * kUs;
    Event step = ProfileBuilder::Step(200 * kUs, 1, 100 + 10 * i, b.Str("decode"), i == 0);
    step.mutable_step()->set_index(uint64_t(i));
    step.mutable_step()->set_run(1);
    b.Host(1, t, 0, step);
    Event launch = ProfileBuilder::Launch(kernel, i == 1 ? 0 : 8 * kUs);
    launch.set_grid_x(1);
    launch.set_block_x(256);
    b.Host(1, t + 10 * kUs, ++corr, launch);
    Event api;
    api.set_kind(EV_API);
    api.set_dur(kUs);
    api.set_name(b.Str("cudaGetDevice"));
    b.Host(1, t + 20 * kUs, 0, api);
  }
  b.Close(false);  // ended without a footer
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  profagent::analyzer::NvtxProfile(dir + "/gen_nvtx_steps");
  profagent::analyzer::AgentStepsProfile(dir + "/gen_agent_steps");
  return 0;
}
