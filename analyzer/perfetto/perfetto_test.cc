// Tests of `profanalyze perfetto`: the output is decoded with the generated classes of
// proto/perfetto_trace.proto (and with protoc --decode), then replayed the way trace_processor
// imports it (stable sort by timestamp, per-track begin/end stacks, interned names per
// sequence) into a readable dump that is compared with a hand-checked golden file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "analyzer/perfetto/perfetto.h"
#include "analyzer/perfetto/proto_encoder.h"
#include "analyzer/perfetto/test_profile.h"
#include "analyzer/perfetto/trace_sink.h"
#include "proto/perfetto_trace.pb.h"

namespace profagent {
namespace analyzer {
namespace {

using testing::ProfileWriter;
namespace pp = ::perfetto::protos;

std::string TmpDir() {
  const char* t = getenv("TEST_TMPDIR");
  std::string base = t != nullptr ? t : "/tmp";
  static int counter = 0;
  std::string dir = base + "/pf_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// ---- input builders

Event* AddEvent(EventBatch* b, int64_t dt, uint64_t dur, EventKind kind, uint32_t name) {
  Event* e = b->add_events();
  e->set_dt(dt);
  e->set_dur(dur);
  e->set_kind(kind);
  e->set_name(name);
  return e;
}

// The small golden profile: one rank, one thread, one device.
//   t (local ns)        event
//   1,000,000 +12,000   EV_STEP "decode" index 0 tokens 8   (steps track)
//   1,000,000 +10,000   NVTX range "forward"                  (thread track, outer)
//   1,001,000 +500      cudaMalloc 1 MiB ptr 0xdead0000 dev 0
//   1,002,000 +300      cudaLaunchKernel gemm_kernel corr 101 grid 128x1x1 block 256x1x1 stream 7
//   1,006,500 +400      cudaMemcpyAsync DtoH 4096 bytes corr 102 stream 7
//   1,007,000 +200      cudaFree ptr 0xdead0000 (size from the matching alloc)
//   1,008,000           NVTX mark "checkpoint"
//   device 0: 1,002,500 +4,000 kernel gemm_kernel corr 101 stream 7 grid 128x1x1 block 256x1x1
//   device 0: 1,006,600 +1,000 memcpy DtoH 4096 bytes corr 102 stream 7
void WriteSmallProfile(const std::string& path) {
  ProfileWriter w(path);
  REQUIRE(w.ok());
  w.Header(4242, "nodeA", 0, 1700000000000000000ull, 1000000);
  w.String(1, "cudaLaunchKernel");
  w.String(2, "gemm_kernel");
  w.String(3, "decode");
  w.String(4, "cudaMalloc");
  w.String(5, "forward");
  w.String(6, "cudaFree");
  w.String(7, "checkpoint");
  w.String(8, "cudaMemcpyAsync");
  w.Thread(0, 4242, "main");
  Record r;
  EventBatch* b = r.mutable_batch();
  b->set_thread(0);
  b->set_base_ns(1000000);
  b->set_corr_base(100);
  Event* e = AddEvent(b, 0, 12000, EV_STEP, 0);
  e->mutable_step()->set_phase(3);
  e->mutable_step()->set_index(0);
  e->mutable_step()->set_tokens(8);
  e->mutable_step()->set_kv(-1);
  e->mutable_step()->set_bsz(-1);
  AddEvent(b, 0, 10000, EV_NVTX_RANGE, 5);
  e = AddEvent(b, 1000, 500, EV_ALLOC, 4);
  e->set_bytes(1 << 20);
  e->set_ptr(0xdead0000);
  e = AddEvent(b, 1000, 300, EV_LAUNCH, 2);
  e->set_api(1);
  e->set_grid_x(128);
  e->set_block_x(256);
  e->set_stream(7);
  e = AddEvent(b, 4500, 400, EV_MEMCPY, 8);
  e->set_bytes(4096);
  e->set_copy_kind(2);
  e->set_stream(7);
  e = AddEvent(b, 500, 200, EV_FREE, 6);
  e->set_ptr(0xdead0000);
  AddEvent(b, 1000, 0, EV_NVTX_MARK, 7);
  w.Write(r);
  r.Clear();
  DeviceBatch* d = r.mutable_device();
  d->set_device(0);
  d->set_base_ns(1002500);
  d->set_corr_base(100);
  DeviceOp* op = d->add_ops();
  op->set_dt(0);
  op->set_dur(4000);
  op->set_kind(DOP_KERNEL);
  op->set_name(2);
  op->set_stream(7);
  op->set_grid_x(128);
  op->set_grid_y(1);
  op->set_grid_z(1);
  op->set_block_x(256);
  op->set_block_y(1);
  op->set_block_z(1);
  op = d->add_ops();
  op->set_dt(4100);
  op->set_dur(1000);
  op->set_kind(DOP_MEMCPY);
  op->set_copy_kind(2);
  op->set_bytes(4096);
  op->set_stream(7);
  w.Write(r);
  r.Clear();
  r.mutable_footer()->set_records(9);
  r.mutable_footer()->set_reason("exit");
  w.Write(r);
}

// ---- replay of a Perfetto trace (what trace_processor would import)

struct Replay {
  std::vector<std::string> tracks;  // descriptor lines, file order
  std::vector<std::string> events;  // slices / instants / counters, sorted
  std::map<uint64_t, std::string> track_label;
  std::map<uint64_t, int> flow_out_count, flow_in_count;
  std::map<uint64_t, uint64_t> flow_out_ts, flow_in_ts;
  std::map<std::string, uint64_t> slice_start;  // "label|name" -> first start ts
};

std::string Annotations(const pp::TrackEvent& te, const std::map<uint64_t, std::string>& names,
                        const std::map<uint64_t, std::string>& values) {
  std::string s;
  for (const pp::DebugAnnotation& a : te.debug_annotations()) {
    auto it = names.find(a.name_iid());
    std::string key = it != names.end() ? it->second : "?";
    s += " " + key + "=";
    switch (a.value_case()) {
      case pp::DebugAnnotation::kIntValue: s += std::to_string(a.int_value()); break;
      case pp::DebugAnnotation::kUintValue: s += std::to_string(a.uint_value()); break;
      case pp::DebugAnnotation::kStringValue: s += a.string_value(); break;
      case pp::DebugAnnotation::kStringValueIid: {
        auto v = values.find(a.string_value_iid());
        REQUIRE(v != values.end());  // interned before use
        s += v->second;
        break;
      }
      case pp::DebugAnnotation::kPointerValue: {
        char buf[32];
        snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(a.pointer_value()));
        s += buf;
        break;
      }
      case pp::DebugAnnotation::kDoubleValue: {
        char buf[32];
        snprintf(buf, sizeof(buf), "%g", a.double_value());
        s += buf;
        break;
      }
      default: s += "?"; break;
    }
  }
  return s;
}

uint64_t TrackOf(const pp::TracePacket& p, const std::map<uint32_t, uint64_t>& default_track) {
  if (p.track_event().has_track_uuid()) return p.track_event().track_uuid();
  auto it = default_track.find(p.trusted_packet_sequence_id());
  return it != default_track.end() ? it->second : 0;
}

Replay ReplayTrace(const pp::Trace& trace) {
  Replay out;
  std::map<std::pair<uint32_t, uint64_t>, std::string> event_names;
  std::map<uint32_t, std::map<uint64_t, std::string>> arg_names, arg_values;
  std::map<uint32_t, uint64_t> default_track;  // TrackEventDefaults.track_uuid by sequence
  std::set<uint32_t> sequences_seen;
  struct Item {
    uint64_t ts;
    size_t index;
  };
  std::vector<Item> items;
  // Tokenization pass (file order): descriptors, interning, sequence flags.
  for (size_t i = 0; i < static_cast<size_t>(trace.packet_size()); ++i) {
    const pp::TracePacket& p = trace.packet(static_cast<int>(i));
    const uint32_t seq = p.trusted_packet_sequence_id();
    REQUIRE(seq != 0);
    if (sequences_seen.insert(seq).second) {
      // First packet of a sequence clears incremental state.
      REQUIRE((p.sequence_flags() & 1) != 0);
      REQUIRE(p.first_packet_on_sequence());
    }
    for (const pp::EventName& n : p.interned_data().event_names()) {
      auto key = std::make_pair(seq, n.iid());
      REQUIRE(n.iid() != 0);
      auto it = event_names.find(key);
      if (it != event_names.end()) REQUIRE(it->second == n.name());  // never redefined
      event_names[key] = n.name();
    }
    for (const pp::DebugAnnotationName& n : p.interned_data().debug_annotation_names()) {
      arg_names[seq][n.iid()] = n.name();
    }
    for (const pp::InternedString& v : p.interned_data().debug_annotation_string_values()) {
      REQUIRE(v.iid() != 0);
      auto it = arg_values[seq].find(v.iid());
      if (it != arg_values[seq].end()) REQUIRE(it->second == v.str());  // never redefined
      arg_values[seq][v.iid()] = v.str();
    }
    if (p.trace_packet_defaults().track_event_defaults().has_track_uuid()) {
      REQUIRE((p.sequence_flags() & 1) != 0);  // set with the state it belongs to
      default_track[seq] = p.trace_packet_defaults().track_event_defaults().track_uuid();
    }
    if (p.has_track_descriptor()) {
      const pp::TrackDescriptor& td = p.track_descriptor();
      std::string label;
      std::string line;
      if (td.has_process()) {
        label = td.process().process_name();
        line = "process pid=" + std::to_string(td.process().pid()) + " name=\"" + label + "\"";
      } else if (td.has_thread()) {
        label = td.thread().thread_name();
        line = "thread pid=" + std::to_string(td.thread().pid()) +
               " tid=" + std::to_string(td.thread().tid()) + " name=\"" + label + "\"";
      } else if (td.has_counter()) {
        label = td.name();
        line = "counter unit=" + std::to_string(td.counter().unit()) + " name=\"" + label + "\"";
      } else {
        label = td.name();
        line = "track name=\"" + label + "\"";
      }
      REQUIRE(out.track_label.count(td.uuid()) == 0);  // each track defined once
      out.track_label[td.uuid()] = label;
      if (td.has_parent_uuid()) {
        REQUIRE(out.track_label.count(td.parent_uuid()) == 1);  // parent defined first
        line += " parent=\"" + out.track_label[td.parent_uuid()] + "\"";
      }
      out.tracks.push_back(line);
    }
    if (p.has_track_event()) {
      const pp::TrackEvent& te = p.track_event();
      if (!te.has_track_uuid()) {
        REQUIRE((p.sequence_flags() & 2) != 0);  // the default track is incremental state
        REQUIRE(default_track.count(seq) == 1);
      }
      REQUIRE(out.track_label.count(TrackOf(p, default_track)) == 1);  // defined before use
      if (te.has_name_iid()) {
        REQUIRE((p.sequence_flags() & 2) != 0);  // uses incremental state
        REQUIRE(event_names.count({seq, te.name_iid()}) == 1);  // interned before use
      }
      items.push_back(Item{p.timestamp(), i});
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.ts < b.ts; });
  struct Open {
    uint64_t ts;
    std::string name, args;
    uint64_t flow_out = 0, flow_in = 0;
  };
  std::map<uint64_t, std::vector<Open>> stacks;
  std::vector<std::pair<std::pair<std::string, uint64_t>, std::string>> lines;
  for (const Item& it : items) {
    const pp::TracePacket& p = trace.packet(static_cast<int>(it.index));
    const pp::TrackEvent& te = p.track_event();
    const uint32_t seq = p.trusted_packet_sequence_id();
    const uint64_t track = TrackOf(p, default_track);
    const std::string& label = out.track_label[track];
    std::string name = te.has_name_iid() ? event_names[{seq, te.name_iid()}] : te.name();
    std::string args = Annotations(te, arg_names[seq], arg_values[seq]);
    switch (te.type()) {
      case pp::TrackEvent::TYPE_SLICE_BEGIN: {
        Open o{p.timestamp(), name, args};
        for (uint64_t f : te.flow_ids()) {
          o.flow_out = f;
          out.flow_out_count[f]++;
          out.flow_out_ts[f] = p.timestamp();
        }
        for (uint64_t f : te.terminating_flow_ids()) {
          o.flow_in = f;
          out.flow_in_count[f]++;
          out.flow_in_ts[f] = p.timestamp();
        }
        stacks[track].push_back(o);
        break;
      }
      case pp::TrackEvent::TYPE_SLICE_END: {
        auto& st = stacks[track];
        REQUIRE(!st.empty());  // every end closes an open slice
        Open o = st.back();
        st.pop_back();
        std::string line = "slice [" + label + "] depth=" + std::to_string(st.size()) +
                           " ts=" + std::to_string(o.ts) +
                           " dur=" + std::to_string(p.timestamp() - o.ts) + " \"" + o.name +
                           "\"" + o.args;
        if (o.flow_out != 0) line += " flow_out";
        if (o.flow_in != 0) line += " flow_in";
        out.slice_start.emplace(label + "|" + o.name, o.ts);
        lines.push_back({{label, o.ts}, line});
        break;
      }
      case pp::TrackEvent::TYPE_INSTANT: {
        std::string line = "instant [" + label + "] ts=" + std::to_string(p.timestamp()) +
                           " \"" + name + "\"" + args;
        for (uint64_t f : te.flow_ids()) {
          out.flow_out_count[f]++;
          out.flow_out_ts[f] = p.timestamp();
          line += " flow_out";
        }
        lines.push_back({{label, p.timestamp()}, line});
        break;
      }
      case pp::TrackEvent::TYPE_COUNTER:
        lines.push_back({{label, p.timestamp()},
                         "counter [" + label + "] ts=" + std::to_string(p.timestamp()) +
                             " value=" + std::to_string(te.counter_value())});
        break;
      default:
        FAIL("unexpected track event type");
    }
  }
  for (auto& kv : stacks) {
    for (const Open& o : kv.second) {
      lines.push_back({{out.track_label[kv.first], o.ts},
                       "open [" + out.track_label[kv.first] + "] ts=" + std::to_string(o.ts) +
                           " \"" + o.name + "\"" + o.args});
    }
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& l : lines) out.events.push_back(l.second);
  return out;
}

pp::Trace ParseTrace(const std::string& path) {
  pp::Trace trace;
  REQUIRE(trace.ParseFromString(ReadAll(path)));
  return trace;
}

std::string DumpText(const Replay& r) {
  std::string s;
  for (const std::string& l : r.tracks) s += l + "\n";
  for (const std::string& l : r.events) s += l + "\n";
  return s;
}

// ---- tests

TEST_CASE("encoder writes canonical varints and patches long nested lengths") {
  perfetto_internal::ProtoEncoder enc;
  size_t outer = enc.BeginNested(1);
  size_t inner = enc.BeginNested(2);
  enc.BytesField(3, std::string(300, 'x'));
  enc.EndNested(inner);
  enc.VarintField(4, 150);
  enc.EndNested(outer);
  pp::EventName n;  // field 2 is `name`: reuse a real message to parse the bytes
  std::string bytes(enc.data(), enc.size());
  // outer = field 1 (len-delimited) holding {2: {3: 300 x}, 4: 150}
  REQUIRE(static_cast<unsigned char>(bytes[0]) == 0x0a);
  REQUIRE(perfetto_internal::VarintSize(300) == 2);
  pp::Trace t;
  // Trace.packet(1) -> TracePacket; its field 2 is unknown to our subset, 4 too: still parses.
  REQUIRE(t.ParseFromString(bytes));
  REQUIRE(t.packet_size() == 1);
  // 1 tag + 2 len + [1 tag + 2 len + (1 tag + 2 len + 300) + 1 tag + 2 varint]
  REQUIRE(bytes.size() == 1 + 2 + 1 + 2 + 1 + 2 + 300 + 1 + 2);
}

TEST_CASE("perfetto export of a small profile matches the golden dump") {
  const std::string dir = TmpDir();
  const std::string in = dir + "/rank0.pb";
  WriteSmallProfile(in);
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(in, "", "perfetto", out, err) == 0);
  INFO(err.str());
  const std::string trace_path = dir + "/rank0.pftrace";
  REQUIRE(Exists(trace_path));
  REQUIRE(!Exists(trace_path + ".partial"));
  Replay r = ReplayTrace(ParseTrace(trace_path));
  const std::string dump = DumpText(r);
  const std::string golden = ReadAll("analyzer/testdata/perfetto_small_golden.txt");
  if (dump != golden) {
    std::ofstream(dir + "/actual.txt") << dump;
    INFO("actual dump written to " << dir << "/actual.txt:\n" << dump);
    REQUIRE(dump == golden);
  }
  // Flows: launch -> kernel and memcpy -> copy, one source and one end each, source first.
  REQUIRE(r.flow_out_count.size() == 2);
  for (const auto& kv : r.flow_out_count) {
    REQUIRE(kv.second == 1);
    REQUIRE(r.flow_in_count[kv.first] == 1);
    REQUIRE(r.flow_out_ts[kv.first] < r.flow_in_ts[kv.first]);
  }
}

TEST_CASE("protoc decodes the output as perfetto.protos.Trace") {
  if (system("protoc --version > /dev/null 2>&1") != 0) {
    WARN("protoc not on PATH; skipped");
    return;
  }
  const std::string dir = TmpDir();
  WriteSmallProfile(dir + "/rank0.pb");
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", dir + "/t.pftrace", "perfetto", out, err) == 0);
  const std::string cmd = "protoc --proto_path=proto --decode=perfetto.protos.Trace "
                          "proto/perfetto_trace.proto < " + dir + "/t.pftrace > " + dir +
                          "/decoded.txt 2> " + dir + "/decode_err.txt";
  REQUIRE(system(cmd.c_str()) == 0);
  const std::string text = ReadAll(dir + "/decoded.txt");
  REQUIRE(text.find("process_name: \"rank 0 (nodeA)\"") != std::string::npos);
  REQUIRE(text.find("thread_name: \"main\"") != std::string::npos);
  REQUIRE(text.find("name: \"gemm_kernel\"") != std::string::npos);
  REQUIRE(text.find("terminating_flow_ids:") != std::string::npos);
  REQUIRE(text.find("unit: UNIT_SIZE_BYTES") != std::string::npos);
  REQUIRE(ReadAll(dir + "/decode_err.txt").empty());
}

TEST_CASE("JSON output is valid Chrome trace JSON with the same content") {
  const std::string dir = TmpDir();
  WriteSmallProfile(dir + "/rank0.pb");
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));  // throws if invalid
  REQUIRE(j["traceEvents"].is_array());
  std::map<std::string, int> phases;
  std::map<uint64_t, double> flow_s, flow_f;
  bool kernel_seen = false;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.at("ph");
    REQUIRE(std::string("XBEiCsfM").find(ph) != std::string::npos);
    REQUIRE(e.at("pid").is_number_integer());
    REQUIRE(e.at("tid").is_number_integer());
    phases[ph]++;
    if (ph == "M") continue;
    REQUIRE(e.at("ts").is_number());
    if (ph == "X") REQUIRE(e.at("dur").is_number());
    if (ph == "s") flow_s[e.at("id").get<uint64_t>()] = e.at("ts").get<double>();
    if (ph == "f") {
      REQUIRE(e.at("bp") == "e");
      flow_f[e.at("id").get<uint64_t>()] = e.at("ts").get<double>();
    }
    if (ph == "X" && e.at("name") == "gemm_kernel") {
      kernel_seen = true;
      // ts in microseconds with the nanosecond fraction: 1,002,500 ns.
      REQUIRE(e.at("ts").get<double>() == Approx(1002.5).epsilon(1e-12));
      REQUIRE(e.at("dur").get<double>() == Approx(4.0));
      REQUIRE(e.at("args").at("grid") == "128x1x1");
      REQUIRE(e.at("args").at("correlation") == 101);
    }
    if (ph == "C") REQUIRE(e.at("name") == "GPU 0 memory");
  }
  REQUIRE(kernel_seen);
  REQUIRE(phases["X"] == 8);  // step, nvtx, malloc, launch, memcpy, free, kernel, copy
  REQUIRE(phases["i"] == 1);
  REQUIRE(phases["C"] == 2);
  REQUIRE(flow_s.size() == 2);
  REQUIRE(flow_f.size() == 2);
  for (const auto& kv : flow_s) {
    REQUIRE(flow_f.count(kv.first) == 1);
    REQUIRE(kv.second < flow_f[kv.first]);
  }
  // The JSON text itself: exactly the ns fraction.
  REQUIRE(ReadAll(dir + "/rank0.json").find("\"ts\":1002.500") != std::string::npos);
}

