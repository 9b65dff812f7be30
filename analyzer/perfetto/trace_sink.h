// Output back ends of the trace exporter: one interface, two encodings.
//
// The converter (perfetto.cc) turns profagent records into track-level calls (a slice on a
// track, an instant, a counter value, a track definition); a TraceSink encodes them:
//   - PerfettoProtoSink: Perfetto's native protobuf (Trace.packet = TracePacket), TrackEvents
//     with interned event and annotation names, one packet sequence per input file.
//   - ChromeJsonSink: Chrome trace-event JSON ({"traceEvents":[...]}) with ph X/B/i/C/s/f/M.
// Both stream: output is appended to a buffer flushed to the FILE every ~1 MiB, so memory does
// not grow with the trace. Events are written in input order, not time order: both formats'
// readers (trace_processor, the Perfetto UI, chrome://tracing) sort by timestamp on import; a
// slice is written as its begin and end back to back, so equal-timestamp neighbours keep a
// valid nesting under a stable sort.
//
// Thread safety: a sink is used by one thread. It does not own the FILE.
#ifndef PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_
#define PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_

#include <cstdint>
#include <cstdio>
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
  kArgNumKeys
};
extern const char* const kArgNames[kArgNumKeys];
static_assert(kArgNumKeys < 32, "annotation keys: one bit each in a uint32 and single-byte iids");

struct Arg {
  enum Kind : uint8_t { kInt, kUint, kStr, kPtr };
  ArgKey key;
  Kind kind;
  int64_t i;
  std::string_view s;

  static Arg Int(ArgKey k, int64_t v) { return Arg{k, kInt, v, {}}; }
  static Arg Uint(ArgKey k, uint64_t v) { return Arg{k, kUint, static_cast<int64_t>(v), {}}; }
  static Arg Ptr(ArgKey k, uint64_t v) { return Arg{k, kPtr, static_cast<int64_t>(v), {}}; }
  static Arg Str(ArgKey k, std::string_view v) { return Arg{k, kStr, 0, v}; }
};

// An event name: `iid` is unique per (sequence, string) and never 0; `str` is the text.
struct Name {
  uint64_t iid;
  std::string_view str;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // Starts the packet sequence of the next input file (interning state is per sequence).
  virtual void BeginSequence(uint32_t sequence_id) = 0;

  // Track definitions; each uuid is defined once, before its first event. `json_pid/json_tid`
  // place non-thread tracks in the JSON output.
  virtual void ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) = 0;
  virtual void ThreadTrack(uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                           std::string_view name) = 0;
  virtual void NamedTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                          int32_t json_pid, int32_t json_tid) = 0;
  virtual void CounterTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                            int32_t json_pid) = 0;

  // A complete slice [start, end] on `track`. flow_out != 0 starts (or continues) a flow from
  // this slice; flow_in != 0 terminates one at it.
  virtual void Slice(uint64_t track, uint64_t start, uint64_t end, Name name, const Arg* args,
                     int nargs, uint64_t flow_out, uint64_t flow_in) = 0;
  // A slice whose end was never recorded.
  virtual void OpenSlice(uint64_t track, uint64_t start, Name name, const Arg* args,
                         int nargs) = 0;
  virtual void Instant(uint64_t track, uint64_t ts, Name name, const Arg* args, int nargs) = 0;
  virtual void Counter(uint64_t track, uint64_t ts, int64_t value) = 0;

  // Writes any trailer and flushes. Returns false on a write error.
  virtual bool Finish() = 0;

  uint64_t events() const { return events_; }
  uint64_t bytes_written() const { return bytes_written_; }

 protected:
  explicit TraceSink(FILE* out) : out_(out) {}
  // Writes the buffer out once it holds at least `threshold` bytes.
  void MaybeFlush(size_t threshold) {
    if (buf_.size() >= threshold) Flush();
  }
  void Flush();

  FILE* out_;
  ProtoEncoder buf_;  // also used as a plain byte buffer by the JSON sink
  uint64_t events_ = 0;
  uint64_t bytes_written_ = 0;
  bool write_error_ = false;
};

class PerfettoProtoSink : public TraceSink {
 public:
  explicit PerfettoProtoSink(FILE* out) : TraceSink(out) {}

  void BeginSequence(uint32_t sequence_id) override;
  void ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) override;
  void ThreadTrack(uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                   std::string_view name) override;
  void NamedTrack(uint64_t uuid, uint64_t parent, std::string_view name, int32_t json_pid,
                  int32_t json_tid) override;
  void CounterTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                    int32_t json_pid) override;
  void Slice(uint64_t track, uint64_t start, uint64_t end, Name name, const Arg* args, int nargs,
             uint64_t flow_out, uint64_t flow_in) override;
  void OpenSlice(uint64_t track, uint64_t start, Name name, const Arg* args, int nargs) override;
  void Instant(uint64_t track, uint64_t ts, Name name, const Arg* args, int nargs) override;
  void Counter(uint64_t track, uint64_t ts, int64_t value) override;
  bool Finish() override;

 private:
  size_t BeginPacket(uint64_t ts, bool has_ts, bool needs_state);
  void EndPacket(size_t token);
  // Adds InternedData entries for names and annotation keys not yet sent on this sequence.
  void Intern(Name name, const Arg* args, int nargs);
  void WriteEvent(uint64_t track, uint32_t type, Name name, const Arg* args, int nargs,
                  uint64_t flow_out, uint64_t flow_in);
  void TrackDescriptorPacket(uint64_t uuid, uint64_t parent, std::string_view name,
                             int kind /*0 plain, 1 counter*/);
  bool NameSent(uint64_t iid);

  uint32_t sequence_id_ = 0;
  bool first_on_sequence_ = false;
  std::vector<uint8_t> sent_small_;           // iid < kSmallIids
  std::unordered_set<uint64_t> sent_large_;
  uint32_t arg_names_sent_ = 0;               // bit per ArgKey
};

class ChromeJsonSink : public TraceSink {
 public:
  explicit ChromeJsonSink(FILE* out);

  void BeginSequence(uint32_t sequence_id) override {}
  void ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) override;
  void ThreadTrack(uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                   std::string_view name) override;
  void NamedTrack(uint64_t uuid, uint64_t parent, std::string_view name, int32_t json_pid,
                  int32_t json_tid) override;
  void CounterTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                    int32_t json_pid) override;
  void Slice(uint64_t track, uint64_t start, uint64_t end, Name name, const Arg* args, int nargs,
             uint64_t flow_out, uint64_t flow_in) override;
  void OpenSlice(uint64_t track, uint64_t start, Name name, const Arg* args, int nargs) override;
  void Instant(uint64_t track, uint64_t ts, Name name, const Arg* args, int nargs) override;
  void Counter(uint64_t track, uint64_t ts, int64_t value) override;
  bool Finish() override;

 private:
  struct TrackInfo {
    int32_t pid;
    int32_t tid;
    std::string name;  // counters only
  };
  void Raw(std::string_view s) { buf_.Append(s.data(), s.size()); }
  void Str(std::string_view s);   // a quoted, escaped JSON string
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Micros(uint64_t ns);       // ns as microseconds with 3 decimals
  void EventHead(const char* ph, const TrackInfo& t, uint64_t ts);
  void ArgsObject(const Arg* args, int nargs);
  void Separator();
  const TrackInfo& Track(uint64_t uuid);

  std::unordered_map<uint64_t, TrackInfo> tracks_;
  bool first_ = true;
};

}  // namespace perfetto_internal
}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_PERFETTO_TRACE_SINK_H_
