// The reader against good, truncated and corrupt files.
#include "analyzer/reader.h"

#include <algorithm>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace profagent {
namespace analyzer {
namespace {

std::string TempPath(const std::string& name) {
  const char* base = getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(char(v | 0x80));
    v >>= 7;
  }
  s->push_back(char(v));
}

std::string Preamble(uint16_t major = kSchemaMajor, uint16_t minor = 0) {
  std::string s(kMagic, 8);
  s.push_back(char(major & 0xff));
  s.push_back(char(major >> 8));
  s.push_back(char(minor & 0xff));
  s.push_back(char(minor >> 8));
  return s;
}

void AddRecord(std::string* file, const Record& r) {
  std::string body;
  r.SerializeToString(&body);
  PutVarint(file, body.size());
  file->append(body);
}

// A small file: header, two strings, a batch of 3 events, a device batch, a footer.
std::string SmallFile(std::vector<size_t>* frame_ends) {
  std::string f = Preamble();
  frame_ends->push_back(f.size());
  Record r;
  r.mutable_header()->set_pid(42);
  r.mutable_header()->set_hostname("node1");
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  r.Clear();
  r.mutable_string()->set_id(1);
  r.mutable_string()->set_value("gemm_kernel");
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  r.Clear();
  EventBatch* b = r.mutable_batch();
  b->set_thread(1);
  b->set_base_ns(1000000);
  b->set_corr_base(9);
  for (int i = 0; i < 3; ++i) {
    Event* e = b->add_events();
    e->set_dt(i == 0 ? 0 : 500);
    e->set_dur(200);
    e->set_name(1);
    e->set_kind(EV_LAUNCH);
    if (i == 0) e->set_stream(2);
    e->set_grid_x(8);
    e->set_block_x(128);
  }
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  r.Clear();
  DeviceBatch* d = r.mutable_device();
  d->set_base_ns(1000300);
  d->set_corr_base(9);
  DeviceOp* op = d->add_ops();
  op->set_dur(1000);
  op->set_name(1);
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  r.Clear();
  r.mutable_footer()->set_records(4);
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  return f;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o.write(bytes.data(), std::streamsize(bytes.size()));
}

class Counter : public Visitor {
 public:
  int headers = 0, strings = 0, events = 0, ops = 0, others = 0;
  std::vector<HostEvent> ev;
  std::vector<uint32_t> streams;
  void OnHeader(const Header&) override { ++headers; }
  void OnString(uint32_t, const std::string&) override { ++strings; }
  void OnHostEvent(const HostEvent& e) override {
    ++events;
    ev.push_back(e);
    streams.push_back(e.ev->stream());
  }
  void OnDeviceOp(const DeviceOpEvent&) override { ++ops; }
  void OnOther(const Record&) override { ++others; }
  int total() const { return headers + strings + (events > 0) + (ops > 0) + others; }
};

TEST_CASE("a complete file is read with absolute times and correlations", "[reader]") {
  std::vector<size_t> ends;
  std::string path = TempPath("good.pb");
  WriteFile(path, SmallFile(&ends));
  Counter c;
  FileSummary s;
  REQUIRE(VisitFile(path, &c, &s).ok());
  CHECK(s.frames == 5);
  CHECK_FALSE(s.truncated);
  CHECK(s.has_footer);
  REQUIRE(c.events == 3);
  CHECK(c.ev[0].start_ns == 1000000);
  CHECK(c.ev[1].start_ns == 1000500);
  CHECK(c.ev[2].start_ns == 1001000);
  CHECK(c.ev[2].end_ns == 1001200);
  CHECK(c.ev[0].corr == 10);
  CHECK(c.ev[2].corr == 12);
  // Sticky launch stream.
  CHECK(c.streams == std::vector<uint32_t>{2, 2, 2});
  CHECK(c.ops == 1);
}

TEST_CASE("truncation at every byte offset keeps the complete prefix", "[reader]") {
  std::vector<size_t> ends;
  std::string full = SmallFile(&ends);
  std::string path = TempPath("trunc.pb");
  for (size_t cut = 0; cut < full.size(); ++cut) {
    WriteFile(path, full.substr(0, cut));
    Counter c;
    FileSummary s;
    absl::Status st = VisitFile(path, &c, &s);
    if (cut < 12) {
      // Preamble incomplete: an error naming the file, never a crash.
      REQUIRE_FALSE(st.ok());
      CHECK(std::string(st.message()).find(path) != std::string::npos);
      continue;
    }
    if (cut < ends[1]) {
      // The header (the first record) incomplete: nothing attributable, an error (before: a
      // profile of "rank 0, pid 0, host ?").
      INFO("cut at " << cut);
      REQUIRE_FALSE(st.ok());
      CHECK(std::string(st.message()) ==
            path + ": no header record (the file ends before its first record)");
      continue;
    }
    INFO("cut at " << cut);
    REQUIRE(st.ok());
    size_t complete = 0;
    while (complete + 1 < ends.size() && ends[complete + 1] <= cut) ++complete;
    CHECK(s.frames == complete);
    bool at_boundary = false;
    for (size_t e : ends) at_boundary |= (e == cut);
    CHECK(s.truncated == !at_boundary);
    if (s.truncated) {
      CHECK(s.warning.find("truncated") != std::string::npos);
      CHECK(s.warning.find(path) != std::string::npos);
    }
  }
}

TEST_CASE("bad files give errors naming the file and offset", "[reader]") {
  std::vector<size_t> ends;
  std::string full = SmallFile(&ends);
  std::string path = TempPath("bad.pb");

  WriteFile(path, "");
  auto st = VisitFile(path, nullptr, nullptr);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).find("empty") != std::string::npos);

  std::string wrong_magic = full;
  wrong_magic[0] = 'X';
  WriteFile(path, wrong_magic);
  Counter c;
  st = VisitFile(path, &c, nullptr);
  CHECK(std::string(st.message()).find("bad magic") != std::string::npos);
  CHECK(std::string(st.message()).find(path) != std::string::npos);

  std::string v2 = Preamble(2, 0) + full.substr(12);
  WriteFile(path, v2);
  st = VisitFile(path, &c, nullptr);
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(st.message()).find("major version 2") != std::string::npos);

  // A newer minor version is fine.
  WriteFile(path, Preamble(1, 7) + full.substr(12));
  Counter ok;
  CHECK(VisitFile(path, &ok, nullptr).ok());
  CHECK(ok.events == 3);

  // Corrupt length: 10 bytes of 0xff is a varint over 63 bits.
  std::string corrupt = full.substr(0, ends[2]) + std::string(10, char(0xff)) + full.substr(ends[2]);
  WriteFile(path, corrupt);
  Counter c2;
  st = VisitFile(path, &c2, nullptr);
  REQUIRE_FALSE(st.ok());
  CHECK(std::string(st.message()).find("offset " + std::to_string(ends[2])) != std::string::npos);
  CHECK(c2.strings == 1);  // records before the corrupt frame were visited

  // Huge length.
  std::string huge = full.substr(0, ends[1]);
  PutVarint(&huge, 1ull << 40);
  huge += "xxxx";
  WriteFile(path, huge);
  st = VisitFile(path, &c2, nullptr);
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(st.message()).find("corrupt frame length") != std::string::npos);

  // Garbage body (not a Record).
  std::string garbage = full.substr(0, ends[1]);
  PutVarint(&garbage, 3);
  garbage += "\xff\xff\xff";
  WriteFile(path, garbage);
  st = VisitFile(path, &c2, nullptr);
  CHECK(st.code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(st.message()).find("corrupt record") != std::string::npos);

  st = VisitFile(TempPath("does-not-exist.pb"), &c2, nullptr);
  CHECK(st.code() == absl::StatusCode::kNotFound);
  CHECK(VisitFile(TempPath(""), &c2, nullptr).code() == absl::StatusCode::kInvalidArgument);
}

