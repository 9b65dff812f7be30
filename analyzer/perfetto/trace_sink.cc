#include "analyzer/perfetto/trace_sink.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace profagent {
namespace analyzer {
namespace perfetto_internal {

const char* const kArgNames[kArgNumKeys] = {
    "correlation", "grid",    "block",  "shmem",   "stream",  "device",       "bytes", "copy_kind",
    "ptr",         "ret",     "count",  "seq",     "peer",    "comm",         "index", "tokens",
    "kv",          "bsz",     "warmup", "run",     "payload", "domain",       "graph", "reason",
    "kernel",      "api_dur", "calls",  "busy_ns", "source",  "stream_index",
};

namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Field numbers of the Perfetto schema subset (proto/perfetto_trace.proto).
enum : uint32_t {
  kTracePacket = 1,
  kPacketTimestamp = 8,
  kPacketSequenceId = 10,
  kPacketTrackEvent = 11,
  kPacketInternedData = 12,
  kPacketSequenceFlags = 13,
  kPacketDefaults = 59,
  kPacketTrackDescriptor = 60,
  kPacketFirstOnSequence = 87,
  kDefaultsTrackEvent = 11,
  kTeDefaultsTrackUuid = 11,
  kTdUuid = 1,
  kTdName = 2,
  kTdProcess = 3,
  kTdThread = 4,
  kTdParent = 5,
  kTdCounter = 8,
  kPdPid = 1,
  kPdProcessName = 6,
  kThdPid = 1,
  kThdTid = 2,
  kThdName = 5,
  kCdUnit = 3,
  kTeDebugAnnotations = 4,
  kTeType = 9,
  kTeNameIid = 10,
  kTeCounterValue = 30,
  kTeFlowIds = 47,
  kTeTerminatingFlowIds = 48,
  kDaNameIid = 1,
  kDaUintValue = 3,
  kDaIntValue = 4,
  kDaDoubleValue = 5,
  kDaStringValue = 6,
  kDaPointerValue = 7,
  kDaStringValueIid = 17,
  kIdEventNames = 2,
  kIdDebugAnnotationNames = 3,
  kIdDebugAnnotationStringValues = 29,
  kInternIid = 1,
  kInternName = 2,
};

enum : uint32_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
enum : uint32_t { kSeqStateCleared = 1, kSeqNeedsState = 2 };
constexpr uint32_t kUnitSizeBytes = 3;

constexpr uint64_t Tag(uint32_t field, WireType wt) { return (uint64_t{field} << 3) | wt; }

// A tag known at compile time: one or two bytes.
template <uint64_t kTag>
inline char* PutTag(char* p) {
  static_assert(kTag < (1u << 14), "tags here take at most two bytes");
  if (kTag < 0x80) {
    *p++ = static_cast<char>(kTag);
  } else {
    *p++ = static_cast<char>(kTag | 0x80);
    *p++ = static_cast<char>(kTag >> 7);
  }
  return p;
}

inline char* PutFixed64(char* p, uint64_t v) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "fixed64 is little-endian");
  memcpy(p, &v, 8);
  return p + 8;
}

// Closes a nested message whose length byte is at `len_at` and whose body ends at `end`:
// writes the length, shifting the body right when it needs a longer varint (the caller
// reserved room). Returns the new end.
inline char* CloseNested(char* len_at, char* end) {
  const size_t len = static_cast<size_t>(end - len_at - 1);
  if (__builtin_expect(len < 0x80, 1)) {
    *len_at = static_cast<char>(len);
    return end;
  }
  const size_t n = VarintSize(len);
  memmove(len_at + n, len_at + 1, len);
  PutVarint(len_at, len);
  return end + n - 1;
}

