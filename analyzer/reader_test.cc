// The reader against good, truncated and corrupt files.
#include "analyzer/reader.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

TEST_CASE("profile directories", "[reader]") {
  std::string dir = TempPath("emptydir");
  mkdir(dir.c_str(), 0755);
  auto files = ListProfileFiles(dir);
  CHECK(files.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(files.status().message()).find("no profile files") != std::string::npos);
  CHECK_FALSE(ListProfileFiles(TempPath("nope")).ok());
  WriteFile(dir + "/rank1.pb", Preamble());
  WriteFile(dir + "/rank0.pb", Preamble());
  WriteFile(dir + "/notes.txt", "x");
  files = ListProfileFiles(dir);
  REQUIRE(files.ok());
  REQUIRE(files->size() == 2);
  CHECK((*files)[0] == dir + "/rank0.pb");
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