// Every event and op of a file, as text, through VisitFile or ScanFile: the two must agree.
std::string Describe(const HostEvent& h) {
  const Event& e = *h.ev;
  std::string c, st;
  e.coll().SerializeToString(&c);
  e.step().SerializeToString(&st);
  return absl::StrCat(
      "E ", h.thread, " ", h.start_ns, " ", h.end_ns, " ", h.corr, " k", e.kind(), " n", e.name(),
      " s", e.stream(), " a", e.api(), " d", e.device(), " st", e.stack(), " ck", e.copy_kind(),
      " r", e.ret(), " shape", e.has_grid_x(), ":", e.grid_x(), "x", e.grid_y(), "x", e.grid_z(),
      "/", e.block_x(), "x", e.block_y(), "x", e.block_z(), "/", e.shmem(), " b", e.bytes(), " p",
      e.ptr(), " g", e.graph(), " h", e.handle(), " nvtx", e.domain(), ",", e.category(), ",",
      e.color(), ",", e.depth(), ",", e.payload_i(), ",", e.payload_f(), ",", e.has_payload(),
      " coll", c.size(), ":", absl::CEscape(c), " step", st.size(), ":", absl::CEscape(st),
      " cap", e.captured(), " calls", std::max<uint64_t>(1, e.calls()), ":", e.busy(), " sg",
      e.source_graph(), " se", e.start_end());
}