// The value field's tag by Arg::Kind, two bytes written (the second is junk for one-byte tags
// and overwritten next), plus its length.
struct ValueTag {
  char bytes[2];
  uint8_t len;
};
template <uint64_t kTag>
constexpr ValueTag MakeValueTag() {
  return kTag < 0x80 ? ValueTag{{static_cast<char>(kTag), 0}, 1}
                     : ValueTag{{static_cast<char>(kTag | 0x80), static_cast<char>(kTag >> 7)}, 2};
}
constexpr ValueTag kValueTags[] = {
    MakeValueTag<Tag(kDaIntValue, kVarint)>(),           // kInt
    MakeValueTag<Tag(kDaUintValue, kVarint)>(),          // kUint
    MakeValueTag<Tag(kDaStringValue, kLengthDelimited)>(),  // kStr
    MakeValueTag<Tag(kDaPointerValue, kVarint)>(),       // kPtr
    MakeValueTag<Tag(kDaStringValueIid, kVarint)>(),     // kInterned
    MakeValueTag<Tag(kDaDoubleValue, kFixed64)>(),       // kDouble
};

// DebugAnnotation{name_iid = key + 1 (< 128), value}.
inline char* PutAnnotation(char* p, const Arg& a) {
  p = PutTag<Tag(kTeDebugAnnotations, kLengthDelimited)>(p);
  char* const len_at = p++;
  p = PutTag<Tag(kDaNameIid, kVarint)>(p);
  *p++ = static_cast<char>(a.key + 1);
  const ValueTag& vt = kValueTags[a.kind];
  memcpy(p, vt.bytes, 2);
  p += vt.len;
  if (a.kind == Arg::kStr) {
    p = PutVarint(p, a.s.size());
    memcpy(p, a.s.data(), a.s.size());
    return CloseNested(len_at, p + a.s.size());
  }
  if (a.kind == Arg::kDouble) {
    memcpy(p, &a.i, 8);  // fixed64, little-endian (as the host: x86-64, aarch64)
    p += 8;
  } else {
    p = PutVarint(p, static_cast<uint64_t>(a.i));
  }
  *len_at = static_cast<char>(p - len_at - 1);  // at most 2 + 2 + 10 bytes
  return p;
}

}  // namespace

void TraceSink::Flush() {
  const char* p = buf_.data();
  size_t left = buf_.size();
  while (left > 0 && write_errno_ == 0) {
    const ssize_t n = write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      write_errno_ = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  bytes_written_ += buf_.size();
  buf_.Clear();
}

bool TraceSink::FinishOutput() {
  Flush();
  if (write_errno_ != 0) errno = write_errno_;
  return write_errno_ == 0;
}

// ---------------------------------------------------------------- Perfetto protobuf

TrackId PerfettoProtoSink::DefineTrack(uint64_t uuid, TrackId parent, const ProtoEncoder& body) {
  const TrackId id = static_cast<TrackId>(tracks_.size());
  const uint32_t seq = first_sequence_ + id * stride_;
  tracks_.emplace_back();
  Track& t = tracks_.back();
  t.uuid = uuid;
  char* q = PutTag<Tag(kPacketSequenceId, kVarint)>(t.seq_fields);
  q = PutVarint(q, seq);
  q = PutTag<Tag(kPacketSequenceFlags, kVarint)>(q);
  *q++ = static_cast<char>(kSeqNeedsState);
  t.seq_fields_len = static_cast<uint8_t>(q - t.seq_fields);

  // The sequence's first packet: clears its incremental state, sets the default track.
  size_t p = buf_.BeginNested(kTracePacket);
  buf_.VarintField(kPacketSequenceId, seq);
  buf_.VarintField(kPacketSequenceFlags, kSeqStateCleared);
  buf_.VarintField(kPacketFirstOnSequence, 1);
  size_t defaults = buf_.BeginNested(kPacketDefaults);
  size_t te = buf_.BeginNested(kDefaultsTrackEvent);
  buf_.VarintField(kTeDefaultsTrackUuid, uuid);
  buf_.EndNested(te);
  buf_.EndNested(defaults);
  size_t td = buf_.BeginNested(kPacketTrackDescriptor);
  buf_.VarintField(kTdUuid, uuid);
  if (parent != kNoTrack) buf_.VarintField(kTdParent, tracks_[parent].uuid);
  buf_.Append(body.data(), body.size());
  buf_.EndNested(td);
  buf_.EndNested(p);
  ++events_;
  MaybeFlush(kFlushBytes);
  return id;
}

TrackId PerfettoProtoSink::ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) {
  scratch_.Clear();
  size_t pd = scratch_.BeginNested(kTdProcess);
  scratch_.IntField(kPdPid, pid);
  scratch_.BytesField(kPdProcessName, name);
  scratch_.EndNested(pd);
  return DefineTrack(uuid, kNoTrack, scratch_);
}

