// Records written by the pipeline read back equal, through a real file and the generated
// protobuf parser: this pins the hand-written encoder (writer.cc) to proto/profagent.proto.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "agent/core/agent.h"
#include "agent/core/internal.h"
#include "agent/core/testing.h"
#include "agent/core/version.h"
#include "analyzer/reader.h"

extern "C" void dummy_kernel_stub() {}

namespace profagent {
namespace {

// The reader names the version it knows in its errors: the agent's.
static_assert(analyzer::kSchemaMajor == kSchemaMajor && analyzer::kSchemaMinor == kSchemaMinor,
              "analyzer/reader.h and agent/core/version.h disagree on the schema version");

struct Seen {
  analyzer::HostEvent he;
  Event ev;
};

class Collect : public analyzer::Visitor {
 public:
  Header header;
  std::map<uint32_t, std::string> strings;
  std::vector<Seen> events;
  std::vector<std::pair<analyzer::DeviceOpEvent, DeviceOp>> ops;
  std::vector<Record> others;
  void OnHeader(const Header& h) override { header = h; }
  void OnString(uint32_t id, const std::string& v) override {
    CHECK(strings.count(id) == 0);  // each string defined once
    strings[id] = v;
  }
  void OnHostEvent(const analyzer::HostEvent& e) override { events.push_back({e, *e.ev}); }
  void OnDeviceOp(const analyzer::DeviceOpEvent& d) override { ops.push_back({d, *d.op}); }
  void OnOther(const Record& r) override { others.push_back(r); }
  std::string S(uint32_t id) { return strings.count(id) ? strings[id] : "<undefined>"; }
};

TEST_CASE("every event kind round-trips through a file", "[roundtrip]") {
  std::string dir = testing::MakeTempDir("roundtrip");
  setenv("PROFAGENT_OUTPUT", dir.c_str(), 1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  REQUIRE(profagent_init() == 1);

  const uint16_t api_launch = RegisterApi("cudaLaunchKernel");
  const uint16_t api_memcpy = RegisterApi("cudaMemcpyAsync");
  const uint16_t api_malloc = RegisterApi("cudaMalloc");
  const uint16_t api_sync = RegisterApi("cudaStreamSynchronize");
  const uint16_t api_ar = RegisterApi("ncclAllReduce");
  static const char* kDtypes[] = {"int8", "float32"};
  static const char* kRedops[] = {"sum", "max"};
  RegisterCollTables(0, kDtypes, 2, kRedops, 2);
  RegisterFunctionName(reinterpret_cast<const void*>(&dummy_kernel_stub),
                       "_Z13rms_norm_implPfi");
  RegisterComm(77, 0, 0xabc, 3, 4, "feedbeef", 0, 0);
  RecordClockOffset(-1234, 56, "mpi-pingpong", 10);
  SetGpuTiming(2, "test: events");

  const uint64_t base = MonotonicNs();
  auto ns = [&](uint64_t off) { return base + off; };

  // 1. launch with every dimension set
  RawEvent l{};
  l.type = EvType::kLaunch;
  l.flags = kFlagTimeNs;
  l.t0 = ns(1000);
  l.t1 = ns(3500);
  l.api = api_launch;
  l.launch.func = reinterpret_cast<const void*>(&dummy_kernel_stub);
  l.launch.stream = 0x5000;
  l.launch.corr = 42;
  l.launch.grid_x = 132;
  l.launch.grid_y = 2;
  l.launch.grid_z = 1;
  l.launch.block = PackBlock(256, 1, 4);
  l.launch.shmem = 4096;
  REQUIRE(Emit(l));
  // 2. a second launch: same stream and api (sticky), next correlation id; its end was not read
  // (PROFAGENT_LAUNCH_API_SAMPLE): no duration in the file
  RawEvent l2 = l;
  l2.flags = kFlagTimeNs | kFlagNoEnd;
  l2.t0 = ns(5000);
  l2.t1 = ns(5000);
  l2.launch.corr = 43;
  l2.launch.grid_x = 1;
  l2.launch.grid_y = 1;
  l2.launch.block = PackBlock(1024, 1, 1);
  l2.launch.shmem = 0;
  REQUIRE(Emit(l2));
  // 3. memcpy
  RawEvent m{};
  m.type = EvType::kMemcpy;
  m.flags = kFlagTimeNs;
  m.t0 = ns(7000);
  m.t1 = ns(9000);
  m.api = api_memcpy;
  m.mem.bytes = 1 << 20;
  m.mem.stream = 0x5000;
  m.mem.corr = 100;
  m.mem.kind = 1;
  REQUIRE(Emit(m));
  // 4. alloc
  RawEvent a{};
  a.type = EvType::kAlloc;
  a.flags = kFlagTimeNs;
  a.t0 = ns(10000);
  a.t1 = ns(10500);
  a.api = api_malloc;
  a.mem.bytes = 123456;
  a.mem.ptr = 0x7f0000001000;
  a.mem.kind = MEM_DEVICE;
  a.ret = 2;
  REQUIRE(Emit(a));
  // 5. NVTX range with a message in continuation slots and an int payload
  RawEvent n{};
  n.type = EvType::kNvtxRange;
  n.flags = kFlagTimeNs | kFlagHasPayload;
  n.t0 = ns(11000);
  n.t1 = ns(20000);
  n.nvtx.domain = InternString("vllm");
  n.nvtx.payload.i = -7;
  n.nvtx.category = 3;
  n.nvtx.color = 0xff00ff;
  n.nvtx.depth = 2;
  const std::string msg = "step phase=decode tokens=8 kv=517 bsz=8 " + std::string(150, 'p');
  REQUIRE(EmitWithBytes(n, msg.data(), msg.size()));
  // 6. collective
  RawEvent c{};
  c.type = EvType::kCollective;
  c.flags = kFlagTimeNs;
  c.t0 = ns(21000);
  c.t1 = ns(22000);
  c.api = api_ar;
  c.coll.comm = 77;
  c.coll.count = 1024;
  c.coll.bytes = 4096;
  c.coll.seq = 9;
  c.coll.peer = -1;
  c.coll.lib = 0;
  c.coll.dtype = 1;
  c.coll.redop = 0;
  CollExtra cx{};
  cx.group = 5;
  cx.corr = 300;
  cx.device = -1;
  REQUIRE(EmitWithBytes(c, &cx, sizeof(cx)));
  // 7. step
  RawEvent st{};
  st.type = EvType::kStep;
  st.flags = kFlagTimeNs;
  st.t0 = ns(11000);
  st.t1 = ns(20000);
  st.step.tokens = 8;
  st.step.kv = 517;
  st.step.bsz = -1;
  st.step.phase = InternString("decode");
  st.step.warmup = 1;
  st.step.index = 4;
  st.step.run = 2;
  REQUIRE(Emit(st));
  // 8. sync (generic payload) with ticks (clock conversion path)
  RawEvent sy{};
  sy.type = EvType::kSync;
  sy.t0 = Now();
  sy.t1 = Now();
  sy.api = api_sync;
  sy.gen.a = 0x5000;
  REQUIRE(Emit(sy));
  // 9. device op
  RawEvent d{};
  d.type = EvType::kDeviceOp;
  d.flags = kFlagTimeNs;
  d.t0 = ns(4000);
  d.t1 = ns(4800);
  d.dev.name = InternString("rms_norm_impl(float*, int)");
  d.dev.corr = 42;
  d.dev.stream = 7;
  d.dev.grid_x = 132;
  d.dev.grid_y = 2;
  d.dev.grid_z = 1;
  d.dev.block = PackBlock(256, 1, 4);
  d.dev.shmem = 2048;
  d.dev.device = 0;
  d.dev.kind = DOP_KERNEL;
  REQUIRE(Emit(d));
  // 10. stack before a launch
  RawEvent sk{};
  sk.type = EvType::kStack;
  uint64_t ips[3] = {reinterpret_cast<uint64_t>(&dummy_kernel_stub),
                     reinterpret_cast<uint64_t>(&profagent_init) + 1, 0};
  REQUIRE(EmitWithBytes(sk, ips, sizeof(ips)));
  RawEvent l3 = l2;
  l3.launch.corr = 44;
  l3.t0 = ns(30000);
  l3.t1 = ns(31000);
  REQUIRE(Emit(l3));
  // 11. a graph node copied from another, and a device op of it (node id in a continuation slot)
  RawEvent gn{};
  gn.type = EvType::kGraphNode;
  gn.flags = kFlagTimeNs;
  gn.t0 = gn.t1 = ns(32000);
  gn.gen.a = 0x100000005ull;
  gn.gen.b = 3;
  REQUIRE(Emit(gn));
  RawEvent gd = d;
  gd.dev.corr = 45;
  gd.dev.graph = 9;
  const uint64_t node = 0x100000005ull;
  REQUIRE(EmitWaitWithBytes(gd, &node, sizeof(node)));
  // 12-14. NVTX messages (InternMessage): the same text twice shares one string, a message
  // equal to an interned name takes that name's id; 15. a 3 KB one (a 512-sequence kv list).
  RawEvent mk{};
  mk.type = EvType::kNvtxMark;
  mk.flags = kFlagTimeNs;
  mk.t0 = mk.t1 = ns(33000);
  const std::string again = "step kv=1,2,3 tokens=3";
  REQUIRE(EmitWithBytes(mk, again.data(), again.size()));
  REQUIRE(EmitWithBytes(mk, again.data(), again.size()));
  REQUIRE(EmitWithBytes(mk, "vllm", 4));
  std::string batch = "step kv=";
  for (int i = 0; i < 512; ++i) batch += std::to_string(10000 + i) + ",";
  batch += " tokens=512";
  REQUIRE(EmitWithBytes(mk, batch.data(), batch.size()));

  profagent_shutdown("test");
  auto files = testing::ListDir(dir);
  REQUIRE(files.size() == 1);
  CHECK(files[0] == "rank3.pb");
  Collect col;
  analyzer::FileSummary sum;
  REQUIRE(analyzer::VisitFile(dir + "/" + files[0], &col, &sum).ok());
  CHECK(sum.has_footer);

  CHECK(col.header.pid() == uint32_t(getpid()));
  CHECK(col.header.rank() == 3);
  CHECK(col.header.world_size() == 4);
  CHECK(col.header.rank_source() == "env:OMPI_COMM_WORLD_RANK");
  CHECK(col.header.local_rank() == -1);
  CHECK(col.header.start_monotonic_ns() > 0);
  CHECK(col.header.start_realtime_ns() > col.header.start_monotonic_ns());
  CHECK(col.header.agent_version() == "0.1.0");
  CHECK(col.header.config().at("PROFAGENT_OUTPUT") == dir);
  CHECK(col.header.argv_size() >= 1);

  REQUIRE(col.events.size() == 14);
  const Seen& e1 = col.events[0];
  CHECK(e1.ev.kind() == EV_LAUNCH);
  CHECK(e1.he.start_ns == ns(1000));
  CHECK(e1.he.end_ns == ns(3500));
  CHECK(e1.he.corr == 42);
  CHECK(col.S(e1.ev.name()) == "rms_norm_impl(float*, int)");
  CHECK(col.S(e1.ev.api()) == "cudaLaunchKernel");
  CHECK(e1.ev.grid_x() == 132);
  CHECK(e1.ev.grid_y() == 2);
  CHECK(e1.ev.grid_z() == 1);
  CHECK(e1.ev.block_x() == 256);
  CHECK(e1.ev.block_y() == 1);
  CHECK(e1.ev.block_z() == 4);
  CHECK(e1.ev.shmem() == 4096);
  CHECK(e1.ev.dur() == 2500);
  CHECK(col.header.launch_api_sample() == 16);
  const Seen& e2 = col.events[1];
  CHECK(e2.ev.dur() == 0);
  CHECK(e2.he.end_ns == e2.he.start_ns);
  CHECK(e2.he.corr == 43);
  CHECK(e2.ev.stream() == e1.ev.stream());
  CHECK(e2.ev.stream() != 0);
  CHECK(col.S(e2.ev.api()) == "cudaLaunchKernel");
  CHECK(e2.ev.grid_y() == 1);
  CHECK(e2.ev.block_x() == 1024);
  const Seen& e3 = col.events[2];
  CHECK(e3.ev.kind() == EV_MEMCPY);
  CHECK(e3.he.corr == 100);
  CHECK(e3.ev.bytes() == (1u << 20));
  CHECK(e3.ev.copy_kind() == 1);
  CHECK(e3.ev.stream() == e1.ev.stream());
  CHECK(col.S(e3.ev.name()) == "cudaMemcpyAsync");
  const Seen& e4 = col.events[3];
  CHECK(e4.ev.kind() == EV_ALLOC);
  CHECK(e4.ev.bytes() == 123456);
  CHECK(e4.ev.ptr() == 0x7f0000001000ull);
  CHECK(e4.ev.ret() == 2);
  CHECK(e4.he.corr == 0);
  const Seen& e5 = col.events[4];
  CHECK(e5.ev.kind() == EV_NVTX_RANGE);
  CHECK(col.S(e5.ev.name()) == msg);
  CHECK(col.S(e5.ev.domain()) == "vllm");
  CHECK(e5.ev.payload_i() == -7);
  CHECK(e5.ev.has_payload());
  CHECK(e5.ev.category() == 3);
  CHECK(e5.ev.color() == 0xff00ffu);
  CHECK(e5.ev.depth() == 2);
  CHECK(e5.he.end_ns - e5.he.start_ns == 9000);
  const Seen& e6 = col.events[5];
  CHECK(e6.ev.kind() == EV_COLLECTIVE);
  CHECK(col.S(e6.ev.coll().op()) == "AllReduce");
  CHECK(e6.ev.coll().count() == 1024);
  CHECK(e6.ev.coll().bytes() == 4096);
  CHECK(col.S(e6.ev.coll().dtype()) == "float32");
  CHECK(col.S(e6.ev.coll().redop()) == "sum");
  CHECK(e6.ev.coll().peer() == -1);
  CHECK(e6.ev.coll().comm() == 77);
  CHECK(e6.ev.coll().seq() == 9);
  CHECK(e6.ev.coll().group() == 5);
  CHECK(e6.ev.coll().corr() == 300);
  const Seen& e7 = col.events[6];
  CHECK(e7.ev.kind() == EV_STEP);
  CHECK(e7.ev.step().tokens() == 8);
  CHECK(e7.ev.step().kv() == 517);
  CHECK(e7.ev.step().bsz() == -1);
  CHECK(col.S(e7.ev.step().phase()) == "decode");
  CHECK(e7.ev.step().warmup());
  CHECK(e7.ev.step().index() == 4);
  CHECK(e7.ev.step().run() == 2);
  CHECK(col.S(e7.ev.step().source()) == "nvtx");
  const Seen& e8 = col.events[7];
  CHECK(e8.ev.kind() == EV_SYNC);
  CHECK(e8.he.start_ns >= base);
  CHECK(e8.he.start_ns < base + 10ull * 1000 * 1000 * 1000);
  CHECK(e8.ev.stream() == e1.ev.stream());
  const Seen& e9 = col.events[8];
  CHECK(e9.he.corr == 44);
  CHECK(e9.ev.stack() != 0);
  const Seen& e10 = col.events[9];
  CHECK(e10.ev.kind() == EV_GRAPH_NODE);
  CHECK(e10.ev.graph_node() == 0x100000005ull);
  CHECK(e10.ev.source_graph_node() == 3);
  CHECK(e10.he.start_ns == ns(32000));
  CHECK(col.S(col.events[10].ev.name()) == again);
  CHECK(col.events[11].ev.name() == col.events[10].ev.name());
  CHECK(col.events[12].ev.name() == e5.ev.domain());  // "vllm", interned as a domain name
  CHECK(col.S(col.events[13].ev.name()) == batch);
  // Messages are not kept once in the file; names are.
  {
    auto& g = internal::G();
    std::lock_guard<std::mutex> lock(g.mu);
    const uint32_t message = col.events[10].ev.name(), name = e5.ev.domain();
    REQUIRE(message <= g.next_string_id);
    CHECK(g.new_messages.empty());
    bool message_kept = false, name_kept = false;
    for (const auto& k : g.kept_strings) {
      message_kept |= k.first == message;
      name_kept |= k.first == name && k.second == "vllm";
    }
    CHECK(!message_kept);
    CHECK(name_kept);
  }

  REQUIRE(col.ops.size() == 2);
  CHECK(col.ops[0].second.graph_node() == 0);
  CHECK(col.ops[1].first.corr == 45);
  CHECK(col.ops[1].second.graph() == 9);
  CHECK(col.ops[1].second.graph_node() == 0x100000005ull);
  CHECK(col.ops[1].second.grid_y() == 2);
  CHECK(col.ops[0].first.start_ns == ns(4000));
  CHECK(col.ops[0].first.end_ns == ns(4800));
  CHECK(col.ops[0].first.corr == 42);
  CHECK(col.S(col.ops[0].second.name()) == "rms_norm_impl(float*, int)");
  CHECK(col.ops[0].second.grid_y() == 2);
  CHECK(col.ops[0].second.block_z() == 4);
  CHECK(col.ops[0].second.stream() == 7);
  CHECK(col.ops[0].second.bytes() == 2048);  // a kernel's shared memory

  bool comm = false, offset = false, process = false, stack = false, thread = false,
       sync = false;
  for (const Record& r : col.others) {
    if (r.has_comm()) {
      comm = true;
      CHECK(r.comm().id() == 77);
      CHECK(r.comm().rank() == 3);
      CHECK(r.comm().size() == 4);
      CHECK(r.comm().unique_id() == "feedbeef");
    }
    if (r.has_clock_offset()) {
      offset = true;
      CHECK(r.clock_offset().offset_ns() == -1234);
      CHECK(r.clock_offset().error_ns() == 56);
    }
    if (r.has_process()) {
      process = true;
      CHECK(r.process().gpu_timing() == GPU_TIMING_EVENTS);
      CHECK(r.process().gpu_timing_reason() == "test: events");
    }
    if (r.has_stack()) {
      stack = true;
      CHECK(r.stack().id() == e9.ev.stack());
      REQUIRE(r.stack().frames_size() == 2);
      INFO("symbol id " << r.stack().frames(0).symbol() << " f1 " << col.S(r.stack().frames(1).symbol()));
      CHECK(col.S(r.stack().frames(0).symbol()) == "dummy_kernel_stub");
      CHECK(col.S(r.stack().frames(1).symbol()) == "profagent_init");
    }
    if (r.has_thread()) thread = true;
    if (r.has_clock_sync()) sync = true;
  }
  CHECK(comm);
  CHECK(offset);
  // The timing mode was known before the file was created: the header carries it.
  CHECK(col.header.gpu_timing() == GPU_TIMING_EVENTS);
  CHECK(col.header.gpu_timing_reason() == "test: events");
  CHECK(stack);
  CHECK(thread);
  CHECK(sync);
}

}  // namespace
}  // namespace profagent
