// Streaming reader for profagent record files (proto/profagent.proto).
//
// RecordReader reads one frame at a time into a caller-owned Record, with memory bounded by the
// largest frame (frames over kMaxFrameBytes are rejected as corrupt). A file whose last frame is
// cut short is accepted: Next() returns false, truncated() is true and warning() says where.
// Errors (missing file, wrong magic, unknown major version, corrupt length or unparsable frame)
// are absl::Status values whose message names the file and the byte offset.
//
// VisitFile() is the convenient layer on top: it undoes the delta encodings (batch-relative
// times, correlation ids) and hands every host event and device op to a visitor with absolute
// values, plus every other record as is.
//
// ScanFile() is the fast layer for bulk analysis (profanalyze report): the same normalized
// values, but event and device batches are decoded by hand into plain structs (EventView,
// OpView) instead of protobuf messages, about 5x cheaper per record. The two layers are checked
// against each other on arbitrary bytes by analyzer/reader_fuzzer.cc (scripts/fuzz.sh).
//
// Thread safety: a RecordReader is used by one thread; separate readers are independent, so rank
// files can be read in parallel.
#ifndef PROFAGENT_ANALYZER_READER_H_
#define PROFAGENT_ANALYZER_READER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {

constexpr char kMagic[8] = {'P', 'R', 'O', 'F', 'A', 'G', 'N', 'T'};
constexpr uint16_t kSchemaMajor = 1;
// The newest minor version this reader knows (agent/core/version.h); files of any 1.N are read
// (fields a newer minor adds are skipped).
constexpr uint16_t kSchemaMinor = 5;
constexpr uint64_t kMaxFrameBytes = 64ull << 20;
constexpr size_t kFilePreambleBytes = 12;  // magic + major + minor
// Correlation ids the agent assigns itself (CUDA-event timing) start here (agent/core/agent.cc
// kCorrBase); CUPTI's count up from 1.
constexpr uint64_t kAgentCorrBase = 0x80000000u;

class RecordReader {
 public:
  // Opens `path` and checks the preamble. An empty file, a wrong magic or an unknown major
  // version is an error.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path);
  ~RecordReader();

  // Reads the next Record into *rec. Returns true when one was read, false at the end of the
  // file (cleanly, or at a truncated last frame: see truncated()), or an error.
  absl::StatusOr<bool> Next(Record* rec);

  // Like Next(), without parsing: *frame receives the serialized Record, valid until the next
  // call. For fast scans that decode only some fields (analyzer/report's first pass).
  absl::StatusOr<bool> NextFrame(absl::string_view* frame);

  const std::string& path() const { return path_; }
  uint16_t major() const { return major_; }
  uint16_t minor() const { return minor_; }
  uint64_t offset() const { return offset_; }         // byte offset of the next frame
  uint64_t records() const { return records_; }       // frames read so far
  bool truncated() const { return truncated_; }
  const std::string& warning() const { return warning_; }

 private:
  RecordReader(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  int ReadByte();

  std::string path_;
  FILE* f_;
  uint16_t major_ = 0, minor_ = 0;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;
  uint64_t last_frame_start_ = 0;
  bool truncated_ = false;
  std::string warning_;
  std::string buf_;
};

// True for the event kinds that carry a correlation id (see EventKind in the proto). Inline:
// ScanFile asks for every event.
inline bool KindHasCorr(EventKind k) {
  return k == EV_LAUNCH || k == EV_MEMCPY || k == EV_MEMSET || k == EV_GRAPH_LAUNCH;
}

struct HostEvent {
  uint32_t thread;
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t corr;          // 0 when the kind carries none
  // Valid during the callback only. Normalized: for EV_LAUNCH the sticky stream/api fields are
  // filled in and grid/block dimensions hold their real values (not the value-1 encoding).
  const Event* ev;
};

struct DeviceOpEvent {
  uint32_t device;
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t corr;
  const DeviceOp* op;     // valid during the callback only
};

class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void OnHeader(const Header& h) {}
  virtual void OnString(uint32_t id, const std::string& value) {}
  virtual void OnHostEvent(const HostEvent& e) {}
  virtual void OnDeviceOp(const DeviceOpEvent& d) {}
  // Every record that is not a header, string, event batch or device batch.
  virtual void OnOther(const Record& r) {}
};

struct FileSummary {
  std::string path;
  uint16_t major = 0, minor = 0;
  uint64_t frames = 0;
  uint64_t host_events = 0;
  uint64_t device_ops = 0;
  bool truncated = false;
  bool has_header = false;
  bool has_footer = false;
  std::string warning;
};