TrackId PerfettoProtoSink::ThreadTrack(uint64_t uuid, TrackId parent, int32_t pid, int32_t tid,
                                       std::string_view name) {
  scratch_.Clear();
  size_t thd = scratch_.BeginNested(kTdThread);
  scratch_.IntField(kThdPid, pid);
  scratch_.IntField(kThdTid, tid);
  scratch_.BytesField(kThdName, name);
  scratch_.EndNested(thd);
  return DefineTrack(uuid, parent, scratch_);
}

TrackId PerfettoProtoSink::NamedTrack(uint64_t uuid, TrackId parent, std::string_view name,
                                      int32_t, int32_t) {
  scratch_.Clear();
  scratch_.BytesField(kTdName, name);
  return DefineTrack(uuid, parent, scratch_);
}

TrackId PerfettoProtoSink::CounterTrack(uint64_t uuid, TrackId parent, std::string_view name,
                                        int32_t) {
  scratch_.Clear();
  scratch_.BytesField(kTdName, name);
  size_t cd = scratch_.BeginNested(kTdCounter);
  scratch_.VarintField(kCdUnit, kUnitSizeBytes);
  scratch_.EndNested(cd);
  return DefineTrack(uuid, parent, scratch_);
}

void PerfettoProtoSink::InternName(Track& t, Name name) {
  if (!t.names_sent.Insert(name.iid)) return;
  size_t e = interned_.BeginNested(kIdEventNames);
  interned_.VarintField(kInternIid, name.iid);
  interned_.BytesField(kInternName, name.str);
  interned_.EndNested(e);
}

void PerfettoProtoSink::InternArg(Track& t, const Arg& a) {
  const uint32_t bit = 1u << a.key;
  if ((t.arg_names_sent & bit) == 0) {
    t.arg_names_sent |= bit;
    size_t e = interned_.BeginNested(kIdDebugAnnotationNames);
    interned_.VarintField(kInternIid, a.key + 1);
    interned_.BytesField(kInternName, kArgNames[a.key]);
    interned_.EndNested(e);
  }
  const uint64_t iid = static_cast<uint64_t>(a.i);
  if (a.kind == Arg::kInterned && t.values_sent.Insert(iid)) {
    size_t e = interned_.BeginNested(kIdDebugAnnotationStringValues);
    interned_.VarintField(kInternIid, iid);
    interned_.BytesField(kInternName, a.s);
    interned_.EndNested(e);
  }
}