// Two ranks whose monotonic clocks differ by `shift`; one collective happens at the same true
// instant on both. Returns the two collective start times in the merged trace.
std::pair<uint64_t, uint64_t> AlignedCollectives(const std::string& dir, bool with_offset,
                                                 int64_t measured_error, uint64_t error_bound,
                                                 int64_t realtime_skew) {
  const uint64_t kEpoch = 1700000000000000000ull;  // realtime = true monotonic + epoch
  const int64_t shift = 3000012345;                 // rank 1 monotonic = true + shift
  const uint64_t t_true = 5000000000;               // the collective
  for (int rank = 0; rank < 2; ++rank) {
    ProfileWriter w(dir + "/rank" + std::to_string(rank) + ".pb");
    const int64_t s = rank == 0 ? 0 : shift;
    const uint64_t start_true = 4000000000;
    // Same pid on both hosts: the exporter must keep two processes apart.
    w.Header(777, rank == 0 ? "hostA" : "hostB", rank, start_true + kEpoch + (rank ? realtime_skew : 0),
             start_true + s, rank == 0 ? 1 : 2);
    w.String(1, "ncclAllReduce");
    w.Thread(0, 777, "main");
    if (with_offset && rank == 1) w.Offset(-shift + measured_error, error_bound);
    if (with_offset && rank == 0) w.Offset(0, 0);
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_thread(0);
    b->set_base_ns(t_true + s);
    Event* e = AddEvent(b, 0, 1000, EV_COLLECTIVE, 1);
    e->mutable_coll()->set_bytes(4096);
    e->mutable_coll()->set_seq(0);
    e->mutable_coll()->set_peer(-1);
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir, "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/trace.pftrace"));
  // Two processes with distinct pids.
  int processes = 0;
  std::set<std::string> pids;
  for (const std::string& l : r.tracks) {
    if (l.rfind("process ", 0) == 0) {
      ++processes;
      pids.insert(l.substr(0, l.find(" name=")));
    }
  }
  REQUIRE(processes == 2);
  REQUIRE(pids.size() == 2);
  REQUIRE(r.slice_start.count("main|ncclAllReduce") == 1);  // both threads are named main
  uint64_t t0 = 0, t1 = 0;
  for (const std::string& l : r.events) {
    auto pos = l.find(" ts=");
    uint64_t ts = std::stoull(l.substr(pos + 4));
    if (l.find("ncclAllReduce") == std::string::npos) continue;
    (t0 == 0 ? t0 : t1) = ts;
  }
  REQUIRE(t0 != 0);
  REQUIRE(t1 != 0);
  return {t0, t1};
}

