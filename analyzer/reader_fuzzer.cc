// libFuzzer target: the bytes of one input are a rank file (rank0.pb), fed through everything
// profanalyze runs on untrusted record files:
//   - ScanFile and VisitFile (every field they hand out is read), checked against each other:
//     reader.h promises the same values, errors and FileSummary from both;
//   - `stats` (RunStats);
//   - the report (BuildSummary; the summary rendered as report.md and JSON);
//   - the Perfetto exporter (protobuf sink);
//   - then the report with ops.csv and the JSON exporter on a profile of two rank files, for
//     the cross-rank code: the input split before a second "PROFAGNT" preamble when it holds
//     one, else the file twice.
// Properties checked besides "no crash, no sanitizer report": a bad file is an error whose
// message names the file on one line, the report and the exporter accept exactly the files the
// reader accepts, and no file descriptor outlives an input.
//
// Files live in one directory per process, created at the first input (mkdtemp under $TMPDIR,
// else /tmp) and removed at exit. Build and run: scripts/fuzz.sh. The same entry point is
// linked into //analyzer:reader_fuzzer_corpus_test with reader_fuzzer_replay.cc, which replays
// the seed corpus (analyzer/testdata/fuzz_corpus) under the normal toolchain.
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analyzer/perfetto/perfetto.h"
#include "analyzer/reader.h"
#include "analyzer/report/analysis.h"
#include "analyzer/report/report.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  fprintf(stderr, "reader_fuzzer: property violated: %s\n", what.c_str());
  fflush(stderr);
  abort();
}

void Require(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

// The per-process scratch directory; its files are rewritten by every input.
class Workdir {
 public:
  Workdir() {
    const char* base = getenv("TMPDIR");
    std::string templ = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp",
                                     "/reader_fuzzer.XXXXXX");
    if (mkdtemp(&templ[0]) == nullptr) {
      fprintf(stderr, "reader_fuzzer: mkdtemp %s: %s\n", templ.c_str(), strerror(errno));
      abort();
    }
    dir_ = templ;
  }
  ~Workdir() {
    if (DIR* d = opendir(dir_.c_str())) {
      std::vector<std::string> names;
      while (dirent* e = readdir(d)) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
          names.push_back(e->d_name);
        }
      }
      closedir(d);
      for (const std::string& n : names) unlink(Path(n).c_str());
    }
    rmdir(dir_.c_str());
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

const Workdir& Dir() {
  static const Workdir dir;  // destroyed at exit: the directory goes with it
  static const bool quiet = [] {
    // Hostile strings make protobuf log "invalid UTF-8" for every input: not a finding, and
    // slow. The parse still fails, which is what the readers handle.
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  return dir;
}

void WriteInput(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
    done += size_t(n);
  }
  close(fd);
}

// The number of open file descriptors (libFuzzer keeps some of its own between inputs, e.g.
// the pipes to its symbolizer: only a change within one input counts).
int OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

// What a reader hands out, one 64-bit digest per event, op or record (FNV-1a), in order.
class Digest {
 public:
  void Begin() { h_ = 0xcbf29ce484222325ull; }
  void End() { items_.push_back(h_); }
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(uint8_t(v >> (8 * i)));
  }
  void Add(absl::string_view s) {
    Add(uint64_t(s.size()));
    for (char c : s) Byte(uint8_t(c));
  }
  void AddDouble(double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    Add(bits);
  }
  const std::vector<uint64_t>& items() const { return items_; }

 private:
  void Byte(uint8_t b) { h_ = (h_ ^ b) * 0x100000001b3ull; }
  uint64_t h_ = 0;
  std::vector<uint64_t> items_;
};