// One pass: lengths get one reserved byte each and are back-patched (CloseNested). New
// interned entries go after the TrackEvent (field order is free in protobuf).
void PerfettoProtoSink::EventPacket(TrackId id, uint64_t ts, uint32_t type, Name name,
                                    const Arg* args, int nargs, uint64_t flow_out,
                                    uint64_t flow_in, const uint64_t* end) {
  Track& t = tracks_[id];
  interned_.Clear();
  if (name.iid != 0 && !t.names_sent.Contains(name.iid)) InternName(t, name);
  // Bound: packet and event headers, flows, the end packet, 16 bytes per annotation besides
  // its text, slack for two length shifts.
  size_t bound = 128;
  for (int i = 0; i < nargs; ++i) bound += 16 + args[i].s.size();
  buf_.Ensure(bound);
  char* p0 = buf_.cursor();
  char* p = PutTag<Tag(kTracePacket, kLengthDelimited)>(p0);
  char* packet_len_at = p++;
  p = PutTag<Tag(kPacketTimestamp, kVarint)>(p);
  p = PutVarint(p, ts);
  memcpy(p, t.seq_fields, sizeof(t.seq_fields));
  p += t.seq_fields_len;
  p = PutTag<Tag(kPacketTrackEvent, kLengthDelimited)>(p);
  char* const te_len_at = p++;
  p = PutTag<Tag(kTeType, kVarint)>(p);
  *p++ = static_cast<char>(type);
  if (name.iid != 0) {
    p = PutTag<Tag(kTeNameIid, kVarint)>(p);
    p = PutVarint(p, name.iid);
  }
  for (int i = 0; i < nargs; ++i) {
    const Arg& a = args[i];
    if ((t.arg_names_sent & (1u << a.key)) == 0 ||
        (a.kind == Arg::kInterned && !t.values_sent.Contains(static_cast<uint64_t>(a.i)))) {
      InternArg(t, a);
    }
    p = PutAnnotation(p, a);
  }
  if (flow_out != 0) {
    p = PutTag<Tag(kTeFlowIds, kFixed64)>(p);
    p = PutFixed64(p, flow_out);
  }
  if (flow_in != 0 && flow_in != flow_out) {  // equal: passing through (flow_ids only)
    p = PutTag<Tag(kTeTerminatingFlowIds, kFixed64)>(p);
    p = PutFixed64(p, flow_in);
  }
  p = CloseNested(te_len_at, p);
  if (interned_.size() != 0) {
    // Commit what is written, append InternedData, continue raw after it (the buffer may
    // have moved: the packet's length byte is found again by offset).
    const size_t len_off = static_cast<size_t>(packet_len_at - buf_.data());
    buf_.Advance(static_cast<size_t>(p - p0));
    buf_.Ensure(interned_.size() + 16 + bound);
    buf_.Tag(kPacketInternedData, kLengthDelimited);
    buf_.Varint(interned_.size());
    buf_.Append(interned_.data(), interned_.size());
    packet_len_at = buf_.data() + len_off;
    p0 = p = buf_.cursor();
  }
  p = CloseNested(packet_len_at, p);
  ++events_;
  if (end != nullptr) {
    // The end packet: no name, no annotations; the track is the sequence's default.
    p = PutTag<Tag(kTracePacket, kLengthDelimited)>(p);
    char* const end_len_at = p++;
    p = PutTag<Tag(kPacketTimestamp, kVarint)>(p);
    p = PutVarint(p, *end);
    memcpy(p, t.seq_fields, sizeof(t.seq_fields));
    p += t.seq_fields_len;
    p = PutTag<Tag(kPacketTrackEvent, kLengthDelimited)>(p);
    *p++ = 2;
    p = PutTag<Tag(kTeType, kVarint)>(p);
    *p++ = static_cast<char>(kSliceEnd);
    *end_len_at = static_cast<char>(p - end_len_at - 1);
    ++events_;
  }
  buf_.Advance(static_cast<size_t>(p - p0));
  MaybeFlush(kFlushBytes);
}

void PerfettoProtoSink::Slice(TrackId track, uint64_t start, uint64_t end, Name name,
                              const Arg* args, int nargs, uint64_t flow_out, uint64_t flow_in) {
  EventPacket(track, start, kSliceBegin, name, args, nargs, flow_out, flow_in, &end);
}

void PerfettoProtoSink::OpenSlice(TrackId track, uint64_t start, Name name, const Arg* args,
                                  int nargs) {
  EventPacket(track, start, kSliceBegin, name, args, nargs, 0, 0, nullptr);
}

void PerfettoProtoSink::Instant(TrackId track, uint64_t ts, Name name, const Arg* args,
                                int nargs, uint64_t flow_out) {
  EventPacket(track, ts, kInstant, name, args, nargs, flow_out, 0, nullptr);
}