TEST_CASE("two ranks with a known clock shift are aligned within the recorded error") {
  const uint64_t kBound = 2000;
  auto ts = AlignedCollectives(TmpDir(), /*with_offset=*/true, /*measured_error=*/-1500, kBound,
                               /*realtime_skew=*/0);
  const int64_t diff = static_cast<int64_t>(ts.first) - static_cast<int64_t>(ts.second);
  INFO("rank0 " << ts.first << " rank1 " << ts.second);
  REQUIRE(std::llabs(diff) <= static_cast<int64_t>(kBound));
  REQUIRE(std::llabs(diff) == 1500);
  REQUIRE(std::min(ts.first, ts.second) == 5000000000ull - 1500);  // rank 0's own clock
}

TEST_CASE("without ClockOffset records the header realtime pair aligns the ranks") {
  // Rank 1's realtime clock reads 40 us ahead (NTP error): that is all the misalignment left.
  auto ts = AlignedCollectives(TmpDir(), /*with_offset=*/false, 0, 0, /*realtime_skew=*/40000);
  const int64_t diff = static_cast<int64_t>(ts.second) - static_cast<int64_t>(ts.first);
  REQUIRE(std::llabs(diff) == 40000);
}

TEST_CASE("alignment methods") {
  FileMeta a, b, c;
  a.path = "a";
  a.rank = 1;
  a.has_header = true;
  a.start_realtime_ns = 1000;
  a.start_monotonic_ns = 100;
  a.boot_id_hash = 9;
  b = a;
  b.path = "b";
  b.rank = 0;
  b.has_clock_offset = true;
  b.clock_offset_ns = 0;
  b.start_realtime_ns = 5000;
  b.start_monotonic_ns = 200;
  c = a;
  c.path = "c";
  c.rank = 2;
  c.boot_id_hash = 7;
  auto al = ComputeAlignment({a, b, c});
  REQUIRE(al[0].method == "boot_id");  // same host as rank 0: same monotonic clock
  REQUIRE(al[0].offset_ns == 0);
  REQUIRE(al[1].method == "clock_offset:?");
  // c: realtime - monotonic = 900 vs rank 0's 4800: c's clock is 3900 behind.
  REQUIRE(al[2].method == "realtime");
  REQUIRE(al[2].offset_ns == 900 - 4800);
  REQUIRE(ComputeAlignment({a})[0].method == "none");
}

