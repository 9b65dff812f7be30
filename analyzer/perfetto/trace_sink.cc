#include "analyzer/perfetto/trace_sink.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

namespace profagent {
namespace analyzer {
namespace perfetto_internal {

const char* const kArgNames[kArgNumKeys] = {
    "correlation", "grid",    "block", "shmem",   "stream", "device", "bytes",
    "copy_kind",   "ptr",     "ret",   "count",   "seq",    "peer",   "comm",
    "index",       "tokens",  "kv",    "bsz",     "warmup", "run",    "payload",
    "domain",      "graph",   "reason", "kernel",
};

namespace {

constexpr size_t kFlushBytes = 1 << 20;
constexpr uint64_t kSmallIids = 1 << 22;

// Field numbers of the Perfetto schema subset (proto/perfetto_trace.proto).
enum : uint32_t {
  kTracePacket = 1,
  kPacketTimestamp = 8,
  kPacketSequenceId = 10,
  kPacketTrackEvent = 11,
  kPacketInternedData = 12,
  kPacketSequenceFlags = 13,
  kPacketTrackDescriptor = 60,
  kPacketFirstOnSequence = 87,
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
  kTeTrackUuid = 11,
  kTeCounterValue = 30,
  kTeFlowIds = 47,
  kTeTerminatingFlowIds = 48,
  kDaNameIid = 1,
  kDaUintValue = 3,
  kDaIntValue = 4,
  kDaStringValue = 6,
  kDaPointerValue = 7,
  kIdEventNames = 2,
  kIdDebugAnnotationNames = 3,
  kInternIid = 1,
  kInternName = 2,
};

enum : uint32_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
enum : uint32_t { kSeqStateCleared = 1, kSeqNeedsState = 2 };
constexpr uint32_t kUnitSizeBytes = 3;

inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

}  // namespace

void TraceSink::Flush() {
  if (buf_.size() == 0) return;
  if (!write_error_ && fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size()) {
    write_error_ = true;
  }
  bytes_written_ += buf_.size();
  buf_.Clear();
}

// ---------------------------------------------------------------- Perfetto protobuf

void PerfettoProtoSink::BeginSequence(uint32_t sequence_id) {
  sequence_id_ = sequence_id;
  first_on_sequence_ = true;
  sent_small_.clear();
  sent_large_.clear();
  arg_names_sent_ = 0;
}

size_t PerfettoProtoSink::BeginPacket(uint64_t ts, bool has_ts, bool needs_state) {
  size_t token = buf_.BeginNested(kTracePacket);
  if (has_ts) buf_.VarintField(kPacketTimestamp, ts);
  buf_.VarintField(kPacketSequenceId, sequence_id_);
  if (first_on_sequence_) {
    buf_.VarintField(kPacketSequenceFlags, kSeqStateCleared | kSeqNeedsState);
    buf_.VarintField(kPacketFirstOnSequence, 1);
    first_on_sequence_ = false;
  } else if (needs_state) {
    buf_.VarintField(kPacketSequenceFlags, kSeqNeedsState);
  }
  return token;
}

void PerfettoProtoSink::EndPacket(size_t token) {
  buf_.EndNested(token);
  ++events_;
  MaybeFlush(kFlushBytes);
}

bool PerfettoProtoSink::NameSent(uint64_t iid) {
  if (iid < kSmallIids) {
    if (iid >= sent_small_.size()) sent_small_.resize(std::max<size_t>(iid + 1, 2 * sent_small_.size()));
    if (sent_small_[iid]) return true;
    sent_small_[iid] = 1;
    return false;
  }
  return !sent_large_.insert(iid).second;
}

void PerfettoProtoSink::Intern(Name name, const Arg* args, int nargs) {
  bool need_name = name.iid != 0 && !NameSent(name.iid);
  uint32_t new_args = 0;
  for (int i = 0; i < nargs; ++i) {
    uint32_t bit = 1u << args[i].key;
    if ((arg_names_sent_ & bit) == 0) new_args |= bit;
  }
  if (!need_name && new_args == 0) return;
  size_t id = buf_.BeginNested(kPacketInternedData);
  if (need_name) {
    size_t e = buf_.BeginNested(kIdEventNames);
    buf_.VarintField(kInternIid, name.iid);
    buf_.BytesField(kInternName, name.str);
    buf_.EndNested(e);
  }
  for (int k = 0; k < kArgNumKeys; ++k) {
    if ((new_args & (1u << k)) == 0) continue;
    size_t e = buf_.BeginNested(kIdDebugAnnotationNames);
    buf_.VarintField(kInternIid, k + 1);
    buf_.BytesField(kInternName, kArgNames[k]);
    buf_.EndNested(e);
  }
  arg_names_sent_ |= new_args;
  buf_.EndNested(id);
}

void PerfettoProtoSink::WriteEvent(uint64_t track, uint32_t type, Name name, const Arg* args,
                                   int nargs, uint64_t flow_out, uint64_t flow_in) {
  size_t te = buf_.BeginNested(kPacketTrackEvent);
  buf_.VarintField(kTeType, type);
  buf_.VarintField(kTeTrackUuid, track);
  if (name.iid != 0) buf_.VarintField(kTeNameIid, name.iid);
  for (int i = 0; i < nargs; ++i) {
    // DebugAnnotation{name_iid, value}: the length is known up front (no back-patching).
    // Annotation iids are < 128 and all field tags here are single bytes.
    const Arg& a = args[i];
    const uint64_t v = static_cast<uint64_t>(a.i);
    const size_t value_len = a.kind == Arg::kStr ? VarintSize(a.s.size()) + a.s.size()
                                                 : VarintSize(v);
    buf_.Ensure(16 + value_len);
    char* p = buf_.cursor();
    p[0] = static_cast<char>((kTeDebugAnnotations << 3) | kLengthDelimited);
    const size_t body = 2 + 1 + value_len;
    size_t k = 1;
    for (uint64_t b = body; ; b >>= 7) {
      if (b < 0x80) {
        p[k++] = static_cast<char>(b);
        break;
      }
      p[k++] = static_cast<char>(b | 0x80);
    }
    p[k++] = static_cast<char>((kDaNameIid << 3) | kVarint);
    p[k++] = static_cast<char>(a.key + 1);
    uint32_t field;
    switch (a.kind) {
      case Arg::kInt: field = kDaIntValue; break;
      case Arg::kUint: field = kDaUintValue; break;
      case Arg::kPtr: field = kDaPointerValue; break;
      default: field = kDaStringValue; break;
    }
    p[k++] = static_cast<char>((field << 3) | (a.kind == Arg::kStr ? kLengthDelimited : kVarint));
    buf_.Advance(k);
    if (a.kind == Arg::kStr) {
      buf_.Varint(a.s.size());
      buf_.Append(a.s.data(), a.s.size());
    } else {
      buf_.Varint(v);
    }
  }
  if (flow_out != 0) buf_.Fixed64Field(kTeFlowIds, flow_out);
  if (flow_in != 0) buf_.Fixed64Field(kTeTerminatingFlowIds, flow_in);
  buf_.EndNested(te);
}

void PerfettoProtoSink::TrackDescriptorPacket(uint64_t uuid, uint64_t parent,
                                              std::string_view name, int kind) {
  size_t p = BeginPacket(0, false, false);
  size_t td = buf_.BeginNested(kPacketTrackDescriptor);
  buf_.VarintField(kTdUuid, uuid);
  if (parent != 0) buf_.VarintField(kTdParent, parent);
  buf_.BytesField(kTdName, name);
  if (kind == 1) {
    size_t cd = buf_.BeginNested(kTdCounter);
    buf_.VarintField(kCdUnit, kUnitSizeBytes);
    buf_.EndNested(cd);
  }
  buf_.EndNested(td);
  EndPacket(p);
}

void PerfettoProtoSink::ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) {
  size_t p = BeginPacket(0, false, false);
  size_t td = buf_.BeginNested(kPacketTrackDescriptor);
  buf_.VarintField(kTdUuid, uuid);
  size_t pd = buf_.BeginNested(kTdProcess);
  buf_.IntField(kPdPid, pid);
  buf_.BytesField(kPdProcessName, name);
  buf_.EndNested(pd);
  buf_.EndNested(td);
  EndPacket(p);
}

void PerfettoProtoSink::ThreadTrack(uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
                                    std::string_view name) {
  size_t p = BeginPacket(0, false, false);
  size_t td = buf_.BeginNested(kPacketTrackDescriptor);
  buf_.VarintField(kTdUuid, uuid);
  if (parent != 0) buf_.VarintField(kTdParent, parent);
  size_t thd = buf_.BeginNested(kTdThread);
  buf_.IntField(kThdPid, pid);
  buf_.IntField(kThdTid, tid);
  buf_.BytesField(kThdName, name);
  buf_.EndNested(thd);
  buf_.EndNested(td);
  EndPacket(p);
}

void PerfettoProtoSink::NamedTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                                   int32_t, int32_t) {
  TrackDescriptorPacket(uuid, parent, name, 0);
}

void PerfettoProtoSink::CounterTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                                     int32_t) {
  TrackDescriptorPacket(uuid, parent, name, 1);
}