std::string Describe(const EventView& e) {
  return absl::StrCat(
      "E ", e.thread, " ", e.start_ns, " ", e.end_ns, " ", e.corr, " k", e.kind, " n", e.name,
      " s", e.stream, " a", e.api, " d", e.device, " st", e.stack, " ck", e.copy_kind, " r",
      e.ret, " shape", e.has_shape, ":", e.grid[0], "x", e.grid[1], "x", e.grid[2], "/",
      e.block[0], "x", e.block[1], "x", e.block[2], "/", e.shmem, " b", e.bytes, " p", e.ptr,
      " g", e.graph, " h", e.handle, " nvtx", e.domain, ",", e.category, ",", e.color, ",",
      e.depth, ",", e.payload_i, ",", e.payload_f, ",", e.has_payload, " coll", e.coll.size(),
      ":", absl::CEscape(e.coll), " step", e.step.size(), ":", absl::CEscape(e.step), " cap",
      e.captured, " calls", e.calls, ":", e.busy_ns, " sg", e.source_graph, " se", e.start_end);
}

std::string DescribeOp(uint32_t device, uint64_t start, uint64_t end, uint64_t corr, int kind,
                       uint32_t name, uint32_t stream, uint64_t bytes, uint32_t copy_kind,
                       uint64_t graph, const uint32_t grid[3], const uint32_t block[3],
                       uint32_t context, uint64_t raw_start) {
  return absl::StrCat("O ", device, " ", start, " ", end, " ", corr, " k", kind, " n", name,
                      " s", stream, " b", bytes, " ck", copy_kind, " g", graph, " ", grid[0], "x",
                      grid[1], "x", grid[2], "/", block[0], "x", block[1], "x", block[2], " c",
                      context, " raw", raw_start);
}

class VisitLog : public Visitor {
 public:
  std::vector<std::string> lines;
  void OnHostEvent(const HostEvent& e) override { lines.push_back(Describe(e)); }
  void OnDeviceOp(const DeviceOpEvent& d) override {
    const DeviceOp& o = *d.op;
    const uint32_t grid[3] = {o.grid_x(), o.grid_y(), o.grid_z()};
    const uint32_t block[3] = {o.block_x(), o.block_y(), o.block_z()};
    lines.push_back(DescribeOp(d.device, d.start_ns, d.end_ns, d.corr, o.kind(), o.name(),
                               o.stream(), o.bytes(), o.copy_kind(), o.graph(), grid, block,
                               o.context(), o.raw_start()));
  }
  void OnHeader(const Header&) override { lines.push_back("header"); }
  void OnString(uint32_t id, const std::string& v) override {
    lines.push_back(absl::StrCat("string ", id, " ", v));
  }
  void OnOther(const Record& r) override { lines.push_back(absl::StrCat("other ", r.kind_case())); }
};

class ScanLog : public ViewVisitor {
 public:
  std::vector<std::string> lines;
  void OnEvent(const EventView& e) override { lines.push_back(Describe(e)); }
  void OnOp(const OpView& o) override {
    lines.push_back(DescribeOp(o.device, o.start_ns, o.end_ns, o.corr, o.kind, o.name, o.stream,
                               o.bytes, o.copy_kind, o.graph, o.grid, o.block, o.context,
                               o.raw_start));
  }
  void OnRecord(const Record& r) override {
    if (r.kind_case() == Record::kHeader) {
      lines.push_back("header");
    } else if (r.kind_case() == Record::kString) {
      lines.push_back(absl::StrCat("string ", r.string().id(), " ", r.string().value()));
    } else {
      lines.push_back(absl::StrCat("other ", r.kind_case()));
    }
  }
};