// A rank file of launches on two threads and their kernels, on three streams per thread, with
// three kernel names and launch shapes; returns the replay lines the export must produce (one
// per launch and per kernel, all at depth 0).
std::vector<std::string> WriteLaunchProfile(const std::string& path, int rank, int launches) {
  const uint32_t pid = 5000 + rank;
  const uint64_t base = 1000000 + uint64_t(rank) * 10000000;
  ProfileWriter w(path);
  REQUIRE(w.ok());
  w.Header(pid, "node", rank, 1700000000000000000ull, 1000000, /*boot_id=*/7);
  const char* kKernels[] = {"gemm", "attention", "rmsnorm"};
  w.String(1, "cudaLaunchKernel");
  for (uint32_t k = 0; k < 3; ++k) w.String(10 + k, kKernels[k]);
  const char* kThreads[] = {"main", "worker"};
  std::vector<std::string> expected;
  for (uint32_t t = 0; t < 2; ++t) {
    w.Thread(t, pid + t, kThreads[t]);
    const uint64_t t0 = base + t * 500;
    const uint64_t corr_base = uint64_t(t) * 100000;
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_thread(t);
    b->set_base_ns(t0);
    b->set_corr_base(corr_base);
    Record rd;
    DeviceBatch* d = rd.mutable_device();
    d->set_device(0);
    d->set_base_ns(t0 + 1000);
    d->set_corr_base(corr_base);
    for (int i = 0; i < launches; ++i) {
      const uint32_t k = static_cast<uint32_t>(i % 3);
      const uint32_t stream = 1 + t * 3 + k;
      const uint32_t grid = 64u << k;
      Event* e = AddEvent(b, i == 0 ? 0 : 2000, 300, EV_LAUNCH, 10 + k);
      e->set_api(1);
      e->set_grid_x(grid);
      e->set_block_x(128);
      e->set_stream(stream);
      DeviceOp* op = d->add_ops();
      op->set_dt(i == 0 ? 0 : 2000);
      op->set_dur(1500);
      op->set_kind(DOP_KERNEL);
      op->set_name(10 + k);
      op->set_stream(stream);
      op->set_grid_x(grid);
      op->set_grid_y(1);
      op->set_grid_z(1);
      op->set_block_x(128);
      op->set_block_y(1);
      op->set_block_z(1);
      const uint64_t ts = t0 + uint64_t(i) * 2000;
      const std::string args = " correlation=" + std::to_string(corr_base + i + 1) +
                               " grid=" + std::to_string(grid) + "x1x1 block=128x1x1";
      expected.push_back("slice [" + std::string(kThreads[t]) + "] depth=0 ts=" +
                         std::to_string(ts) + " dur=300 \"cudaLaunchKernel\"" + args +
                         " stream=" + std::to_string(stream) + " flow_out");
      expected.push_back("slice [GPU 0 stream " + std::to_string(stream) + "] depth=0 ts=" +
                         std::to_string(ts + 1000) + " dur=1500 \"" + kKernels[k] + "\"" + args +
                         " flow_in");
    }
    w.Write(r);
    w.Write(rd);
  }
  return expected;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST_CASE("every launch and kernel is exported with its name, times, track, shape and flow") {
  const std::string dir = TmpDir();
  const std::vector<std::string> expected = WriteLaunchProfile(dir + "/rank0.pb", 0, 300);
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  REQUIRE(Sorted(r.events) == Sorted(expected));
  REQUIRE(r.flow_out_count.size() == 600);
  for (const auto& kv : r.flow_out_count) {
    REQUIRE(kv.second == 1);
    REQUIRE(r.flow_in_count[kv.first] == 1);
    REQUIRE(r.flow_out_ts[kv.first] < r.flow_in_ts[kv.first]);
  }
  // 2 threads and 6 streams besides the process: one packet sequence per track.
  REQUIRE(r.tracks.size() == 9);
}

TEST_CASE("a multi-file export is the same trace whatever the thread count") {
  const std::string dir = TmpDir();
  std::vector<std::string> expected;
  for (int rank = 0; rank < 3; ++rank) {
    // Unequal sizes: workers finish out of order.
    for (const std::string& l : WriteLaunchProfile(dir + "/rank" + std::to_string(rank) + ".pb",
                                                   rank, 400 - 150 * rank)) {
      expected.push_back(l);
    }
  }
  for (const char* format : {"perfetto", "json"}) {
    std::string first;
    for (int threads : {1, 2, 3, 0}) {
      const std::string out_path = dir + "/t" + std::to_string(threads) + "." + format;
      std::ostringstream out, err;
      INFO(format << " threads " << threads);
      REQUIRE(RunPerfettoCommand(dir, out_path, format, out, err, threads) == 0);
      const std::string bytes = ReadAll(out_path);
      REQUIRE(!bytes.empty());
      if (first.empty()) first = bytes;
      REQUIRE(bytes == first);
    }
    struct stat st;
    for (int i = 0; i < 3; ++i) {
      REQUIRE(stat((dir + "/t3." + format + ".partial." + std::to_string(i)).c_str(), &st) != 0);
    }
    if (std::string(format) == "json") {
      nlohmann::json j = nlohmann::json::parse(first);
      size_t slices = 0;
      for (const auto& e : j["traceEvents"]) slices += e["ph"] == "X";
      REQUIRE(slices == expected.size());
    } else {
      Replay r = ReplayTrace(ParseTrace(dir + "/t1.perfetto"));
      REQUIRE(Sorted(r.events) == Sorted(expected));
    }
  }
}

// The start of a one-thread file of pid 50 on host "h": its header (`header` fills in more) and
// the call and kernel names the launch profiles use (1-3: cudaLaunchKernel, cudaGraphLaunch,
// cudaMemcpyAsync; 10: kernel_a), thread 0 "main".
template <typename Fill>
void WriteOneThreadStart(ProfileWriter& w, Fill&& header) {
  Record r;
  r.mutable_header()->set_pid(50);
  r.mutable_header()->set_hostname("h");
  header(r.mutable_header());
  w.Write(r);
  w.String(1, "cudaLaunchKernel");
  w.String(2, "cudaGraphLaunch");
  w.String(3, "cudaMemcpyAsync");
  w.String(10, "kernel_a");
  w.Thread(0, 50, "main");
}

// A profile whose header says 1 in `sample` launches was timed (schema 1.1; 0: an older file,
// every launch timed): on one thread, a timed and an untimed (dur 0) kernel launch, an untimed
// and a timed graph launch, a zero-length memcpy (not a launch), and their five device ops.
void WriteSampledLaunchProfile(const std::string& path, uint32_t sample) {
  ProfileWriter w(path);
  REQUIRE(w.ok());
  WriteOneThreadStart(w, [&](Header* h) { h->set_launch_api_sample(sample); });
  w.String(11, "kernel_b");
  w.String(12, "graph_kernel");
  Record r;
  EventBatch* b = r.mutable_batch();
  b->set_base_ns(1000);
  Event* e = AddEvent(b, 0, 300, EV_LAUNCH, 10);  // correlation 1
  e->set_api(1);
  e->set_stream(3);
  AddEvent(b, 1000, 0, EV_LAUNCH, 11);  // 2: api and stream are sticky
  AddEvent(b, 1000, 0, EV_GRAPH_LAUNCH, 2)->set_graph(0xabc);    // 3
  AddEvent(b, 1000, 200, EV_GRAPH_LAUNCH, 2)->set_graph(0xabc);  // 4
  e = AddEvent(b, 1000, 0, EV_MEMCPY, 3);                        // 5
  e->set_bytes(64);
  e->set_copy_kind(1);
  e->set_stream(3);
  w.Write(r);
  r.Clear();
  DeviceBatch* d = r.mutable_device();
  d->set_base_ns(1500);
  for (uint32_t i = 0; i < 5; ++i) {
    DeviceOp* op = d->add_ops();
    op->set_dt(i == 0 ? 0 : 1000);
    op->set_dur(100);
    op->set_stream(3);
    if (i < 4) {
      op->set_kind(DOP_KERNEL);
      op->set_name(10 + std::min(i, 2u));
    } else {
      op->set_kind(DOP_MEMCPY);
      op->set_copy_kind(1);
      op->set_bytes(64);
    }
  }
  w.Write(r);
}

TEST_CASE("untimed launches of a sampled profile are annotated instants with their flows") {
  const std::string dir = TmpDir();
  const std::vector<std::string> device = {
      "slice [GPU 0 stream 3] depth=0 ts=1500 dur=100 \"kernel_a\" correlation=1 flow_in",
      "slice [GPU 0 stream 3] depth=0 ts=2500 dur=100 \"kernel_b\" correlation=2 flow_in",
      "slice [GPU 0 stream 3] depth=0 ts=3500 dur=100 \"graph_kernel\" correlation=3 flow_in",
      "slice [GPU 0 stream 3] depth=0 ts=4500 dur=100 \"graph_kernel\" correlation=4 flow_in",
      "slice [GPU 0 stream 3] depth=0 ts=5500 dur=100 \"Memcpy HtoD\" correlation=5 bytes=64 "
      "flow_in",
  };
  const std::string timed_launch =
      "slice [main] depth=0 ts=1000 dur=300 \"cudaLaunchKernel\" correlation=1 stream=3 flow_out";
  const std::string timed_graph =
      "slice [main] depth=0 ts=4000 dur=200 \"cudaGraphLaunch\" correlation=4 graph=0xabc "
      "flow_out";
  const std::string memcpy =
      "slice [main] depth=0 ts=5000 dur=0 \"cudaMemcpyAsync\" correlation=5 bytes=64 "
      "copy_kind=HtoD stream=3 flow_out";
  auto check_flows = [](const Replay& r) {
    REQUIRE(r.flow_out_count.size() == 5);
    for (const auto& kv : r.flow_out_count) {
      REQUIRE(kv.second == 1);
      REQUIRE(r.flow_in_count.at(kv.first) == 1);
      REQUIRE(r.flow_out_ts.at(kv.first) < r.flow_in_ts.at(kv.first));
    }
  };

  SECTION("sampled (schema 1.1): dur 0 launches were not timed") {
    WriteSampledLaunchProfile(dir + "/rank0.pb", 4);
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
    Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
    std::vector<std::string> expected = device;
    expected.push_back(timed_launch);
    expected.push_back("instant [main] ts=2000 \"cudaLaunchKernel\" correlation=2 stream=3 "
                       "api_dur=not timed (1 in 4 sampled) flow_out");
    expected.push_back("instant [main] ts=3000 \"cudaGraphLaunch\" correlation=3 graph=0xabc "
                       "api_dur=not timed (1 in 4 sampled) flow_out");
    expected.push_back(timed_graph);
    expected.push_back(memcpy);
    REQUIRE(r.events == expected);
    check_flows(r);

    // JSON: the same instants ("i" with the annotation), each the start of its flow.
    REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
    nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));
    std::map<std::string, std::vector<double>> by_phase;  // "ph name" -> ts
    std::map<uint64_t, double> flow_s, flow_f;
    for (const auto& e : j["traceEvents"]) {
      const std::string ph = e.at("ph");
      if (ph == "M") continue;
      if (ph == "s") flow_s[e.at("id").get<uint64_t>()] = e.at("ts").get<double>();
      if (ph == "f") flow_f[e.at("id").get<uint64_t>()] = e.at("ts").get<double>();
      if (ph != "X" && ph != "i") continue;
      by_phase[ph + " " + e.at("name").get<std::string>()].push_back(e.at("ts").get<double>());
      const bool instant = ph == "i";
      REQUIRE(e.at("args").contains("api_dur") == instant);
      if (instant) REQUIRE(e.at("args").at("api_dur") == "not timed (1 in 4 sampled)");
    }
    REQUIRE(by_phase["i cudaLaunchKernel"] == std::vector<double>{2.0});
    REQUIRE(by_phase["i cudaGraphLaunch"] == std::vector<double>{3.0});
    REQUIRE(by_phase["X cudaLaunchKernel"] == std::vector<double>{1.0});
    REQUIRE(by_phase["X cudaGraphLaunch"] == std::vector<double>{4.0});
    REQUIRE(by_phase["X cudaMemcpyAsync"] == std::vector<double>{5.0});
    REQUIRE(flow_s.size() == 5);
    std::set<double> starts;
    for (const auto& kv : flow_s) {
      REQUIRE(flow_f.count(kv.first) == 1);
      REQUIRE(kv.second < flow_f[kv.first]);
      starts.insert(kv.second);
    }
    REQUIRE(starts == std::set<double>{1.0, 2.0, 3.0, 4.0, 5.0});
  }

  SECTION("every launch timed (before schema 1.1): dur 0 is a measured duration") {
    WriteSampledLaunchProfile(dir + "/rank0.pb", 0);
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
    Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
    std::vector<std::string> expected = device;
    expected.push_back(timed_launch);
    expected.push_back("slice [main] depth=0 ts=2000 dur=0 \"cudaLaunchKernel\" correlation=2 "
                       "stream=3 flow_out");
    expected.push_back("slice [main] depth=0 ts=3000 dur=0 \"cudaGraphLaunch\" correlation=3 "
                       "graph=0xabc flow_out");
    expected.push_back(timed_graph);
    expected.push_back(memcpy);
    REQUIRE(r.events == expected);
    check_flows(r);
  }
}

