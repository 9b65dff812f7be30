// Output back ends of the trace exporter: one interface, two encodings.
//
// The converter (perfetto.cc) turns profagent records into track-level calls (a slice on a
// track, an instant, a counter value, a track definition); a TraceSink encodes them:
//   - PerfettoProtoSink: Perfetto's native protobuf (Trace.packet = TracePacket). Each track
//     is its own packet sequence: its first packet (the TrackDescriptor) clears the sequence's
//     incremental state and sets TrackEventDefaults.track_uuid, so events omit the track; event
//     names, annotation keys and repeated annotation strings (launch shapes, copy kinds) are
//     interned per sequence.
//   - ChromeJsonSink: Chrome trace-event JSON ({"traceEvents":[...]}) with ph X/B/i/C/s/f/M.
// Both stream: output is appended to a buffer written to the file descriptor every ~1 MiB, so
// memory does not grow with the trace. Events are written in input order, not time order: both
// formats' readers (trace_processor, the Perfetto UI, chrome://tracing) sort by timestamp on
// import; a slice is written as its begin and end back to back, so equal-timestamp neighbours
// keep a valid nesting under a stable sort.
//
// One export may be split into parts (one per input file, written by parallel workers) that are
// concatenated in order: a part's output depends only on its constructor arguments and calls.
//
// Thread safety: a sink is used by one thread. It does not own the file descriptor.
#ifndef PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_
#define PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyzer/perfetto/proto_encoder.h"

namespace profagent {
namespace analyzer {
namespace perfetto_internal {

// Debug-annotation keys; their spelling is kArgNames[key].
enum ArgKey : uint8_t {
  kArgCorrelation,
  kArgGrid,
  kArgBlock,
  kArgShmem,
  kArgStream,
  kArgDevice,
  kArgBytes,
  kArgCopyKind,
  kArgPtr,
  kArgRet,
  kArgCount,
  kArgSeq,
  kArgPeer,
  kArgComm,
  kArgIndex,
  kArgTokens,
  kArgKv,
  kArgBsz,
  kArgWarmup,
  kArgRun,
  kArgPayload,
  kArgDomain,
  kArgGraph,
  kArgReason,
  kArgKernel,
  kArgApiDur,
  kArgCalls,
  kArgBusyNs,
  kArgSource,
  kArgStreamIndex,
  kArgNumKeys
};
extern const char* const kArgNames[kArgNumKeys];
static_assert(kArgNumKeys < 32, "annotation keys: one bit each in a uint32 and single-byte iids");

// An interned string: `iid` is unique per (input file, string) within its kind (event names,
// annotation string values) and never 0; `str` is the text.
struct Name {
  uint64_t iid;
  std::string_view str;
};

struct Arg {
  // kInterned: a string value repeated across events (`i` holds its iid, `s` its text).
  // kDouble: `i` holds the double's bits.
  enum Kind : uint8_t { kInt, kUint, kStr, kPtr, kInterned, kDouble };
  ArgKey key;
  Kind kind;
  int64_t i;
  std::string_view s;

  static Arg Int(ArgKey k, int64_t v) { return Arg{k, kInt, v, {}}; }
  static Arg Uint(ArgKey k, uint64_t v) { return Arg{k, kUint, static_cast<int64_t>(v), {}}; }
  static Arg Ptr(ArgKey k, uint64_t v) { return Arg{k, kPtr, static_cast<int64_t>(v), {}}; }
  static Arg Str(ArgKey k, std::string_view v) { return Arg{k, kStr, 0, v}; }
  static Arg Double(ArgKey k, double v) {
    int64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return Arg{k, kDouble, bits, {}};
  }
  double AsDouble() const {
    double v;
    memcpy(&v, &i, sizeof(v));
    return v;
  }
  static Arg Interned(ArgKey k, Name v) {
    return Arg{k, kInterned, static_cast<int64_t>(v.iid), v.str};
  }
};

// The iids already interned on a packet sequence: a bitmap for iids below 2^16 (string ids of
// real files are small and dense), a hash set above. (A vector sized by the largest iid let one
// event named by a corrupt string id cost megabytes on every track.)
class IidSet {
 public:
  bool Contains(uint64_t iid) const {
    if (iid >= kBitmapIids) return !large_.empty() && large_.count(iid) != 0;
    return iid / 64 < bits_.size() && ((bits_[iid / 64] >> (iid % 64)) & 1) != 0;
  }
  // False when `iid` was already in.
  bool Insert(uint64_t iid) {
    if (iid >= kBitmapIids) return large_.insert(iid).second;
    if (iid / 64 >= bits_.size()) bits_.resize(std::max<size_t>(iid / 64 + 1, 2 * bits_.size()));
    uint64_t& word = bits_[iid / 64];
    const uint64_t bit = uint64_t{1} << (iid % 64);
    if (word & bit) return false;
    word |= bit;
    return true;
  }