// A message's bytes in a fixed order (map entries sorted), to compare the two readers.
std::string Serialized(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

// The canonical bytes of a sub-message, for comparing ScanFile's raw bytes with VisitFile's
// parsed message. A parse failure is its own value (ScanFile promised a well-formed message).
template <typename Message>
std::string Canonical(absl::string_view raw) {
  Message m;
  if (!m.ParseFromArray(raw.data(), int(raw.size()))) return "<unparsable>";
  return Serialized(m);
}

// The records both visitors see besides events and ops, digested the same way.
void AddRecord(Digest* d, const Record& r) {
  d->Begin();
  d->Add(uint64_t(r.kind_case()));
  switch (r.kind_case()) {
    case Record::kHeader:
      d->Add(Serialized(r.header()));
      break;
    case Record::kString:
      d->Add(uint64_t(r.string().id()));
      d->Add(r.string().value());
      break;
    default:
      d->Add(Serialized(r));
      break;
  }
  d->End();
}

void AddEventFields(Digest* d, uint32_t thread, uint64_t start, uint64_t end, uint64_t corr,
                    int kind, uint32_t name, uint32_t stream, uint32_t api, uint32_t device,
                    uint32_t stack, uint32_t copy_kind, int32_t ret, bool has_shape,
                    const uint32_t grid[3], const uint32_t block[3], uint32_t shmem,
                    uint64_t bytes, uint64_t ptr, uint64_t graph, uint64_t handle,
                    uint32_t domain, uint32_t category, uint32_t color, uint32_t depth,
                    int64_t payload_i, double payload_f, bool has_payload) {
  for (uint64_t v : {uint64_t(thread), start, end, corr, uint64_t(int64_t(kind)), uint64_t(name),
                     uint64_t(stream), uint64_t(api), uint64_t(device), uint64_t(stack),
                     uint64_t(copy_kind), uint64_t(int64_t(ret)), uint64_t(has_shape),
                     uint64_t(grid[0]), uint64_t(grid[1]), uint64_t(grid[2]),
                     uint64_t(block[0]), uint64_t(block[1]), uint64_t(block[2]),
                     uint64_t(shmem), bytes, ptr, graph, handle, uint64_t(domain),
                     uint64_t(category), uint64_t(color), uint64_t(depth), uint64_t(payload_i),
                     uint64_t(has_payload)}) {
    d->Add(v);
  }
  d->AddDouble(payload_f);
}

void AddOpFields(Digest* d, uint32_t device, uint64_t start, uint64_t end, uint64_t corr,
                 int kind, uint32_t name, uint32_t stream, uint32_t copy_kind, uint32_t context,
                 uint64_t bytes, uint64_t graph, uint64_t raw_start, const uint32_t grid[3],
                 const uint32_t block[3]) {
  for (uint64_t v : {uint64_t(device), start, end, corr, uint64_t(int64_t(kind)), uint64_t(name),
                     uint64_t(stream), uint64_t(copy_kind), uint64_t(context), bytes, graph,
                     raw_start, uint64_t(grid[0]), uint64_t(grid[1]), uint64_t(grid[2]),
                     uint64_t(block[0]), uint64_t(block[1]), uint64_t(block[2])}) {
    d->Add(v);
  }
}

class ScanDigest : public ViewVisitor {
 public:
  void OnEvent(const EventView& e) override {
    d_.Begin();
    d_.Add(uint64_t{'E'});
    AddEventFields(&d_, e.thread, e.start_ns, e.end_ns, e.corr, e.kind, e.name, e.stream, e.api,
                   e.device, e.stack, e.copy_kind, e.ret, e.has_shape, e.grid, e.block, e.shmem,
                   e.bytes, e.ptr, e.graph, e.handle, e.domain, e.category, e.color, e.depth,
                   e.payload_i, e.payload_f, e.has_payload);
    d_.Add(Canonical<Collective>(e.coll));
    d_.Add(Canonical<StepInfo>(e.step));
    d_.End();
  }
  void OnOp(const OpView& o) override {
    d_.Begin();
    d_.Add(uint64_t{'O'});
    AddOpFields(&d_, o.device, o.start_ns, o.end_ns, o.corr, o.kind, o.name, o.stream,
                o.copy_kind, o.context, o.bytes, o.graph, o.raw_start, o.grid, o.block);
    d_.End();
  }
  void OnRecord(const Record& r) override { AddRecord(&d_, r); }
  const std::vector<uint64_t>& items() const { return d_.items(); }

 private:
  Digest d_;
};

class VisitDigest : public Visitor {
 public:
  void OnHeader(const Header& h) override {
    Record r;
    *r.mutable_header() = h;
    AddRecord(&d_, r);
  }
  void OnString(uint32_t id, const std::string& value) override {
    d_.Begin();
    d_.Add(uint64_t(Record::kString));
    d_.Add(uint64_t(id));
    d_.Add(value);
    d_.End();
  }
  void OnHostEvent(const HostEvent& h) override {
    const Event& e = *h.ev;
    const uint32_t grid[3] = {e.grid_x(), e.grid_y(), e.grid_z()};
    const uint32_t block[3] = {e.block_x(), e.block_y(), e.block_z()};
    d_.Begin();
    d_.Add(uint64_t{'E'});
    AddEventFields(&d_, h.thread, h.start_ns, h.end_ns, h.corr, e.kind(), e.name(), e.stream(),
                   e.api(), e.device(), e.stack(), e.copy_kind(), e.ret(), e.has_grid_x(), grid,
                   block, e.shmem(), e.bytes(), e.ptr(), e.graph(), e.handle(), e.domain(),
                   e.category(), e.color(), e.depth(), e.payload_i(), e.payload_f(),
                   e.has_payload());
    d_.Add(e.has_coll() ? Serialized(e.coll()) : std::string());
    d_.Add(e.has_step() ? Serialized(e.step()) : std::string());
    d_.End();
  }
  void OnDeviceOp(const DeviceOpEvent& dev) override {
    const DeviceOp& o = *dev.op;
    const uint32_t grid[3] = {o.grid_x(), o.grid_y(), o.grid_z()};
    const uint32_t block[3] = {o.block_x(), o.block_y(), o.block_z()};
    d_.Begin();
    d_.Add(uint64_t{'O'});
    AddOpFields(&d_, dev.device, dev.start_ns, dev.end_ns, dev.corr, o.kind(), o.name(),
                o.stream(), o.copy_kind(), o.context(), o.bytes(), o.graph(), o.raw_start(), grid,
                block);
    d_.End();
  }
  void OnOther(const Record& r) override { AddRecord(&d_, r); }
  const std::vector<uint64_t>& items() const { return d_.items(); }

 private:
  Digest d_;
};

std::string Describe(const FileSummary& s) {
  return absl::StrCat("{frames ", s.frames, ", host events ", s.host_events, ", device ops ",
                      s.device_ops, ", truncated ", s.truncated, ", footer ", s.has_footer,
                      ", warning '", s.warning, "'}");
}

// A bad input is reported as one line that names the file (one of `paths`).
void RequireGoodError(const absl::Status& s, const std::vector<std::string>& paths,
                      const char* who) {
  if (s.ok()) return;
  const std::string msg(s.message());
  bool named = false;
  for (const std::string& p : paths) named |= absl::StartsWith(msg, p);
  Require(named && msg.find('\n') == std::string::npos,
          absl::StrCat(who, ": error does not name the file on one line: ", msg));
}

// ScanFile and VisitFile on `path` must agree (reader.h); returns whether the file is good.
bool CheckReaders(const std::string& path) {
  ScanDigest scan;
  VisitDigest visit;
  FileSummary ss, vs;
  const absl::Status scan_status = ScanFile(path, &scan, &ss);
  const absl::Status visit_status = VisitFile(path, &visit, &vs);
  RequireGoodError(scan_status, {path}, "ScanFile");
  Require(scan_status == visit_status,
          absl::StrCat("ScanFile and VisitFile disagree: '", scan_status.ToString(), "' vs '",
                       visit_status.ToString(), "'"));
  Require(ss.frames == vs.frames && ss.host_events == vs.host_events &&
              ss.device_ops == vs.device_ops && ss.truncated == vs.truncated &&
              ss.has_footer == vs.has_footer && ss.warning == vs.warning,
          absl::StrCat("ScanFile and VisitFile summaries differ: ", Describe(ss), " vs ",
                       Describe(vs)));
  // On a corrupt batch ScanFile may have handed out its leading events (reader.h).
  const std::vector<uint64_t>& a = scan.items();
  const std::vector<uint64_t>& b = visit.items();
  const bool same = scan_status.ok() ? a == b
                                     : a.size() >= b.size() && std::equal(b.begin(), b.end(),
                                                                          a.begin());
  if (!same) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    Fail(absl::StrCat("ScanFile and VisitFile hand out different values from item ", i,
                      " (of ", a.size(), " and ", b.size(), ")"));
  }
  return scan_status.ok();
}