// A launch that failed (cudaErrorInvalidConfiguration) and a launch and a copy captured into a
// graph ran nothing: they are drawn, but start no flow that no device op would end.
// A process 50 on host "h" with one thread "main" and string 1 = `string1`.
void StartPid50(ProfileWriter* w, const char* string1) {
  REQUIRE(w->ok());
  Record r;
  r.mutable_header()->set_pid(50);
  r.mutable_header()->set_hostname("h");
  w->Write(r);
  w->String(1, string1);
  w->Thread(0, 50, "main");
}

TEST_CASE("failed and captured calls start no flow") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    REQUIRE(w.ok());
    Record r;
    r.mutable_header()->set_pid(50);
    r.mutable_header()->set_hostname("h");
    w.Write(r);
    w.String(1, "cudaLaunchKernel");
    w.String(3, "cudaMemcpyAsync");
    w.String(10, "kernel_a");
    w.Thread(0, 50, "main");
    r.Clear();
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    Event* e = AddEvent(b, 0, 300, EV_LAUNCH, 10);  // correlation 1: ran
    e->set_api(1);
    e->set_stream(3);
    AddEvent(b, 1000, 300, EV_LAUNCH, 10)->set_ret(9);          // 2: failed
    AddEvent(b, 1000, 300, EV_LAUNCH, 10)->set_captured(true);  // 3: captured
    e = AddEvent(b, 1000, 100, EV_MEMCPY, 3);                   // 4: captured
    e->set_bytes(64);
    e->set_stream(3);
    e->set_captured(true);
    w.Write(r);
    r.Clear();
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(1500);
    DeviceOp* op = d->add_ops();
    op->set_dur(100);
    op->set_stream(3);
    op->set_kind(DOP_KERNEL);
    op->set_name(10);
    w.Write(r);
    w.Footer();
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::string all;
  for (const std::string& ev : r.events) all += ev + "\n";
  INFO(all);
  REQUIRE(r.flow_out_count.size() == 1);
  CHECK(r.flow_in_count.size() == 1);
  int launches = 0;
  for (const std::string& ev : r.events) {
    launches += ev.find("\"cudaLaunchKernel\"") != std::string::npos;
  }
  CHECK(launches == 3);  // all three drawn
}

// JSON flows are written whole: a launch whose device op never came (untimed, or cut by a
// kill) writes none (before, a dangling "s"); a device op whose record reached the file before
// its launch's batch still gets its flow, "s" and "f".
TEST_CASE("JSON flows: no start without its end, in either file order") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    StartPid50(&w, "cudaLaunchKernel");
    w.String(10, "kernel_a");
    // The device op of correlation 2 first (its launch's batch comes later).
    Record r;
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(5000);
    DeviceOp* op = d->add_ops();
    op->set_dur(100);
    op->set_stream(3);
    op->set_kind(DOP_KERNEL);
    op->set_name(10);
    op->set_dcorr(1);  // correlation 0 + 1 + 1 = 2
    w.Write(r);
    r.Clear();
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    for (int i = 0; i < 2; ++i) {  // correlation 1: no device op ever; 2: the one above
      Event* e = AddEvent(b, i == 0 ? 0 : 1000, 300, EV_LAUNCH, 10);
      e->set_api(1);
      e->set_stream(3);
    }
    w.Write(r);
    w.Footer();
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));
  std::map<uint64_t, std::string> phases;  // id -> phases in file order
  for (const auto& ev : j["traceEvents"]) {
    const std::string ph = ev.at("ph");
    if (ph == "s" || ph == "t" || ph == "f") phases[ev.at("id").get<uint64_t>()] += ph;
  }
  REQUIRE(phases.size() == 1);
  CHECK(phases.begin()->second == "sf");
}

// A copy of a rank file beside it is the same process: drawn once, with a warning.
TEST_CASE("a copy of a rank file is drawn once") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    REQUIRE(w.ok());
    w.Header(50, "h", 0, 1700000000000000000ull, 1000000000);
    w.String(1, "cudaLaunchKernel");
    w.Thread(0, 50, "main");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    AddEvent(b, 0, 300, EV_LAUNCH, 1);
    w.Write(r);
    w.Footer();
  }
  {
    std::ifstream in(dir + "/rank0.pb", std::ios::binary);
    std::ofstream(dir + "/rank0 (copy).pb", std::ios::binary) << in.rdbuf();
  }
  ExportStats stats;
  REQUIRE(ExportTrace({dir + "/rank0 (copy).pb", dir + "/rank0.pb"}, dir + "/t.pftrace",
                      ExportOptions(), &stats)
              .ok());
  REQUIRE(stats.warnings.size() == 1);
  CHECK(stats.warnings[0].find("the same process as") != std::string::npos);
  Replay r = ReplayTrace(ParseTrace(dir + "/t.pftrace"));
  int processes = 0;
  for (const std::string& t : r.tracks) processes += t.rfind("process ", 0) == 0;
  CHECK(processes == 1);
}

// A file of one thread whose GPU timing `mode` is in the header, or in a later ProcessInfo
// (`in_process`): a kernel launch on stream 3 (file index), then a graph launch and a 64-byte
// copy on stream 3.
void WriteModeProfile(const std::string& path, GpuTimingMode mode, bool in_process) {
  ProfileWriter w(path);
  REQUIRE(w.ok());
  WriteOneThreadStart(w, [&](Header* h) {
    if (!in_process) h->set_gpu_timing(mode);
  });
  Record r;
  if (in_process) {
    r.mutable_process()->set_rank(-1);
    r.mutable_process()->set_gpu_timing(mode);
    w.Write(r);
    r.Clear();
  }
  EventBatch* b = r.mutable_batch();
  b->set_base_ns(1000);
  Event* e = AddEvent(b, 0, 300, EV_LAUNCH, 10);
  e->set_api(1);
  e->set_stream(3);
  AddEvent(b, 1000, 300, EV_GRAPH_LAUNCH, 2)->set_graph(7);
  e = AddEvent(b, 1000, 100, EV_MEMCPY, 3);
  e->set_bytes(64);
  e->set_stream(3);
  w.Write(r);
  w.Footer();
}

// Host timing records no device op: its launches, copies and graph launches start no flow (a
// flow with no end is what trace processors flag), whether the header or a later ProcessInfo
// says the mode.
TEST_CASE("host timing: launches start no flow") {
  for (bool in_process : {false, true}) {
    INFO("mode in " << (in_process ? "ProcessInfo" : "Header"));
    const std::string dir = TmpDir();
    WriteModeProfile(dir + "/rank0.pb", GPU_TIMING_HOST, in_process);
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
    Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
    CHECK(r.flow_out_count.empty());
    CHECK(r.events.size() >= 3);  // the calls are drawn
  }
}

// Under CUPTI timing device ops (and their tracks) carry CUPTI's stream ids, while host events
// carry the file's stream index: a call's argument is then `stream_index` (a `stream` of 3
// pointed at another track than its kernel's). Under CUDA events both are the file's index.
TEST_CASE("a launch's stream argument names its track's id only when the ids agree") {
  for (GpuTimingMode mode : {GPU_TIMING_CUPTI, GPU_TIMING_EVENTS}) {
    INFO("mode " << mode);
    const std::string dir = TmpDir();
    WriteModeProfile(dir + "/rank0.pb", mode, false);
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
    Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
    size_t calls = 0;
    for (const std::string& ev : r.events) {
      if (ev.find("\"cudaLaunchKernel\"") == std::string::npos &&
          ev.find("\"cudaMemcpyAsync\"") == std::string::npos) {
        continue;
      }
      INFO(ev);
      CHECK(ev.find(mode == GPU_TIMING_CUPTI ? " stream_index=3" : " stream=3") !=
            std::string::npos);
      ++calls;
    }
    CHECK(calls == 2);
  }
}

// CUDA-event timing times a graph launch as one unnamed op: it is drawn as "cudaGraphLaunch",
// as ops.csv names it. A graph node record (EV_GRAPH_NODE) is bookkeeping: nothing is drawn.
TEST_CASE("an events-mode graph launch op is named cudaGraphLaunch; graph nodes draw nothing") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    REQUIRE(w.ok());
    w.Header(50, "h", 0, 0, 0);
    w.String(1, "cudaGraphLaunch");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    Event* node = AddEvent(b, 0, 0, EV_GRAPH_NODE, 0);
    node->set_graph_node(5);
    AddEvent(b, 100, 100, EV_GRAPH_LAUNCH, 1)->set_graph(0xabc);  // correlation 1
    w.Write(r);
    r.Clear();
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(1500);
    d->set_corr_base(0);
    DeviceOp* op = d->add_ops();
    op->set_dur(400);
    op->set_kind(DOP_OTHER);
    op->set_stream(3);
    op->set_graph(0xabc);
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  CHECK(r.events == std::vector<std::string>{
                        "slice [GPU 0 stream 3] depth=0 ts=1500 dur=400 \"cudaGraphLaunch\" "
                        "correlation=1 graph=0xabc flow_out",
                        "slice [thread 0] depth=0 ts=1100 dur=100 \"cudaGraphLaunch\" "
                        "correlation=1 graph=0xabc flow_out",
                    });
}