void PerfettoProtoSink::Counter(TrackId track, uint64_t ts, int64_t value) {
  const Track& t = tracks_[track];
  size_t p = buf_.BeginNested(kTracePacket);
  buf_.VarintField(kPacketTimestamp, ts);
  buf_.Append(t.seq_fields, t.seq_fields_len);
  size_t te = buf_.BeginNested(kPacketTrackEvent);
  buf_.VarintField(kTeType, kCounter);
  buf_.IntField(kTeCounterValue, value);
  buf_.EndNested(te);
  buf_.EndNested(p);
  ++events_;
  MaybeFlush(kFlushBytes);
}

bool PerfettoProtoSink::Finish() { return FinishOutput(); }

// ---------------------------------------------------------------- Chrome JSON

ChromeJsonSink::ChromeJsonSink(int fd, bool opens, bool closes)
    : TraceSink(fd), first_(opens), closes_(closes) {
  // No "displayTimeUnit": catapult takes it as a display preference, but older versions of
  // Perfetto's trace processor let it change how ts and dur (microseconds) were parsed.
  if (opens) Raw("{\"traceEvents\":[\n");
}

void ChromeJsonSink::Str(std::string_view s) {
  buf_.Ensure(s.size() * 6 + 2);
  char* p = buf_.cursor();
  char* const start = p;
  *p++ = '"';
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // Copy a well-formed UTF-8 sequence; replace a stray byte with U+FFFD so the file stays
      // valid JSON (names come from the profiled program and may be any bytes).
      const size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
      bool ok = n != 0 && i + n <= s.size() && c >= 0xc2 && c <= 0xf4;
      for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok) {
        memcpy(p, s.data() + i, n);
        p += n;
        i += n - 1;
      } else {
        memcpy(p, "\\ufffd", 6);
        p += 6;
      }
      continue;
    }
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = static_cast<char>(c);
    } else if (c < 0x20) {
      *p++ = '\\';
      *p++ = 'u';
      *p++ = '0';
      *p++ = '0';
      *p++ = kHex[c >> 4];
      *p++ = kHex[c & 15];
    } else {
      *p++ = static_cast<char>(c);
    }
  }
  *p++ = '"';
  buf_.Advance(static_cast<size_t>(p - start));
}

void ChromeJsonSink::Uint(uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  buf_.Ensure(n);
  char* p = buf_.cursor();
  for (int i = 0; i < n; ++i) p[i] = tmp[n - 1 - i];
  buf_.Advance(n);
}

void ChromeJsonSink::Int(int64_t v) {
  if (v < 0) {
    Raw("-");
    Uint(0 - static_cast<uint64_t>(v));
  } else {
    Uint(static_cast<uint64_t>(v));
  }
}

void ChromeJsonSink::Micros(uint64_t ns) {
  Uint(ns / 1000);
  uint64_t frac = ns % 1000;
  char f[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
               static_cast<char>('0' + frac % 10)};
  buf_.Append(f, 4);
}

void ChromeJsonSink::Separator() {
  if (!first_) Raw(",\n");
  first_ = false;
  ++events_;
}

TrackId ChromeJsonSink::AddTrack(TrackInfo info) {
  tracks_.push_back(std::move(info));
  return static_cast<TrackId>(tracks_.size() - 1);
}

void ChromeJsonSink::EventHead(const char* ph, int32_t pid, int32_t tid, uint64_t ts) {
  Separator();
  Raw("{\"ph\":\"");
  Raw(ph);
  Raw("\",\"pid\":");
  Int(pid);
  Raw(",\"tid\":");
  Int(tid);
  Raw(",\"ts\":");
  Micros(ts);
}