// Every field and encoding: launch shapes written, repeated and absent, sticky stream/api,
// NVTX fields, sub-messages, negative deltas, a batch framed as two fields (protobuf merges).
std::string RichFile(std::vector<size_t>* frame_ends) {
  std::string f = SmallFile(frame_ends);
  Record r;
  EventBatch* b = r.mutable_batch();
  b->set_thread(7);
  b->set_base_ns(5000000);
  b->set_corr_base(100);
  auto add = [&](EventKind k, int64_t dt, uint64_t dur, uint32_t name) {
    Event* e = b->add_events();
    e->set_kind(k);
    e->set_dt(dt);
    e->set_dur(dur);
    e->set_name(name);
    return e;
  };
  Event* e = add(EV_LAUNCH, 0, 10, 1);
  e->set_stream(3);
  e->set_api(9);
  e->set_grid_x(4);
  e->set_grid_y(1);
  e->set_block_z(2);
  e->set_shmem(1024);
  add(EV_LAUNCH, 300, 10, 1)->set_dcorr(2);  // repeats the shape, stream and api
  e = add(EV_LAUNCH, -100, 10, 2);           // no shape known for name 2
  e->set_stack(5);
  e = add(EV_LAUNCH, 50, 10, 2);
  e->set_grid_x(0);  // written shape of zeros
  e = add(EV_NVTX_RANGE, 1000, 5000, 1);
  e->set_domain(3);
  e->set_category(4);
  e->set_color(0xff00ff);
  e->set_depth(2);
  e->set_payload_i(-7);
  e->set_payload_f(2.5);
  e->set_has_payload(true);
  add(EV_NVTX_RANGE, 10, 300, 1)->set_start_end(true);
  e = add(EV_COLLECTIVE, 10, 70, 1);
  e->mutable_coll()->set_op(1);
  e->mutable_coll()->set_seq(42);
  e->mutable_coll()->set_peer(-1);
  e = add(EV_STEP, 10, 80, 0);
  e->mutable_step()->set_tokens(8);
  e->mutable_step()->set_kv(-1);
  e = add(EV_ALLOC, 10, 5, 0);
  e->set_ptr(0xdeadbeef);
  e->set_bytes(1 << 20);
  e->set_device(1);
  e->set_ret(-3);
  e = add(EV_MEMCPY, 10, 5, 0);
  e->set_copy_kind(2);
  e->set_dcorr(-1);
  e = add(EV_STREAM, 10, 0, 0);
  e->set_handle(0x1234);
  add(EV_GRAPH_LAUNCH, 10, 0, 0)->set_graph(77);
  e = add(EV_API, 10, 900, 3);  // a run of polls
  e->set_ret(600);
  e->set_calls(7);
  e->set_busy(99);
  add(EV_LAUNCH, 10, 0, 1)->set_captured(true);
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  r.Clear();
  DeviceBatch* d = r.mutable_device();
  d->set_device(2);
  d->set_base_ns(6000000);
  d->set_corr_base(100);
  for (int i = 0; i < 3; ++i) {
    DeviceOp* op = d->add_ops();
    op->set_dt(i == 1 ? -20 : 30);
    op->set_dur(15);
    op->set_kind(i == 2 ? DOP_MEMCPY : DOP_KERNEL);
    op->set_name(1);
    op->set_dcorr(i);
    op->set_stream(4);
    op->set_bytes(i * 10);
    op->set_copy_kind(1);
    op->set_graph(i);
    op->set_grid_x(5);
    op->set_grid_y(6);
    op->set_grid_z(7);
    op->set_block_x(8);
    op->set_block_y(9);
    op->set_block_z(10);
    op->set_context(11);
    op->set_raw_start(12);
  }
  AddRecord(&f, r);
  frame_ends->push_back(f.size());
  // One Record holding the batch field twice: protobuf merges them into one batch.
  Record part;
  part.mutable_batch()->set_thread(8);
  part.mutable_batch()->add_events()->set_dt(3);
  std::string body;
  part.SerializeToString(&body);
  part.mutable_batch()->clear_thread();
  part.mutable_batch()->mutable_events(0)->set_dt(4);
  std::string second;
  part.SerializeToString(&second);
  body += second;
  PutVarint(&f, body.size());
  f += body;
  frame_ends->push_back(f.size());
  return f;
}