void PerfettoProtoSink::Slice(uint64_t track, uint64_t start, uint64_t end, Name name,
                              const Arg* args, int nargs, uint64_t flow_out, uint64_t flow_in) {
  size_t p = BeginPacket(start, true, true);
  Intern(name, args, nargs);
  WriteEvent(track, kSliceBegin, name, args, nargs, flow_out, flow_in);
  EndPacket(p);
  // The end packet: fixed shape, every length fits one byte, written in one go.
  const size_t te_len = 2 + 1 + VarintSize(track);
  const size_t body = 1 + VarintSize(end) + 1 + VarintSize(sequence_id_) + 2 + te_len;
  buf_.Ensure(2 + body);
  char* q = buf_.cursor();
  char* const q0 = q;
  *q++ = static_cast<char>((kTracePacket << 3) | kLengthDelimited);
  *q++ = static_cast<char>(body);
  *q++ = static_cast<char>((kPacketTimestamp << 3) | kVarint);
  q = PutVarint(q, end);
  *q++ = static_cast<char>((kPacketSequenceId << 3) | kVarint);
  q = PutVarint(q, sequence_id_);
  *q++ = static_cast<char>((kPacketTrackEvent << 3) | kLengthDelimited);
  *q++ = static_cast<char>(te_len);
  *q++ = static_cast<char>((kTeType << 3) | kVarint);
  *q++ = static_cast<char>(kSliceEnd);
  *q++ = static_cast<char>((kTeTrackUuid << 3) | kVarint);
  q = PutVarint(q, track);
  buf_.Advance(static_cast<size_t>(q - q0));
  ++events_;
  MaybeFlush(kFlushBytes);
}