 private:
  static constexpr uint64_t kBitmapIids = 1 << 16;
  std::vector<uint64_t> bits_;
  std::unordered_set<uint64_t> large_;
};

// A track defined on a sink: dense, in definition order.
using TrackId = uint32_t;
constexpr TrackId kNoTrack = ~TrackId{0};

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // Track definitions, each before its first event. `json_pid/json_tid` place non-thread
  // tracks in the JSON output.
  virtual TrackId ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) = 0;
  virtual TrackId ThreadTrack(uint64_t uuid, TrackId parent, int32_t pid, int32_t tid,
                              std::string_view name) = 0;
  virtual TrackId NamedTrack(uint64_t uuid, TrackId parent, std::string_view name,
                             int32_t json_pid, int32_t json_tid) = 0;
  virtual TrackId CounterTrack(uint64_t uuid, TrackId parent, std::string_view name,
                               int32_t json_pid) = 0;

  // A complete slice [start, end] on `track`. flow_out != 0 starts a flow from this slice;
  // flow_in != 0 terminates one at it; flow_in == flow_out != 0: the flow passes through it
  // (arrives, and goes on to the next slice that names it).
  virtual void Slice(TrackId track, uint64_t start, uint64_t end, Name name, const Arg* args,
                     int nargs, uint64_t flow_out, uint64_t flow_in) = 0;
  // A slice whose end was never recorded.
  virtual void OpenSlice(TrackId track, uint64_t start, Name name, const Arg* args,
                         int nargs) = 0;
  // An instant; flow_out != 0 starts a flow from it, as Slice.
  virtual void Instant(TrackId track, uint64_t ts, Name name, const Arg* args, int nargs,
                       uint64_t flow_out) = 0;
  virtual void Counter(TrackId track, uint64_t ts, int64_t value) = 0;

  // Writes any trailer and the buffered output. Returns false on a write error (errno set).
  virtual bool Finish() = 0;

  uint64_t events() const { return events_; }
  uint64_t bytes_written() const { return bytes_written_; }

 protected:
  explicit TraceSink(int fd) : fd_(fd) {}
  // Writes the buffer out once it holds at least `threshold` bytes.
  void MaybeFlush(size_t threshold) {
    if (buf_.size() >= threshold) Flush();
  }
  void Flush();
  bool FinishOutput();  // flushes; false after any write error

  int fd_;
  ProtoEncoder buf_;  // also used as a plain byte buffer by the JSON sink
  uint64_t events_ = 0;
  uint64_t bytes_written_ = 0;
  int write_errno_ = 0;
};

class PerfettoProtoSink : public TraceSink {
 public:
  // Track k (in definition order) is written as packet sequence first_sequence + k * stride:
  // parts of one export use distinct first sequences below a common stride.
  PerfettoProtoSink(int fd, uint32_t first_sequence, uint32_t sequence_stride)
      : TraceSink(fd), first_sequence_(first_sequence), stride_(sequence_stride) {}

  TrackId ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) override;
  TrackId ThreadTrack(uint64_t uuid, TrackId parent, int32_t pid, int32_t tid,
                      std::string_view name) override;
  TrackId NamedTrack(uint64_t uuid, TrackId parent, std::string_view name, int32_t json_pid,
                     int32_t json_tid) override;
  TrackId CounterTrack(uint64_t uuid, TrackId parent, std::string_view name,
                       int32_t json_pid) override;
  void Slice(TrackId track, uint64_t start, uint64_t end, Name name, const Arg* args, int nargs,
             uint64_t flow_out, uint64_t flow_in) override;
  void OpenSlice(TrackId track, uint64_t start, Name name, const Arg* args, int nargs) override;
  void Instant(TrackId track, uint64_t ts, Name name, const Arg* args, int nargs,
               uint64_t flow_out) override;
  void Counter(TrackId track, uint64_t ts, int64_t value) override;
  bool Finish() override;

 private:
  // One packet sequence per track, with its interning state.
  struct Track {
    uint64_t uuid;
    // trusted_packet_sequence_id and sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE, encoded.
    char seq_fields[8];
    uint8_t seq_fields_len;
    uint32_t arg_names_sent = 0;  // bit per ArgKey
    IidSet names_sent;
    IidSet values_sent;
  };