TEST_CASE("ScanFile hands out what VisitFile does, at every truncation", "[reader]") {
  std::vector<size_t> ends;
  const std::string full = RichFile(&ends);
  const std::string path = TempPath("rich.pb");
  WriteFile(path, full);
  {
    VisitLog v;
    ScanLog sc;
    FileSummary vs, ss;
    REQUIRE(VisitFile(path, &v, &vs).ok());
    REQUIRE(ScanFile(path, &sc, &ss).ok());
    CHECK(v.lines.size() > 20);
    CHECK(sc.lines == v.lines);
    CHECK(ss.host_events == vs.host_events);
    CHECK(ss.device_ops == vs.device_ops);
    CHECK(ss.frames == vs.frames);
  }
  for (size_t cut = 12; cut < full.size(); ++cut) {
    INFO("cut at " << cut);
    std::string bytes = full.substr(0, cut);
    WriteFile(path, bytes);
    VisitLog v;
    ScanLog sc;
    FileSummary vs, ss;
    absl::Status a = VisitFile(path, &v, &vs), b = ScanFile(path, &sc, &ss);
    CHECK(a == b);
    CHECK(sc.lines == v.lines);
    CHECK(ss.frames == vs.frames);
    CHECK(ss.truncated == vs.truncated);
    CHECK(ss.warning == vs.warning);
  }
}

TEST_CASE("profile directories", "[reader]") {
  std::string dir = TempPath("emptydir");
  mkdir(dir.c_str(), 0755);
  auto files = ListProfileFiles(dir);
  CHECK(files.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(files.status().message()).find("no profile files") != std::string::npos);
  CHECK_FALSE(ListProfileFiles(TempPath("nope")).ok());
  std::vector<size_t> ends;
  const std::string whole = SmallFile(&ends);
  WriteFile(dir + "/rank1.pb", whole);
  WriteFile(dir + "/rank0.pb", whole);
  WriteFile(dir + "/notes.txt", "x");
  files = ListProfileFiles(dir);
  REQUIRE(files.ok());
  REQUIRE(files->size() == 2);
  CHECK((*files)[0] == dir + "/rank0.pb");
  // Files whose process died before its first flush (empty, or cut anywhere before the end of
  // the header record) are left out with a line each; a file cut after its header is kept
  // (read as truncated), and so is one that is not a profile (its own error when read).
  const size_t header_end = ends[1];
  for (size_t cut :
       {size_t(0), size_t(5), kFilePreambleBytes, kFilePreambleBytes + 1, header_end - 1}) {
    INFO("cut at " << cut);
    WriteFile(dir + "/rank2.pb", whole.substr(0, cut));
    std::vector<std::string> skipped;
    files = ListProfileFiles(dir, &skipped);
    REQUIRE(files.ok());
    CHECK(files->size() == 2);
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0] == dir +
                            "/rank2.pb: no complete header (its process ended before its "
                            "first flush); skipped");
  }
  for (const std::string& kept : {whole.substr(0, header_end), whole.substr(0, header_end + 3),
                                  std::string("not a profile at all")}) {
    WriteFile(dir + "/rank2.pb", kept);
    std::vector<std::string> skipped;
    files = ListProfileFiles(dir, &skipped);
    REQUIRE(files.ok());
    CHECK(files->size() == 3);
    CHECK(skipped.empty());
  }
  // Entries named *.pb that are no regular file: skipped with a line each, never read (a FIFO
  // would block the report for ever). A symlink to a profile is read.
  {
    std::string odd = TempPath("odd_entries");
    mkdir(odd.c_str(), 0755);
    WriteFile(odd + "/rank0.pb", whole);
    REQUIRE(mkfifo((odd + "/fifo.pb").c_str(), 0644) == 0);
    REQUIRE(mkdir((odd + "/dir.pb").c_str(), 0755) == 0);
    REQUIRE(symlink((odd + "/missing").c_str(), (odd + "/dangling.pb").c_str()) == 0);
    REQUIRE(symlink((odd + "/rank0.pb").c_str(), (odd + "/link.pb").c_str()) == 0);
    std::vector<std::string> skipped;
    files = ListProfileFiles(odd, &skipped);
    REQUIRE(files.ok());
    CHECK(*files == std::vector<std::string>{odd + "/link.pb", odd + "/rank0.pb"});
    CHECK(skipped == std::vector<std::string>{odd + "/dangling.pb: not a regular file; skipped",
                                              odd + "/dir.pb: not a regular file; skipped",
                                              odd + "/fifo.pb: not a regular file; skipped"});
  }
  // Only headerless files: an error that says so.
  std::string only = TempPath("headerless");
  mkdir(only.c_str(), 0755);
  WriteFile(only + "/rank0.pb", "");
  std::vector<std::string> skipped;
  files = ListProfileFiles(only, &skipped);
  CHECK(std::string(files.status().message()).find("no profile file with a complete header") !=
        std::string::npos);
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