void FuzzOne(const uint8_t* data, size_t size) {
  const Workdir& dir = Dir();
  const std::string path = dir.Path("rank0.pb");
  WriteInput(path, data, size);

  // Everything on the input as one rank file.
  const bool good = CheckReaders(path);

  auto stats = RunStats(path);  // profanalyze stats
  RequireGoodError(stats.status(), {path}, "RunStats");
  Require(stats.ok() == good, "stats and the reader disagree on the file");

  ReportOptions opt;  // profanalyze report, without ops.csv
  opt.threads = 1;
  auto summary = BuildSummary({path}, opt, "");
  RequireGoodError(summary.status(), {path}, "BuildSummary");
  Require(summary.ok() == good, "the report and the reader disagree on the file");
  if (summary.ok()) {
    volatile size_t sink = RenderMarkdown(*summary).size() + ShortSummary(*summary).size() +
                           summary->dump(2).size();
    (void)sink;
  }

  ExportOptions eo;  // profanalyze perfetto
  eo.threads = 1;
  eo.counter_window = 4;  // small: the reorder window fills and drains
  ExportStats es;
  const absl::Status proto_status = ExportTrace({path}, dir.Path("trace.pftrace"), eo, &es);
  RequireGoodError(proto_status, {path}, "ExportTrace (protobuf)");
  Require(proto_status.ok() == good, "the exporter and the reader disagree on the file");

  // Then as a profile of two rank files, for what merges ranks (clock alignment, stragglers,
  // ops.csv parts): the input split before a second preamble ("PROFAGNT" at offset k > 0:
  // the dictionary offers it), else the same file twice.
  std::vector<std::string> files = {path, path};
  bool good2 = good;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t k = size > 1 ? bytes.find(absl::string_view(kMagic, sizeof(kMagic)), 1)
                            : absl::string_view::npos;
  if (k != absl::string_view::npos) {
    files = {dir.Path("split0.pb"), dir.Path("split1.pb")};
    WriteInput(files[0], data, k);
    WriteInput(files[1], data + k, size - k);
    good2 = CheckReaders(files[0]);
    good2 &= CheckReaders(files[1]);
  }
  ReportOptions opt2;
  opt2.threads = 1;
  opt2.warmup_runs = 1;
  opt2.patterns_explicit = true;  // steps and runs re-derived from NVTX ranges
  opt2.kv_reduce = "p90";
  auto summary2 = BuildSummary(files, opt2, dir.Path("ops.csv"));
  RequireGoodError(summary2.status(), files, "BuildSummary (two files, ops.csv)");
  Require(summary2.ok() == good2, "the two-file report and the reader disagree on the files");
  if (summary2.ok()) {
    volatile size_t sink = RenderMarkdown(*summary2).size() + summary2->dump().size();
    (void)sink;
  }
  eo.format = TraceFormat::kChromeJson;
  const absl::Status json_status = ExportTrace(files, dir.Path("trace.json"), eo, &es);
  RequireGoodError(json_status, files, "ExportTrace (JSON, two files)");
  Require(json_status.ok() == good2, "the two-file exporter and the reader disagree on the files");
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fds = profagent::analyzer::OpenFds();
  profagent::analyzer::FuzzOne(data, size);
  const int now = profagent::analyzer::OpenFds();
  if (now != fds) {
    profagent::analyzer::Fail(absl::StrCat("open file descriptors went from ", fds, " to ", now,
                                           " during the input"));
  }
  return 0;
}