TEST_CASE("a graph launch's flow passes through every node it ran, in time order") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    REQUIRE(w.ok());
    w.Header(50, "h", 0, 0, 0);
    w.String(1, "cudaGraphLaunch");
    w.String(2, "cudaLaunchKernel");
    w.String(10, "node_a");
    w.String(11, "node_b");
    w.String(12, "plain");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    AddEvent(b, 0, 100, EV_GRAPH_LAUNCH, 1)->set_graph(0xabc);  // correlation 1
    Event* e = AddEvent(b, 200, 100, EV_LAUNCH, 12);            // 2
    e->set_api(2);
    e->set_stream(3);
    w.Write(r);
    r.Clear();
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(2000);
    d->set_corr_base(0);
    // Graph nodes on streams 3 and 4 (correlation 1), then the plain kernel (2).
    const int64_t dts[] = {0, 300, 300, 1000};
    const uint32_t streams[] = {3, 4, 3, 3};
    const uint32_t names[] = {10, 11, 10, 12};
    const int64_t dcorr[] = {0, -1, -1, 0};
    for (int i = 0; i < 4; ++i) {
      DeviceOp* op = d->add_ops();
      op->set_dt(dts[i]);
      op->set_dur(100);
      op->set_kind(DOP_KERNEL);
      op->set_name(names[i]);
      op->set_stream(streams[i]);
      op->set_dcorr(dcorr[i]);
      if (i < 3) op->set_graph(0xabc);
    }
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::vector<std::string> got;
  for (const std::string& l : r.events) got.push_back(l);
  CHECK(got == std::vector<std::string>{
                   "slice [GPU 0 stream 3] depth=0 ts=2000 dur=100 \"node_a\" correlation=1 "
                   "graph=0xabc flow_out",
                   "slice [GPU 0 stream 3] depth=0 ts=2600 dur=100 \"node_a\" correlation=1 "
                   "graph=0xabc flow_out",
                   "slice [GPU 0 stream 3] depth=0 ts=3600 dur=100 \"plain\" correlation=2 "
                   "flow_in",
                   "slice [GPU 0 stream 4] depth=0 ts=2300 dur=100 \"node_b\" correlation=1 "
                   "graph=0xabc flow_out",
                   "slice [thread 0] depth=0 ts=1000 dur=100 \"cudaGraphLaunch\" correlation=1 "
                   "graph=0xabc flow_out",
                   "slice [thread 0] depth=0 ts=1200 dur=100 \"cudaLaunchKernel\" "
                   "correlation=2 stream=3 flow_out",
               });
  // Proto: the graph's flow id is on the launch and each node and never terminated (a
  // terminated id named again would be a dangling end); the plain launch's ends at its kernel.
  REQUIRE(r.flow_out_count.size() == 2);
  std::vector<int> outs, ins;
  for (const auto& kv : r.flow_out_count) {
    outs.push_back(kv.second);
    ins.push_back(r.flow_in_count[kv.first]);
  }
  CHECK(outs == std::vector<int>{4, 1});
  CHECK(ins == std::vector<int>{0, 1});
  // JSON: "s" at the launch, a "t" step at each node but the last, which ends it ("f"); the
  // plain flow: "s" then "f".
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));
  std::map<uint64_t, std::string> phases;  // id -> phases in file order
  std::map<uint64_t, std::map<double, std::string>> by_time;  // id -> ts -> phase
  for (const auto& ev : j["traceEvents"]) {
    const std::string ph = ev.at("ph");
    if (ph != "s" && ph != "t" && ph != "f") continue;
    phases[ev.at("id").get<uint64_t>()] += ph;
    by_time[ev.at("id").get<uint64_t>()][ev.at("ts").get<double>()] += ph;
  }
  REQUIRE(phases.size() == 2);
  const std::map<double, std::string>& graph_flow = by_time.begin()->second;
  CHECK(phases.begin()->second == "sttf");
  // In time order, as viewers bind them: stream 4's node (2.3 us) came after stream 3's last
  // (2.6 us), yet the flow ends at the latest node.
  CHECK(graph_flow ==
        std::map<double, std::string>{{1.0, "s"}, {2.0, "t"}, {2.3, "t"}, {2.6, "f"}});
  CHECK(std::next(phases.begin())->second == "sf");
}

// Runs of not-ready polls of events polled in turn overlap each other (runtime_hooks.cc): they
// go to "polls" tracks under the thread, in lanes, where no slice crosses another.
TEST_CASE("runs of polls are slices with their calls and busy time, interleaved runs in lanes") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    StartPid50(&w, "cudaEventQuery");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    Event* e = AddEvent(b, 0, 5000, EV_API, 1);  // event A polled from 1000 to 6000
    e->set_ret(600);
    e->set_calls(40);
    e->set_busy(1200);
    e = AddEvent(b, 100, 5200, EV_API, 1);  // event B, polled in turn with A, until 6300
    e->set_ret(600);
    e->set_calls(39);
    e->set_busy(1100);
    e = AddEvent(b, 50, 0, EV_API, 1);  // event C: one not-ready poll in between
    e->set_ret(600);
    AddEvent(b, 5150, 30, EV_API, 1);  // A's successful poll, on the thread's track
    w.Write(r);
    w.Close();
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::vector<std::string> events = r.events;
  std::sort(events.begin(), events.end());
  REQUIRE(events == std::vector<std::string>{
                        "slice [main] depth=0 ts=6300 dur=30 \"cudaEventQuery\"",
                        "slice [polls (main) (overlapping 1)] depth=0 ts=1100 dur=5200 "
                        "\"cudaEventQuery\" calls=39 busy_ns=1100 ret=600",
                        "slice [polls (main)] depth=0 ts=1000 dur=5000 \"cudaEventQuery\" "
                        "calls=40 busy_ns=1200 ret=600",
                        "slice [polls (main)] depth=1 ts=1150 dur=0 \"cudaEventQuery\" ret=600"});
}

// The "records dropped" instant is the process's: process-scoped in JSON ("s":"p"), not on a
// thread 0 that does not exist.
TEST_CASE("JSON: an instant on the process track is process-scoped") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    StartPid50(&w, "cudaDeviceSynchronize");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_base_ns(1000);
    AddEvent(b, 0, 500, EV_SYNC, 1);
    w.Write(r);
    r.Clear();
    r.mutable_drops()->set_thread(1);
    r.mutable_drops()->set_count(672);
    r.mutable_drops()->set_reason("ring full");
    w.Write(r);
    w.Close();
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", dir + "/t.json", "json", out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/t.json"));
  int instants = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.at("ph") != "i") continue;
    ++instants;
    CHECK(e.at("name") == "records dropped");
    CHECK(e.at("s") == "p");
    CHECK(e.at("args").at("count") == 672);
  }
  CHECK(instants == 1);
}

TEST_CASE("memory counter is time-ordered across interleaved thread batches") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, "cudaMalloc");
    // Thread 1's batch (allocs at 100 and 300) comes before thread 2's (alloc at 200) in the
    // file; the counter must still read 1, 3, 7 in time order.
    for (int t = 1; t <= 2; ++t) {
      Record r;
      EventBatch* b = r.mutable_batch();
      b->set_thread(t);
      b->set_base_ns(t == 1 ? 100 : 200);
      Event* e = AddEvent(b, 0, 10, EV_ALLOC, 1);
      e->set_bytes(t == 1 ? 1 : 2);
      e->set_ptr(t * 100);
      if (t == 1) {
        e = AddEvent(b, 200, 10, EV_ALLOC, 1);
        e->set_bytes(4);
        e->set_ptr(1000);
      }
      w.Write(r);
    }
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::vector<std::string> counters;
  for (const std::string& l : r.events) {
    if (l.rfind("counter", 0) == 0) counters.push_back(l);
  }
  REQUIRE(counters == std::vector<std::string>{
                          "counter [GPU 0 memory] ts=100 value=1",
                          "counter [GPU 0 memory] ts=200 value=3",
                          "counter [GPU 0 memory] ts=300 value=7",
                      });
}