// Reads `path` to the end, calling `v` for each record in file order. Returns the error of the
// first bad frame (after having visited every good one before it).
absl::Status VisitFile(const std::string& path, Visitor* v, FileSummary* summary);

// A host event as ScanFile hands it out: every field of Event with VisitFile's normalization
// (absolute times and correlation id, sticky launch stream/api and repeated launch shapes filled
// in, real grid/block dimensions). Sub-messages stay serialized (checked well-formed): parse
// `coll` / `step` with Collective / StepInfo::ParseFromArray when needed (they are rare).
struct EventView {
  uint32_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t corr = 0;  // 0 when the kind carries none
  EventKind kind = EV_LAUNCH;
  uint32_t name = 0, stream = 0, api = 0, device = 0, stack = 0, copy_kind = 0;
  int32_t ret = 0;
  bool has_shape = false;  // EV_LAUNCH: grid/block/shmem are known (written or repeated)
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, shmem = 0;
  uint64_t bytes = 0, ptr = 0, graph = 0, handle = 0;
  uint32_t domain = 0, category = 0, color = 0, depth = 0;
  int64_t payload_i = 0;
  double payload_f = 0;
  bool has_payload = false;
  bool payload_double = false;  // the payload is payload_f (an NVTX float/double payload)
  bool captured = false;  // made on a stream being captured into a CUDA graph (Event.captured)
  // EV_API poll runs (Event.calls/busy): how many calls this event stands for (>= 1), and for
  // a run of several, the ns spent inside them (else 0: the event's duration).
  uint64_t calls = 1, busy_ns = 0;
  uint64_t source_graph = 0;  // cudaGraphInstantiate*: the graph instantiated (Event.source_graph)
  bool start_end = false;     // NVTX range from nvtxRangeStart/End (Event.start_end)
  uint32_t start_thread = 0;  // its starting thread when another (Event.start_thread), else 0
  uint64_t graph_node = 0, source_graph_node = 0;  // EV_GRAPH_NODE
  absl::string_view coll, step;  // serialized Collective / StepInfo; empty when absent
};

// What an EV_ALLOC/EV_FREE allocates or frees, unique among the live allocations of a process:
// the pointer, or for physical memory of the driver's virtual memory management (MEM_VMM) its
// handle, kept apart from pointers (user-space addresses never have the top bit set).
inline uint64_t MemoryKey(const EventView& e) {
  return e.copy_kind == MEM_VMM ? (e.ptr | (1ull << 63)) : e.ptr;
}

// A device op as ScanFile hands it out (absolute times and correlation id).
struct OpView {
  uint32_t device = 0;
  uint64_t start_ns = 0, end_ns = 0, corr = 0;
  DeviceOpKind kind = DOP_KERNEL;
  uint32_t name = 0, stream = 0, copy_kind = 0, context = 0;
  uint64_t bytes = 0, graph = 0, raw_start = 0;
  uint64_t graph_node = 0;  // the graph node that ran it (DeviceOp.graph_node), 0 = none
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
};

class ViewVisitor {
 public:
  virtual ~ViewVisitor() = default;
  virtual void OnEvent(const EventView& e) {}
  virtual void OnOp(const OpView& op) {}
  // Every record that is not an event or device batch (header, strings, footer, ...).
  virtual void OnRecord(const Record& r) {}
};

// VisitFile's fast sibling: same order, same errors, same FileSummary. Views are valid during
// the callback only. One difference on a corrupt batch: VisitFile hands out nothing of it,
// ScanFile decodes while it hands out and may already have handed out the batch's leading
// events (or ops) when it finds the corruption and returns the error (the FileSummary counts
// only complete batches, as VisitFile's).
absl::Status ScanFile(const std::string& path, ViewVisitor* v, FileSummary* summary);

// The rank files of a profile directory (*.pb, sorted by name). Error if `dir` is not a readable
// directory or holds no .pb file.
absl::StatusOr<std::vector<std::string>> ListProfileFiles(const std::string& dir);
// The same, leaving out (into `skipped`, one line each) files that hold no complete header yet:
// empty, or cut inside the preamble or the header record (the agent creates its file, then
// writes the header at its first flush: a process that died in between leaves one). The
// one-argument form prints those lines to stderr. Error when no file is left.
absl::StatusOr<std::vector<std::string>> ListProfileFiles(const std::string& dir,
                                                          std::vector<std::string>* skipped);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_READER_H_