  // Starts the track's sequence with its descriptor packet; `body` encodes the
  // TrackDescriptor fields after uuid and parent (kNoTrack: none).
  TrackId DefineTrack(uint64_t uuid, TrackId parent, const ProtoEncoder& body);
  // One TrackEvent packet (and, for slices, its end packet right after).
  void EventPacket(TrackId track, uint64_t ts, uint32_t type, Name name, const Arg* args,
                   int nargs, uint64_t flow_out, uint64_t flow_in, const uint64_t* end);
  // Append to interned_ the InternedData entries not yet sent on the track's sequence.
  void InternName(Track& t, Name name);
  void InternArg(Track& t, const Arg& a);

  uint32_t first_sequence_;
  uint32_t stride_;
  std::vector<Track> tracks_;
  ProtoEncoder interned_;  // scratch
  ProtoEncoder scratch_;   // descriptor bodies
};

class ChromeJsonSink : public TraceSink {
 public:
  // `opens` writes the header, `closes` the trailer; a part that does not open starts with a
  // separator (every part writes at least one event).
  explicit ChromeJsonSink(int fd, bool opens = true, bool closes = true);

  TrackId ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) override;
  TrackId ThreadTrack(uint64_t uuid, TrackId parent, int32_t pid, int32_t tid,
                      std::string_view name) override;
  TrackId NamedTrack(uint64_t uuid, TrackId parent, std::string_view name, int32_t json_pid,
                     int32_t json_tid) override;
  TrackId CounterTrack(uint64_t uuid, TrackId parent, std::string_view name,
                       int32_t json_pid) override;
  void Slice(TrackId track, uint64_t start, uint64_t end, Name name, const Arg* args, int nargs,
             uint64_t flow_out, uint64_t flow_in) override;
  void OpenSlice(TrackId track, uint64_t start, Name name, const Arg* args, int nargs) override;
  void Instant(TrackId track, uint64_t ts, Name name, const Arg* args, int nargs,
               uint64_t flow_out) override;
  void Counter(TrackId track, uint64_t ts, int64_t value) override;
  bool Finish() override;

 private:
  struct TrackInfo {
    int32_t pid;
    int32_t tid;
    std::string name;      // counters only
    bool process = false;  // the process's own track: its instants are process-scoped
  };
  void Raw(std::string_view s) { buf_.Append(s.data(), s.size()); }
  void Str(std::string_view s);   // a quoted, escaped JSON string
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Micros(uint64_t ns);       // ns as microseconds with 3 decimals
  void EventHead(const char* ph, int32_t pid, int32_t tid, uint64_t ts);
  void ArgsObject(const Arg* args, int nargs);
  struct Held {
    int32_t pid;
    int32_t tid;
    uint64_t ts;
  };
  void FlowStart(const TrackInfo& t, uint64_t ts, uint64_t id);   // a flow leaves a slice
  void FlowArrive(const TrackInfo& t, uint64_t ts, uint64_t id);  // and ends at one
  void WriteStart(const Held& at, uint64_t id);                   // the "s" event
  void FlowEnd(const char* ph, int32_t pid, int32_t tid, uint64_t ts, uint64_t id);
  void HoldThrough(const TrackInfo& t, uint64_t ts, uint64_t id);
  // Forgets the flow ends of `m` not met for 10 s of trace time (a flow that never ends: an
  // untimed launch), when it holds many.
  void SweepUnmet(std::unordered_map<uint64_t, Held>* m, size_t* sweep_at);
  void Separator();
  TrackId AddTrack(TrackInfo info);

  std::vector<TrackInfo> tracks_;
  bool first_;
  bool closes_;
  // The latest node of each flow that goes through several slices (a graph launch's nodes),
  // written once the next one comes ("t") or at the end ("f"): each flow ends.
  std::unordered_map<uint64_t, Held> held_;
  size_t sweep_at_ = 4096;
  uint64_t latest_ts_ = 0;
  // A flow is written when both its ends are known (a launch's start, its device op's end, in
  // either order), so that none dangles: a launch whose op never came (untimed, or cut by a
  // kill) writes no flow.
  std::unordered_map<uint64_t, Held> starts_, ends_;
  size_t starts_sweep_at_ = 65536, ends_sweep_at_ = 65536;
};

}  // namespace perfetto_internal
}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_