void ChromeJsonSink::ArgsObject(const Arg* args, int nargs) {
  if (nargs == 0) return;
  Raw(",\"args\":{");
  for (int i = 0; i < nargs; ++i) {
    if (i > 0) Raw(",");
    Str(kArgNames[args[i].key]);
    Raw(":");
    switch (args[i].kind) {
      case Arg::kInt:
        Int(args[i].i);
        break;
      case Arg::kUint:
        Uint(static_cast<uint64_t>(args[i].i));
        break;
      case Arg::kPtr: {
        char tmp[24];
        snprintf(tmp, sizeof(tmp), "\"0x%" PRIx64 "\"", static_cast<uint64_t>(args[i].i));
        Raw(tmp);
        break;
      }
      case Arg::kStr:
      case Arg::kInterned:
        Str(args[i].s);
        break;
      case Arg::kDouble: {
        const double v = args[i].AsDouble();
        if (std::isfinite(v)) {
          char tmp[32];
          snprintf(tmp, sizeof(tmp), "%.17g", v);
          Raw(tmp);
        } else {
          Str(std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");  // not JSON numbers
        }
        break;
      }
    }
  }
  Raw("}");
}

TrackId ChromeJsonSink::ProcessTrack(uint64_t, int32_t pid, std::string_view name) {
  Separator();
  Raw("{\"ph\":\"M\",\"pid\":");
  Int(pid);
  Raw(",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":");
  Str(name);
  Raw("}}");
  MaybeFlush(kFlushBytes);
  return AddTrack(TrackInfo{pid, 0, "", true});
}

TrackId ChromeJsonSink::ThreadTrack(uint64_t, TrackId, int32_t pid, int32_t tid,
                                    std::string_view name) {
  Separator();
  Raw("{\"ph\":\"M\",\"pid\":");
  Int(pid);
  Raw(",\"tid\":");
  Int(tid);
  Raw(",\"name\":\"thread_name\",\"args\":{\"name\":");
  Str(name);
  Raw("}}");
  MaybeFlush(kFlushBytes);
  return AddTrack(TrackInfo{pid, tid, ""});
}

TrackId ChromeJsonSink::NamedTrack(uint64_t uuid, TrackId parent, std::string_view name,
                                   int32_t json_pid, int32_t json_tid) {
  return ThreadTrack(uuid, parent, json_pid, json_tid, name);
}

TrackId ChromeJsonSink::CounterTrack(uint64_t, TrackId, std::string_view name,
                                     int32_t json_pid) {
  return AddTrack(TrackInfo{json_pid, 0, std::string(name)});
}

void ChromeJsonSink::WriteStart(const Held& at, uint64_t id) {
  EventHead("s", at.pid, at.tid, at.ts);
  Raw(",\"id\":");
  Uint(id);
  Raw(",\"cat\":\"flow\",\"name\":\"launch\"}");
}

void ChromeJsonSink::FlowStart(const TrackInfo& t, uint64_t ts, uint64_t id) {
  latest_ts_ = std::max(latest_ts_, ts);
  const Held at{t.pid, t.tid, ts};
  if (auto e = ends_.find(id); e != ends_.end()) {  // its end came first
    WriteStart(at, id);
    FlowEnd("f", e->second.pid, e->second.tid, e->second.ts, id);
    ends_.erase(e);
    return;
  }
  if (held_.count(id) != 0) {  // a graph's nodes came first
    WriteStart(at, id);
    return;
  }
  starts_[id] = at;
  SweepUnmet(&starts_, &starts_sweep_at_);
}

void ChromeJsonSink::FlowArrive(const TrackInfo& t, uint64_t ts, uint64_t id) {
  latest_ts_ = std::max(latest_ts_, ts);
  if (auto s = starts_.find(id); s != starts_.end()) {
    WriteStart(s->second, id);
    FlowEnd("f", t.pid, t.tid, ts, id);
    starts_.erase(s);
    return;
  }
  ends_[id] = Held{t.pid, t.tid, ts};
  SweepUnmet(&ends_, &ends_sweep_at_);
}

void ChromeJsonSink::SweepUnmet(std::unordered_map<uint64_t, Held>* m, size_t* sweep_at) {
  if (m->size() < *sweep_at) return;
  constexpr uint64_t kUnmetNs = 10000000000ull;
  for (auto it = m->begin(); it != m->end();) {
    it = it->second.ts + kUnmetNs < latest_ts_ ? m->erase(it) : std::next(it);
  }
  *sweep_at = std::max<size_t>(65536, 2 * m->size());
}

void ChromeJsonSink::Slice(TrackId track, uint64_t start, uint64_t end, Name name,
                           const Arg* args, int nargs, uint64_t flow_out, uint64_t flow_in) {
  const TrackInfo& t = tracks_[track];
  EventHead("X", t.pid, t.tid, start);
  Raw(",\"dur\":");
  Micros(end >= start ? end - start : 0);
  Raw(",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  if (flow_out != 0 && flow_out != flow_in) FlowStart(t, start, flow_out);
  if (flow_in != 0 && flow_in == flow_out) {
    HoldThrough(t, start, flow_in);
  } else if (flow_in != 0) {
    FlowArrive(t, start, flow_in);
  }
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::FlowEnd(const char* ph, int32_t pid, int32_t tid, uint64_t ts, uint64_t id) {
  EventHead(ph, pid, tid, ts);
  Raw(",\"bp\":\"e\",\"id\":");
  Uint(id);
  Raw(",\"cat\":\"flow\",\"name\":\"launch\"}");
}

// A node the flow goes through: a step ("t"), except the latest, which ends the flow ("f")
// once no later one can come (at the end). A flow not continued for a second of trace time is ended
// when many are held, so memory stays bounded on long traces (a graph's nodes run within
// one launch, well inside that).
void ChromeJsonSink::HoldThrough(const TrackInfo& t, uint64_t ts, uint64_t id) {
  latest_ts_ = std::max(latest_ts_, ts);
  auto ins = held_.try_emplace(id, Held{t.pid, t.tid, ts});
  if (ins.second) {  // the first node: the launch's start is written now
    if (auto s = starts_.find(id); s != starts_.end()) {
      WriteStart(s->second, id);
      starts_.erase(s);
    }
  } else {  // viewers order a flow's events by time: the latest one is held
    Held& h = ins.first->second;
    if (ts >= h.ts) {
      FlowEnd("t", h.pid, h.tid, h.ts, id);
      h = Held{t.pid, t.tid, ts};
    } else {
      FlowEnd("t", t.pid, t.tid, ts, id);
    }
    return;
  }
  if (held_.size() < sweep_at_) return;
  constexpr uint64_t kQuietNs = 1000000000;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.ts + kQuietNs < latest_ts_) {
      FlowEnd("f", it->second.pid, it->second.tid, it->second.ts, it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  sweep_at_ = std::max<size_t>(4096, 2 * held_.size());
}

void ChromeJsonSink::OpenSlice(TrackId track, uint64_t start, Name name, const Arg* args,
                               int nargs) {
  const TrackInfo& t = tracks_[track];
  EventHead("B", t.pid, t.tid, start);
  Raw(",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::Instant(TrackId track, uint64_t ts, Name name, const Arg* args,
                             int nargs, uint64_t flow_out) {
  const TrackInfo& t = tracks_[track];
  EventHead("i", t.pid, t.tid, ts);
  Raw(t.process ? ",\"s\":\"p\",\"name\":" : ",\"s\":\"t\",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  if (flow_out != 0) FlowStart(t, ts, flow_out);
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::Counter(TrackId track, uint64_t ts, int64_t value) {
  const TrackInfo& t = tracks_[track];
  EventHead("C", t.pid, 0, ts);
  Raw(",\"name\":");
  Str(t.name);
  Raw(",\"args\":{\"bytes\":");
  Int(value);
  Raw("}}");
  MaybeFlush(kFlushBytes);
}

bool ChromeJsonSink::Finish() {
  // In id order, so the output is the same bytes from run to run.
  std::vector<std::pair<uint64_t, Held>> last(held_.begin(), held_.end());
  std::sort(last.begin(), last.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, h] : last) FlowEnd("f", h.pid, h.tid, h.ts, id);
  held_.clear();
  starts_.clear();  // never met: nothing written
  ends_.clear();
  if (closes_) Raw("\n]}\n");
  return FinishOutput();
}

}  // namespace perfetto_internal
}  // namespace analyzer
}  // namespace profagent