void PerfettoProtoSink::OpenSlice(uint64_t track, uint64_t start, Name name, const Arg* args,
                                  int nargs) {
  size_t p = BeginPacket(start, true, true);
  Intern(name, args, nargs);
  WriteEvent(track, kSliceBegin, name, args, nargs, 0, 0);
  EndPacket(p);
}

void PerfettoProtoSink::Instant(uint64_t track, uint64_t ts, Name name, const Arg* args,
                                int nargs) {
  size_t p = BeginPacket(ts, true, true);
  Intern(name, args, nargs);
  WriteEvent(track, kInstant, name, args, nargs, 0, 0);
  EndPacket(p);
}

void PerfettoProtoSink::Counter(uint64_t track, uint64_t ts, int64_t value) {
  size_t p = BeginPacket(ts, true, false);
  size_t te = buf_.BeginNested(kPacketTrackEvent);
  buf_.VarintField(kTeType, kCounter);
  buf_.VarintField(kTeTrackUuid, track);
  buf_.IntField(kTeCounterValue, value);
  buf_.EndNested(te);
  EndPacket(p);
}

bool PerfettoProtoSink::Finish() {
  MaybeFlush(0);
  if (fflush(out_) != 0) write_error_ = true;
  return !write_error_;
}

// ---------------------------------------------------------------- Chrome JSON