// Device ops of one stream as trace_processor must see them: A [1000, 2000); B recorded from
// 1999 (a CUDA-event reading 1 ns early) starts at A's end; D [3000, 3500) comes before C in
// the file; C [2500, 2600) truly overlaps B and goes to an "overlapping" lane. Every slice keeps
// its own duration (before, B's start inside A made A's end close B: A 999 ns, B 1 ns). A free
// made while another device is current lowers the counter of the device it was allocated on.
TEST_CASE("device ops of a stream never cross on a track; a free counts on its own device") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    for (uint32_t i = 1; i <= 4; ++i) w.String(i, std::string(1, char('A' + i - 1)));
    w.String(5, "cudaMalloc");
    w.String(6, "cudaFree");
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_thread(1);
    b->set_base_ns(100);
    Event* e = AddEvent(b, 0, 10, EV_ALLOC, 5);
    e->set_bytes(64);
    e->set_ptr(0x1000);
    e->set_device(1);
    e = AddEvent(b, 5000, 10, EV_FREE, 6);  // device 0 current
    e->set_ptr(0x1000);
    w.Write(r);
    r.Clear();
    DeviceBatch* d = r.mutable_device();
    d->set_device(0);
    d->set_base_ns(1000);
    const int64_t starts[] = {1000, 1999, 3000, 2500};
    const uint64_t durs[] = {1000, 1001, 500, 100};
    const uint32_t names[] = {1, 2, 4, 3};
    int64_t prev = 1000;
    for (int i = 0; i < 4; ++i) {
      DeviceOp* op = d->add_ops();
      op->set_dt(starts[i] - prev);
      prev = starts[i];
      op->set_dur(durs[i]);
      op->set_kind(DOP_KERNEL);
      op->set_name(names[i]);
      op->set_stream(7);
    }
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::vector<std::string> slices, counters;
  for (const std::string& l : r.events) {
    if (l.rfind("slice [GPU", 0) == 0) slices.push_back(l.substr(0, l.find(" corr")));
    if (l.rfind("counter", 0) == 0) counters.push_back(l);
  }
  CHECK(slices == std::vector<std::string>{
                      "slice [GPU 0 stream 7] depth=0 ts=1000 dur=1000 \"A\"",
                      "slice [GPU 0 stream 7] depth=0 ts=2000 dur=1000 \"B\"",
                      "slice [GPU 0 stream 7] depth=0 ts=3000 dur=500 \"D\"",
                      "slice [GPU 0 stream 7 (overlapping 1)] depth=0 ts=2500 dur=100 \"C\"",
                  });
  CHECK(counters == std::vector<std::string>{
                        "counter [GPU 1 memory] ts=100 value=64",
                        "counter [GPU 1 memory] ts=5110 value=0",
                    });
  // JSON: no two complete events of one thread overlap.
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", dir + "/t.json", "json", out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/t.json"));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> by_tid;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "X") by_tid[{ev["pid"], ev["tid"]}].push_back({ev["ts"], ev["dur"]});
  }
  for (auto& kv : by_tid) {
    std::sort(kv.second.begin(), kv.second.end());
    for (size_t i = 1; i < kv.second.size(); ++i) {
      CHECK(kv.second[i].first >= kv.second[i - 1].first + kv.second[i - 1].second - 1e-9);
    }
  }
}

TEST_CASE("start/end ranges, steps and runs that cross go to lanes where every slice nests") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    const char* names[] = {"r1", "r2", "r3", "r4",  "late",   "far",   "open",
                           "pp", "s1", "s2", "eng", "engine", "graph", "nvtx"};
    for (uint32_t i = 0; i < 14; ++i) w.String(i + 1, names[i]);
    Record r;
    EventBatch* b = r.mutable_batch();
    b->set_thread(1);
    b->set_base_ns(0);
    // Recorded when they end (the agent's order): start, duration, name, start/end?
    struct R {
      int64_t start;
      uint64_t dur;
      uint32_t name;
      EventKind kind;
    };
    const R rs[] = {
        {100, 100, 8, EV_NVTX_RANGE},        // push/pop: stays on the thread track
        {4000, 500, 3, EV_NVTX_RANGE},       // r3 inside r1 and r2
        {1000, 4000, 1, EV_NVTX_RANGE},      // r1 [1000, 5000]
        {2000, 4000, 9, EV_STEP},            // s1 [2000, 6000]
        {6000, 1000, 4, EV_NVTX_RANGE},      // r4 after r1
        {3000, 5000, 2, EV_NVTX_RANGE},      // r2 [3000, 8000] crosses r1
        {5000, 4000, 10, EV_STEP},           // s2 [5000, 9000] crosses s1
        {9500, 0, 7, EV_NVTX_PUSH},          // still open at the end of the file
        {2000000000, 10, 6, EV_NVTX_RANGE},  // far: r1..r4 leave the window
        {150, 450, 5, EV_NVTX_RANGE},        // late [150, 600]: placed after r1..r4
        {700, 1100, 11, EV_NVTX_RANGE},      // push/pop of domain "engine": crosses r1
    };
    int64_t prev = 0;
    for (const R& x : rs) {
      Event* e = AddEvent(b, x.start - prev, x.dur, x.kind, x.name);
      prev = x.start;
      if (x.kind == EV_STEP) {
        e->mutable_step()->set_tokens(-1);
        e->mutable_step()->set_kv(-1);
        e->mutable_step()->set_bsz(-1);
        e->mutable_step()->set_source(x.name == 10 ? 13 : 14);  // s2 from a step rule
      } else if (x.name == 11) {
        e->set_domain(12);  // its own stack: it may cross the default domain's ranges
      } else if (x.name != 8) {
        e->set_start_end(true);
      }
    }
    w.Write(r);
    w.Footer();
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  CHECK(err.str().empty());
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  std::vector<std::string> got;
  for (const std::string& l : r.events) {
    if (l.find("steps") != std::string::npos || l.find("NVTX") != std::string::npos ||
        l.find("\"pp\"") != std::string::npos) {
      got.push_back(l.substr(0, l.find(" index")));
    }
  }
  // Each slice keeps its own start and duration (ReplayTrace closes the innermost open slice
  // of a track at each end, as trace_processor does).
  CHECK(got == std::vector<std::string>{
                   "slice [NVTX ranges (thread 1)] depth=0 ts=1000 dur=4000 \"r1\"",
                   "slice [NVTX ranges (thread 1)] depth=1 ts=4000 dur=500 \"r3\"",
                   "slice [NVTX ranges (thread 1)] depth=0 ts=6000 dur=1000 \"r4\"",
                   "open [NVTX ranges (thread 1)] ts=9500 \"open\"",  // to the end
                   "slice [NVTX ranges (thread 1)] depth=1 ts=2000000000 dur=10 \"far\"",
                   "slice [NVTX ranges (thread 1) (overlapping 1)] depth=0 ts=3000 dur=5000 "
                   "\"r2\"",
                   "slice [NVTX ranges (thread 1) (overlapping 2)] depth=0 ts=150 dur=450 "
                   "\"late\"",
                   // A named domain's push/pop range crossing r1: a lane too, after `late`.
                   "slice [NVTX ranges (thread 1) (overlapping 2)] depth=0 ts=700 dur=1100 "
                   "\"eng\" domain=engine",
                   "slice [steps (thread 1)] depth=0 ts=2000 dur=4000 \"s1\"",
                   "slice [steps (thread 1) (overlapping 1)] depth=0 ts=5000 dur=4000 \"s2\"",
                   "slice [thread 1] depth=0 ts=100 dur=100 \"pp\"",
               });
  // A step rule's step says so; an NVTX step has no `source`.
  for (const std::string& l : r.events) {
    if (l.find("\"s2\"") != std::string::npos) CHECK(l.find("source=graph") != std::string::npos);
    if (l.find("\"s1\"") != std::string::npos) CHECK(l.find("source") == std::string::npos);
  }
  // JSON: on each thread id, complete events nest or are disjoint.
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", dir + "/t.json", "json", out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/t.json"));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> by_tid;
  size_t complete = 0;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    ++complete;
    const double ts = ev["ts"], dur = ev["dur"];
    by_tid[{ev["pid"], ev["tid"]}].push_back({ts, ts + dur});
  }
  CHECK(complete == 10);
  for (const auto& kv : by_tid) {
    for (const auto& a : kv.second) {
      for (const auto& c : kv.second) {
        const bool crosses = a.first < c.first && c.first < a.second && a.second < c.second;
        CHECK_FALSE(crosses);
      }
    }
  }
}

TEST_CASE("bad input: one-line error naming the file, exit 2, no output left") {
  const std::string dir = TmpDir();
  SECTION("bad magic") {
    const std::string in = dir + "/bad.pb";
    std::ofstream(in) << "NOTAPROFILE-------";
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(in, "", "perfetto", out, err) == 2);
    const std::string msg = err.str();
    REQUIRE(msg.find(in) != std::string::npos);
    REQUIRE(msg.find("bad magic") != std::string::npos);
    REQUIRE(std::count(msg.begin(), msg.end(), '\n') == 1);
    REQUIRE(!Exists(dir + "/bad.pftrace"));
  }
  SECTION("corrupt record in the middle of the file") {
    const std::string in = dir + "/rank0.pb";
    {
      ProfileWriter w(in);
      w.Header(1, "h", 0, 0, 0);
      w.String(1, "x");
      const unsigned char junk[] = {0x05, 0xff, 0xff, 0xff, 0xff, 0xff};  // 5-byte garbage frame
      w.Raw(junk, sizeof(junk));
      w.String(2, "y");
    }
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(in, dir + "/o.pftrace", "perfetto", out, err) == 2);
    const std::string msg = err.str();
    REQUIRE(msg.find(in) != std::string::npos);
    REQUIRE(msg.find("offset") != std::string::npos);
    REQUIRE(std::count(msg.begin(), msg.end(), '\n') == 1);
    REQUIRE(!Exists(dir + "/o.pftrace"));
    REQUIRE(!Exists(dir + "/o.pftrace.partial"));
  }
  SECTION("missing file") {
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir + "/nope.pb", "", "perfetto", out, err) == 2);
    REQUIRE(err.str().find(dir + "/nope.pb") != std::string::npos);
  }
  SECTION("empty directory") {
    std::ostringstream out, err;
    REQUIRE(RunPerfettoCommand(dir, "", "perfetto", out, err) == 2);
    REQUIRE(err.str().find("no profile files") != std::string::npos);
  }
}

TEST_CASE("a truncated last frame is accepted with a warning") {
  const std::string dir = TmpDir();
  const std::string in = dir + "/rank0.pb";
  WriteSmallProfile(in);
  std::string bytes = ReadAll(in);
  bytes.resize(bytes.size() - 3);  // cut into the footer
  std::ofstream(in, std::ios::binary) << bytes;
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(in, "", "perfetto", out, err) == 0);
  REQUIRE(err.str().find("truncated") != std::string::npos);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  REQUIRE(r.slice_start.count("GPU 0 stream 7|gemm_kernel") == 1);
}