ChromeJsonSink::ChromeJsonSink(FILE* out) : TraceSink(out) {
  Raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
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

const ChromeJsonSink::TrackInfo& ChromeJsonSink::Track(uint64_t uuid) {
  static const TrackInfo kUnknown{0, 0, ""};
  auto it = tracks_.find(uuid);
  return it == tracks_.end() ? kUnknown : it->second;
}

void ChromeJsonSink::EventHead(const char* ph, const TrackInfo& t, uint64_t ts) {
  Separator();
  Raw("{\"ph\":\"");
  Raw(ph);
  Raw("\",\"pid\":");
  Int(t.pid);
  Raw(",\"tid\":");
  Int(t.tid);
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
        Str(args[i].s);
        break;
    }
  }
  Raw("}");
}

void ChromeJsonSink::ProcessTrack(uint64_t uuid, int32_t pid, std::string_view name) {
  tracks_[uuid] = TrackInfo{pid, 0, ""};
  Separator();
  Raw("{\"ph\":\"M\",\"pid\":");
  Int(pid);
  Raw(",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":");
  Str(name);
  Raw("}}");
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::ThreadTrack(uint64_t uuid, uint64_t, int32_t pid, int32_t tid,
                                 std::string_view name) {
  tracks_[uuid] = TrackInfo{pid, tid, ""};
  Separator();
  Raw("{\"ph\":\"M\",\"pid\":");
  Int(pid);
  Raw(",\"tid\":");
  Int(tid);
  Raw(",\"name\":\"thread_name\",\"args\":{\"name\":");
  Str(name);
  Raw("}}");
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::NamedTrack(uint64_t uuid, uint64_t parent, std::string_view name,
                                int32_t json_pid, int32_t json_tid) {
  ThreadTrack(uuid, parent, json_pid, json_tid, name);
}

void ChromeJsonSink::CounterTrack(uint64_t uuid, uint64_t, std::string_view name,
                                  int32_t json_pid) {
  tracks_[uuid] = TrackInfo{json_pid, 0, std::string(name)};
}

void ChromeJsonSink::Slice(uint64_t track, uint64_t start, uint64_t end, Name name,
                           const Arg* args, int nargs, uint64_t flow_out, uint64_t flow_in) {
  const TrackInfo& t = Track(track);
  EventHead("X", t, start);
  Raw(",\"dur\":");
  Micros(end >= start ? end - start : 0);
  Raw(",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  if (flow_out != 0) {
    EventHead("s", t, start);
    Raw(",\"id\":");
    Uint(flow_out);
    Raw(",\"cat\":\"flow\",\"name\":\"launch\"}");
  }
  if (flow_in != 0) {
    EventHead("f", t, start);
    Raw(",\"bp\":\"e\",\"id\":");
    Uint(flow_in);
    Raw(",\"cat\":\"flow\",\"name\":\"launch\"}");
  }
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::OpenSlice(uint64_t track, uint64_t start, Name name, const Arg* args,
                               int nargs) {
  EventHead("B", Track(track), start);
  Raw(",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::Instant(uint64_t track, uint64_t ts, Name name, const Arg* args,
                             int nargs) {
  EventHead("i", Track(track), ts);
  Raw(",\"s\":\"t\",\"name\":");
  Str(name.str);
  ArgsObject(args, nargs);
  Raw("}");
  MaybeFlush(kFlushBytes);
}

void ChromeJsonSink::Counter(uint64_t track, uint64_t ts, int64_t value) {
  const TrackInfo& t = Track(track);
  EventHead("C", TrackInfo{t.pid, 0, ""}, ts);
  Raw(",\"name\":");
  Str(t.name);
  Raw(",\"args\":{\"bytes\":");
  Int(value);
  Raw("}}");
  MaybeFlush(kFlushBytes);
}

bool ChromeJsonSink::Finish() {
  Raw("\n]}\n");
  MaybeFlush(0);
  if (fflush(out_) != 0) write_error_ = true;
  return !write_error_;
}

}  // namespace perfetto_internal
}  // namespace analyzer
}  // namespace profagent