// A process killed (SIGKILL) leaves no footer: its last records and open ranges are missing,
// which the trace says as the report does.
TEST_CASE("a file without a footer is drawn with a warning") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(50, "h", 0, 1700000000000000000ull, 1000000000);
    w.String(1, "cudaLaunchKernel");
    w.Thread(0, 50, "main");
    Record r;
    AddEvent(r.mutable_batch(), 100, 300, EV_LAUNCH, 1);
    w.Write(r);
  }
  ExportStats stats;
  REQUIRE(ExportTrace({dir + "/rank0.pb"}, dir + "/t.pftrace", ExportOptions(), &stats).ok());
  REQUIRE(stats.warnings.size() == 1);
  CHECK(stats.warnings[0] == dir + "/rank0.pb: no footer (the process ended abnormally)");
}

TEST_CASE("JSON escapes quotes, backslashes, control characters; keeps UTF-8") {
  // (Invalid UTF-8 cannot reach the exporter: proto3 string fields are validated on parse, so
  // such a record is reported as corrupt by the reader. The JSON writer still replaces stray
  // bytes with U+FFFD.)
  const std::string dir = TmpDir();
  const std::string tricky = "caf\xc3\xa9 \xe2\x9c\x93 \"q\" back\\slash\nline\ttab\x01";
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, tricky);
    Record r;
    EventBatch* b = r.mutable_batch();
    AddEvent(b, 100, 5, EV_NVTX_RANGE, 1);
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));
  std::set<std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  }
  REQUIRE(names.count(tricky) == 1);
}

// NVTX payloads: an integer one (int64/uint64/int32 payloads) as an int, a float or double
// one (nvtx.annotate(payload=2.5)) as a double, in both formats.
TEST_CASE("NVTX integer and double payloads are exported with their type") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, "schedule");
    w.String(2, "enqueue");
    Record r;
    EventBatch* b = r.mutable_batch();
    Event* range = AddEvent(b, 100, 50, EV_NVTX_RANGE, 1);
    range->set_has_payload(true);
    range->set_payload_f(2.5);
    Event* mark = AddEvent(b, 100, 0, EV_NVTX_MARK, 2);
    mark->set_has_payload(true);
    mark->set_payload_i(-7);
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  int found = 0;
  for (const std::string& l : r.events) {
    if (l.find("\"schedule\"") != std::string::npos) {
      CHECK(l.find("payload=2.5") != std::string::npos);
      ++found;
    }
    if (l.find("\"enqueue\"") != std::string::npos) {
      CHECK(l.find("payload=-7") != std::string::npos);
      ++found;
    }
  }
  CHECK(found == 2);
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", dir + "/t.json", "json", out, err) == 0);
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/t.json"));
  found = 0;
  for (const auto& ev : j["traceEvents"]) {
    if (!ev.contains("name") || !ev.contains("args") || !ev["args"].contains("payload")) continue;
    if (ev["name"] == "schedule") CHECK(ev["args"]["payload"].get<double>() == 2.5);
    if (ev["name"] == "enqueue") CHECK(ev["args"]["payload"].get<int64_t>() == -7);
    ++found;
  }
  CHECK(found == 2);
}

TEST_CASE("JSON sink replaces invalid UTF-8 bytes with U+FFFD") {
  const std::string dir = TmpDir();
  const int fd = open((dir + "/s.json").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  {
    perfetto_internal::ChromeJsonSink sink(fd);
    const perfetto_internal::TrackId process = sink.ProcessTrack(1, 5, "p");
    const perfetto_internal::TrackId track = sink.NamedTrack(2, process, "t", 5, 6);
    const std::string name = std::string("ok\xc3\xa9 bad\xff cut\xe2\x9c") + "!";
    sink.Slice(track, 1000, 2500, perfetto_internal::Name{1, name}, nullptr, 0, 0, 0);
    REQUIRE(sink.Finish());
  }
  close(fd);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/s.json"));
  const auto& e = j["traceEvents"].back();
  REQUIRE(e["name"] == "ok\xc3\xa9 bad\xef\xbf\xbd cut\xef\xbf\xbd\xef\xbf\xbd!");
  REQUIRE(e["ts"].get<double>() == Approx(1.0));
  REQUIRE(e["dur"].get<double>() == Approx(1.5));
}

TEST_CASE("mangled kernel names are shown demangled") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, "_Z12first_kerneli");
    w.String(2, "_Znot_a_valid_mangling");
    Record r;
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(100);
    for (uint32_t name : {1u, 2u}) {
      DeviceOp* op = d->add_ops();
      op->set_dt(10);
      op->set_dur(5);
      op->set_name(name);
    }
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  REQUIRE(r.slice_start.count("GPU 0 stream 0|first_kernel(int)") == 1);
  REQUIRE(r.slice_start.count("GPU 0 stream 0|_Znot_a_valid_mangling") == 1);
}

TEST_CASE("streams named with NVTX: their tracks carry the name, wherever the record is") {
  const std::string dir = TmpDir();
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, "k");
    for (auto [device, stream] : {std::pair<uint32_t, uint32_t>{0, 7}, {1, 7}, {0, 8}}) {
      Record r;
      DeviceBatch* d = r.mutable_device();
      d->set_device(device);
      d->set_base_ns(100);
      DeviceOp* op = d->add_ops();
      op->set_dt(10);
      op->set_dur(5);
      op->set_name(1);
      op->set_stream(stream);
      w.Write(r);
    }
    // After the ops (a name given late, or records written out of order), renamed once.
    for (auto [device, name] :
         {std::pair<uint32_t, const char*>{0, "decode"}, {1, "peer"}, {0, "decode-main"}}) {
      Record n;
      n.mutable_stream_info()->set_device(device);
      n.mutable_stream_info()->set_stream(7);
      n.mutable_stream_info()->set_handle(0x5000);
      n.mutable_stream_info()->set_name(name);
      w.Write(n);
    }
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  for (const char* slice :
       {"GPU 0 stream 7 (decode-main)|k", "GPU 1 stream 7 (peer)|k", "GPU 0 stream 8|k"}) {
    INFO(slice);
    CHECK(r.slice_start.count(slice) == 1);
  }
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "json", out, err) == 0);
  nlohmann::json j = nlohmann::json::parse(ReadAll(dir + "/rank0.json"));
  std::set<std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") == "thread_name") names.insert(e["args"]["name"].get<std::string>());
  }
  CHECK(names.count("GPU 0 stream 7 (decode-main)") == 1);
  CHECK(names.count("GPU 1 stream 7 (peer)") == 1);
}

TEST_CASE("string ids far beyond the dense table still name their events, on every track") {
  // A dense table indexed by such ids (and per-track interning tables) cost hundreds of MB.
  const std::string dir = TmpDir();
  constexpr uint32_t kFar = 4000000, kVeryFar = 3000000000u;
  {
    ProfileWriter w(dir + "/rank0.pb");
    w.Header(10, "h", 0, 0, 0);
    w.String(1, "near");
    w.String(kFar, "far_kernel");
    w.String(kVeryFar, "very_far_kernel");
    Record r;
    DeviceBatch* d = r.mutable_device();
    d->set_base_ns(100);
    for (uint32_t stream = 1; stream <= 40; ++stream) {
      for (uint32_t name : {1u, kFar, kVeryFar}) {
        DeviceOp* op = d->add_ops();
        op->set_dt(10);
        op->set_dur(5);
        op->set_name(name);
        op->set_stream(stream);
      }
    }
    w.Write(r);
  }
  std::ostringstream out, err;
  REQUIRE(RunPerfettoCommand(dir + "/rank0.pb", "", "perfetto", out, err) == 0);
  Replay r = ReplayTrace(ParseTrace(dir + "/rank0.pftrace"));
  for (const char* track : {"GPU 0 stream 1|", "GPU 0 stream 40|"}) {
    for (const char* name : {"near", "far_kernel", "very_far_kernel"}) {
      INFO(track << name);
      REQUIRE(r.slice_start.count(std::string(track) + name) == 1);
    }
  }
}

TEST_CASE("every truncation and every single-byte corruption: exit 0 or 2, never a crash") {
  const std::string dir = TmpDir();
  WriteSmallProfile(dir + "/full.pb");
  const std::string bytes = ReadAll(dir + "/full.pb");
  int ok = 0, bad = 0;
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const std::string in = dir + "/cut.pb";
    std::ofstream(in, std::ios::binary) << bytes.substr(0, cut);
    std::ostringstream out, err;
    const int code = RunPerfettoCommand(in, dir + "/cut.pftrace", "perfetto", out, err);
    REQUIRE((code == 0 || code == 2));
    if (code == 0) {
      ++ok;
      ReplayTrace(ParseTrace(dir + "/cut.pftrace"));  // a well-formed trace
    } else {
      ++bad;
      const std::string msg = err.str();
      REQUIRE(std::count(msg.begin(), msg.end(), '\n') == 1);
    }
  }
  REQUIRE(ok > 0);
  REQUIRE(bad > 0);  // cuts inside the preamble
  for (size_t i = 12; i < bytes.size(); ++i) {
    std::string mutated = bytes;
    mutated[i] = static_cast<char>(mutated[i] ^ 0x5a);
    const std::string in = dir + "/mut.pb";
    std::ofstream(in, std::ios::binary) << mutated;
    std::ostringstream out, err;
    const int code = RunPerfettoCommand(in, dir + "/mut.pftrace", "json", out, err);
    REQUIRE((code == 0 || code == 2));
  }
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
