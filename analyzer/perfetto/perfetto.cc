#include "analyzer/perfetto/perfetto.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "analyzer/perfetto/trace_sink.h"
#include "analyzer/reader.h"
#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {

using perfetto_internal::Arg;
using perfetto_internal::ChromeJsonSink;
using perfetto_internal::Name;
using perfetto_internal::PerfettoProtoSink;
using perfetto_internal::TraceSink;
namespace pi = perfetto_internal;

namespace {

// Linux pids stay below 2^22; synthetic pids/tids (collisions, unknown tids) start there.
constexpr int32_t kSyntheticBase = 1 << 22;
constexpr uint64_t kSynthIidBase = uint64_t{1} << 32;
// Strings with an id outside the dense table (kStringIdSlack) are named by iids from here, so
// that the sink's per-sequence bitmaps stay small.
constexpr uint64_t kFarIidBase = uint64_t{1} << 33;
// The agent numbers strings 1, 2, 3, ... in file order: ids up to twice the number defined so
// far plus this slack index the dense table; any other goes to a map (a corrupt id near 2^24
// made the table 400 MB).
constexpr uint64_t kStringIdSlack = 1 << 16;

enum TrackKind : uint64_t {
  kTrackProcess = 0,
  kTrackThread = 1,
  kTrackSteps = 2,
  kTrackRuns = 3,
  kTrackStream = 4,
  kTrackMemory = 5,
  kTrackStreamLane = 6,  // overlapping ops of one stream (see StreamOps)
  kTrackRanges = 7,      // NVTX start/end and named-domain ranges of a thread (see HostLanes)
  kTrackHostLane = 8,    // overlapping host slices of a thread (see HostLanes)
  kTrackPolls = 9,       // not-ready poll runs of a thread (see HostLanes)
};

constexpr int32_t kCudaErrorNotReady = 600;  // what cudaEventQuery/cudaStreamQuery return

// Lanes per thread and kind of host slices that may overlap (see FileConverter::HostLanes).
constexpr size_t kMaxHostLanes = 4096;

// A slot of a reorder window's pool: a freed one, else a new one.
template <typename T>
uint32_t TakeSlot(std::vector<T>* pool, std::vector<uint32_t>* free) {
  if (!free->empty()) {
    const uint32_t slot = free->back();
    free->pop_back();
    return slot;
  }
  pool->emplace_back();
  return uint32_t(pool->size() - 1);
}

// Small values keep the varints short (4 bytes for the first 127 files).
uint64_t TrackUuid(uint32_t file, TrackKind kind, uint64_t id) {
  return (uint64_t{file + 1} << 24) | (uint64_t{kind} << 20) | (id & ((uint64_t{1} << 20) - 1));
}

// Below 2^53 so JSON readers (doubles) keep it exact.
uint64_t FlowId(uint32_t file, uint64_t corr) {
  return (uint64_t{file + 1} << 40) | (corr & ((uint64_t{1} << 40) - 1));
}

const char* KindName(EventKind k) {
  switch (k) {
    case EV_LAUNCH: return "launch";
    case EV_API: return "api";
    case EV_MEMCPY: return "memcpy";
    case EV_MEMSET: return "memset";
    case EV_ALLOC: return "alloc";
    case EV_FREE: return "free";
    case EV_SYNC: return "sync";
    case EV_NVTX_RANGE: return "nvtx range";
    case EV_NVTX_MARK: return "nvtx mark";
    case EV_COLLECTIVE: return "collective";
    case EV_GRAPH_LAUNCH: return "graph launch";
    case EV_STEP: return "step";
    case EV_RUN: return "run";
    case EV_NVTX_PUSH: return "nvtx range (open)";
    case EV_STREAM: return "stream";
    case EV_EVENT: return "event";
    case EV_GROUP: return "group";
    case EV_COMM: return "comm";
    case EV_MARKER: return "marker";
    default: return "event";
  }
}

const char* CopyKindName(uint32_t k) {
  switch (k) {
    case 0: return "HtoH";
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 3: return "DtoD";
    default: return "Default";
  }
}

// "128x1x1" into buf (>= 40 bytes); returns the length.
size_t FormatDims(char* buf, uint32_t x, uint32_t y, uint32_t z) {
  char* p = buf;
  const uint32_t v[3] = {x, y, z};
  for (int i = 0; i < 3; ++i) {
    if (i > 0) *p++ = 'x';
    char tmp[12];
    int n = 0;
    uint32_t d = v[i];
    do {
      tmp[n++] = static_cast<char>('0' + d % 10);
      d /= 10;
    } while (d != 0);
    while (n > 0) *p++ = tmp[--n];
  }
  return static_cast<size_t>(p - buf);
}

// Annotation string values that repeat (launch shapes, copy kinds), numbered from 1 in order
// of first use. Views stay valid for the interner's lifetime.
class ValueInterner {
 public:
  Name Get(std::string_view s) {
    auto it = ids_.find(std::string(s));
    if (it == ids_.end()) it = ids_.emplace(std::string(s), ids_.size() + 1).first;
    return Name{it->second, it->first};
  }

 private:
  std::unordered_map<std::string, uint64_t> ids_;
};

// The interned "grid" and "block" annotation values of launch shapes, remembering recent ones
// (a decode loop repeats a handful of shapes).
class ShapeCache {
 public:
  struct Shape {
    Name grid{0, {}}, block{0, {}};
  };
  explicit ShapeCache(ValueInterner* values) : values_(values) {}

  // Dimensions as the reader hands them out; a y or z of 0 reads as 1.
  const Shape& Get(const uint32_t grid[3], const uint32_t block[3]) {
    const uint32_t h = grid[0] * 2654435761u + grid[1] * 40503u + grid[2] * 97u +
                       block[0] * 2246822519u + block[1] * 3266489917u + block[2];
    Slot& s = slots_[h >> (32 - kSlotBits)];
    if (__builtin_expect(s.shape.grid.iid != 0 && memcmp(s.grid, grid, sizeof(s.grid)) == 0 &&
                             memcmp(s.block, block, sizeof(s.block)) == 0,
                         1)) {
      return s.shape;
    }
    return Fill(s, grid, block);
  }

 private:
  static constexpr uint32_t kSlotBits = 6;
  struct Slot {
    uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    Shape shape;
  };
  // Interns the grid text first, then the block's: the value numbering is by first use.
  __attribute__((noinline)) const Shape& Fill(Slot& s, const uint32_t grid[3],
                                              const uint32_t block[3]) {
    memcpy(s.grid, grid, sizeof(s.grid));
    memcpy(s.block, block, sizeof(s.block));
    s.shape.grid = Intern(grid);
    s.shape.block = Intern(block);
    return s.shape;
  }
  Name Intern(const uint32_t d[3]) {
    char text[40];
    return values_->Get(std::string_view(
        text, FormatDims(text, d[0], std::max(d[1], 1u), std::max(d[2], 1u))));
  }

  ValueInterner* values_;
  Slot slots_[1 << kSlotBits];
};

// Kernel and API names arrive mangled when the agent did not demangle them ("_Z12gemmPfi");
// show the readable form. Anything else is returned unchanged.
std::string Demangle(const std::string& s) {
  if (s.size() < 3 || s[0] != '_' || s[1] != 'Z') return s;
  int status = 0;
  char* d = abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? std::string(d) : s;
  free(d);
  return out;
}

// Streams one rank file into the sink.
class FileConverter : public ViewVisitor {
 public:
  FileConverter(TraceSink* sink, uint32_t file_index, const FileMeta& meta, int64_t offset_ns,
                int32_t pid, bool remapped, size_t counter_window)
      : sink_(sink),
        file_(file_index),
        meta_(meta),
        offset_(offset_ns),
        pid_(pid),
        remapped_(remapped),
        window_(std::max<size_t>(counter_window, 1)),
        shapes_(&values_) {
    for (int k = 0; k <= EV_MARKER; ++k) kind_names_[k] = Synth(KindName(EventKind(k)));
    for (uint32_t k = 0; k < 5; ++k) {
      memcpy_names_[k] = Synth(std::string("Memcpy ") + CopyKindName(k));
      copy_kinds_[k] = values_.Get(CopyKindName(k));
    }
    launch_name_ = Synth("cudaLaunchKernel");
    memset_name_ = Synth("Memset");
    device_op_name_ = Synth("device op");
    graph_launch_name_ = Synth("cudaGraphLaunch");
    unknown_name_ = Synth("(unnamed)");
    drops_name_ = Synth("records dropped");
  }

  void Start() {
    const std::string host = meta_.hostname.empty() ? "?" : meta_.hostname;
    std::string name = meta_.rank >= 0 ? absl::StrCat("rank ", meta_.rank, " (", host, ")")
                                       : absl::StrCat("pid ", meta_.pid, " (", host, ")");
    process_track_ = sink_->ProcessTrack(TrackUuid(file_, kTrackProcess, 0), pid_, name);
  }

  void OnRecord(const Record& r) override {
    switch (r.kind_case()) {
      case Record::kString:
        OnString(r.string().id(), r.string().value());
        break;
      case Record::kDrops:
        if (r.drops().count() != 0) {
          Arg args[2] = {Arg::Uint(pi::kArgCount, r.drops().count()),
                         Arg::Str(pi::kArgReason, r.drops().reason())};
          sink_->Instant(process_track_, last_ts_, drops_name_, args, 2, 0);
        }
        break;
      default:
        break;
    }
  }

  void OnEvent(const EventView& e) override {
    if (e.kind == EV_GRAPH_NODE) return;  // bookkeeping for the report, no call of its own
    const uint64_t start = Ts(e.start_ns);
    const uint64_t end = Ts(e.end_ns);
    Arg args[10];
    int n = 0;
    uint64_t flow_out = 0;
    bool untimed = false;
    const EventKind kind = e.kind;
    // A push/pop range still open at the end that another thread's shutdown flushed belongs
    // to the thread that pushed it.
    pi::TrackId track =
        ThreadTrack(kind == EV_NVTX_PUSH && e.start_thread != 0 ? e.start_thread : e.thread);
    HostLanes* lanes = nullptr;  // set for slices that may cross their neighbours
    // A launch's or copy's stream: the id of its device op's track, except under CUPTI timing,
    // whose tracks are CUPTI's stream ids (the flow leads there).
    const pi::ArgKey stream_key = meta_.cupti_timing ? pi::kArgStreamIndex : pi::kArgStream;
    Name name;
    switch (kind) {
      case EV_LAUNCH: {
        name = e.api != 0 ? StringName(e.api) : launch_name_;
        args[n++] = Arg::Uint(pi::kArgCorrelation, e.corr);
        if (e.grid[0] != 0) {
          // The reader has undone the value-1 and sticky-shape encodings.
          const ShapeCache::Shape& shape = shapes_.Get(e.grid, e.block);
          args[n++] = Arg::Interned(pi::kArgGrid, shape.grid);
          args[n++] = Arg::Interned(pi::kArgBlock, shape.block);
        }
        if (e.shmem != 0) args[n++] = Arg::Uint(pi::kArgShmem, e.shmem);
        args[n++] = Arg::Uint(stream_key, e.stream);
        // A failed call, or one captured into a graph, ran nothing: no flow to a device op;
        // nor under host timing, which records no device op.
        flow_out = e.ret == 0 && !e.captured && !meta_.host_timing ? e.corr : 0;
        untimed = e.end_ns == e.start_ns && meta_.launch_api_sample > 1;
        break;
      }
      case EV_MEMCPY:
      case EV_MEMSET:
        name = NameOr(e.name, e.api, kind);
        args[n++] = Arg::Uint(pi::kArgCorrelation, e.corr);
        args[n++] = Arg::Uint(pi::kArgBytes, e.bytes);
        if (kind == EV_MEMCPY) {
          args[n++] = Arg::Interned(pi::kArgCopyKind, copy_kinds_[std::min(e.copy_kind, 4u)]);
        }
        args[n++] = Arg::Uint(stream_key, e.stream);
        // 0 bytes: nothing enqueued, no device op to flow to (a batch copy's bytes are its
        // copies' sum).
        flow_out = e.ret == 0 && !e.captured && e.bytes != 0 && !meta_.host_timing ? e.corr : 0;
        break;
      case EV_GRAPH_LAUNCH:
        name = NameOr(e.name, e.api, kind);
        args[n++] = Arg::Uint(pi::kArgCorrelation, e.corr);
        args[n++] = Arg::Ptr(pi::kArgGraph, e.graph);
        flow_out = e.ret == 0 && !e.captured && !meta_.host_timing ? e.corr : 0;
        untimed = e.end_ns == e.start_ns && meta_.launch_api_sample > 1;
        break;
      case EV_ALLOC:
      case EV_FREE: {
        name = NameOr(e.name, e.api, kind);
        uint64_t bytes = e.bytes;
        uint32_t device = e.device;
        if (kind == EV_ALLOC) {
          if (e.ret == 0 && e.ptr != 0) live_[MemoryKey(e)] = LiveAlloc{bytes, e.device};
        } else {
          auto it = live_.find(MemoryKey(e));
          if (it != live_.end()) {
            if (bytes == 0) bytes = it->second.bytes;
            device = it->second.device;  // freed where it was allocated, whatever is current
            live_.erase(it);
          }
        }
        args[n++] = Arg::Uint(pi::kArgBytes, bytes);
        args[n++] = Arg::Ptr(pi::kArgPtr, e.ptr);
        if (e.ret == 0 && e.copy_kind != MEM_HOST_PINNED && bytes != 0) {
          const int64_t b = static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX));
          const int64_t delta = kind == EV_ALLOC ? b : -b;
          MemoryDelta(kind == EV_ALLOC ? start : end, device, delta);
        }
        // The memory a cudaDeviceReset released (its API is the reset's): the counter only,
        // the reset has its own slice.
        if (kind == EV_FREE && reset_api_ != 0 && (e.api != 0 ? e.api : e.name) == reset_api_) {
          return;
        }
        break;
      }
      case EV_NVTX_RANGE:
      case EV_NVTX_PUSH:
      case EV_NVTX_MARK:
      case EV_MARKER:
        name = NameOr(e.name, 0, kind);
        if (e.domain != 0) args[n++] = Arg::Str(pi::kArgDomain, StringName(e.domain).str);
        if (e.has_payload) {
          args[n++] = e.payload_double ? Arg::Double(pi::kArgPayload, e.payload_f)
                                       : Arg::Int(pi::kArgPayload, e.payload_i);
        }
        // Start/end ranges, and push/pop ranges of a named domain (each domain has its own
        // stack, so they cross the default domain's and each other's), go to the thread's
        // "NVTX ranges" lanes; the default domain's push/pop nest with the thread's calls.
        if ((e.start_end || e.domain != 0) && (kind == EV_NVTX_RANGE || kind == EV_NVTX_PUSH)) {
          // A start/end range goes to the thread that started it (recorded where it ended).
          lanes = &Lanes(e.start_thread != 0 ? e.start_thread : e.thread, kTrackRanges);
        }
        break;
      case EV_STEP:
      case EV_RUN: {
        // ScanFile checked the sub-message is well formed; it has no string fields.
        StepInfo& s = step_;
        s.ParseFromArray(e.step.data(), static_cast<int>(e.step.size()));
        uint32_t label = s.label() != 0 ? s.label() : s.phase();
        name = NameOr(label, e.name, kind);
        args[n++] = Arg::Uint(pi::kArgIndex, s.index());
        if (s.tokens() >= 0) args[n++] = Arg::Int(pi::kArgTokens, s.tokens());
        if (s.kv() >= 0) args[n++] = Arg::Int(pi::kArgKv, s.kv());
        if (s.bsz() >= 0) args[n++] = Arg::Int(pi::kArgBsz, s.bsz());
        if (s.warmup()) args[n++] = Arg::Int(pi::kArgWarmup, 1);
        if (kind == EV_STEP && s.run() != 0) args[n++] = Arg::Uint(pi::kArgRun, s.run());
        // A step rule's steps (graph launches, host syncs), which the report leaves out when
        // the application marks NVTX steps, say so.
        if (s.source() != 0 && StringName(s.source()).str != "nvtx") {
          args[n++] = Arg::Str(pi::kArgSource, StringName(s.source()).str);
        }
        lanes = &Lanes(e.thread, kind == EV_STEP ? kTrackSteps : kTrackRuns);
        break;
      }
      case EV_COLLECTIVE: {
        Collective& c = coll_;
        c.ParseFromArray(e.coll.data(), static_cast<int>(e.coll.size()));
        name = NameOr(e.name, c.op(), kind);
        args[n++] = Arg::Uint(pi::kArgBytes, c.bytes());
        args[n++] = Arg::Uint(pi::kArgCount, c.count());
        args[n++] = Arg::Uint(pi::kArgSeq, c.seq());
        args[n++] = Arg::Uint(pi::kArgComm, c.comm());
        if (c.peer() >= 0) args[n++] = Arg::Int(pi::kArgPeer, c.peer());
        // An NCCL call whose kernel the agent timed itself (CUDA events: an agent-assigned
        // correlation id, kAgentCorrBase up) flows to that device op. Under CUPTI the call's
        // kernel launch (a driver launch inside it) carries the flow.
        // The calls of an NCCL group share their kernel's id (they are written one after the
        // other at ncclGroupEnd): the first one carries the flow, as a flow cannot fork.
        if (c.corr() >= kAgentCorrBase && c.corr() != last_coll_flow_) {
          flow_out = c.corr();
          last_coll_flow_ = c.corr();
        }
        break;
      }
      default:
        name = NameOr(e.name, e.api, kind);
        if (e.calls > 1) {  // a run of polls
          args[n++] = Arg::Uint(pi::kArgCalls, e.calls);
          args[n++] = Arg::Uint(pi::kArgBusyNs, e.busy_ns);
        }
        // Not-ready polls (cudaErrorNotReady): runs of polls of handles polled in turn overlap
        // each other, so they have tracks of their own.
        if (kind == EV_API && e.ret == kCudaErrorNotReady) lanes = &Lanes(e.thread, kTrackPolls);
        break;
    }
    if (e.ret != 0) args[n++] = Arg::Int(pi::kArgRet, e.ret);
    if (lanes != nullptr) {
      AddHostSlice(*lanes, start, kind == EV_NVTX_PUSH ? kOpenEnd : std::max(start, end), name,
                   args, n);
      return;
    }
    const uint64_t flow = flow_out != 0 ? FlowId(file_, flow_out) : 0;
    if (untimed) {
      // The agent did not read this launch's return (1 in N sampled): an instant at the call,
      // not a measured zero-length slice.
      args[n++] = Arg::Interned(pi::kArgApiDur, NotTimed());
      sink_->Instant(track, start, name, args, n, flow);
      return;
    }
    switch (kind) {
      case EV_NVTX_PUSH:
        sink_->OpenSlice(track, start, name, args, n);
        break;
      case EV_NVTX_MARK:
      case EV_MARKER:
        sink_->Instant(track, start, name, args, n, 0);
        break;
      default:
        sink_->Slice(track, start, end, name, args, n, flow, 0);
        break;
    }
  }

  void OnOp(const OpView& op) override {
    StreamOps& so = Stream(op.device, op.stream);
    Arg args[6];
    int n = 0;
    Name name;
    switch (op.kind) {
      case DOP_KERNEL:
        name = op.name != 0 ? StringName(op.name) : unknown_name_;
        break;
      case DOP_MEMCPY:
        name = op.name != 0 ? StringName(op.name) : memcpy_names_[std::min(op.copy_kind, 4u)];
        break;
      case DOP_MEMSET:
        name = op.name != 0 ? StringName(op.name) : memset_name_;
        break;
      default:
        // CUDA-event timing times a graph launch as one op, named as ops.csv and report.md do.
        name = op.name != 0    ? StringName(op.name)
               : op.graph != 0 ? graph_launch_name_
                               : device_op_name_;
        break;
    }
    args[n++] = Arg::Uint(pi::kArgCorrelation, op.corr);
    if (op.grid[0] != 0) {
      const ShapeCache::Shape& shape = shapes_.Get(op.grid, op.block);
      args[n++] = Arg::Interned(pi::kArgGrid, shape.grid);
      args[n++] = Arg::Interned(pi::kArgBlock, shape.block);
    }
    if (op.bytes != 0) args[n++] = Arg::Uint(pi::kArgBytes, op.bytes);
    if (op.graph != 0) args[n++] = Arg::Ptr(pi::kArgGraph, op.graph);
    const uint32_t slot = TakeSlot(&so.pool, &so.free);
    PendingOp& p = so.pool[slot];
    p.end = Ts(op.end_ns);
    p.name = name;
    std::copy(args, args + n, p.args);
    p.nargs = n;
    p.flow_in = op.corr != 0 ? FlowId(file_, op.corr) : 0;
    // The nodes of a graph launch share its correlation id: the flow goes from the launch
    // through each of them in time order (a flow cannot fork; ending at the first node left
    // the others with a dangling end).
    p.flow_through = op.graph != 0;
    const uint64_t start = Ts(op.start_ns);
    so.heap.push_back(OpKey{start, so.next_seq++, slot});
    std::push_heap(so.heap.begin(), so.heap.end(), std::greater<OpKey>());
    so.latest_start = std::max(so.latest_start, start);
    while (!so.heap.empty() && (so.heap.size() > kOpWindow ||
                                so.heap.front().start + kOpHorizonNs < so.latest_start)) {
      PlaceOp(so);
    }
  }

  // Host slices written where they may cross another (more than kMaxHostLanes overlapping).
  uint64_t misplaced() const { return misplaced_; }

  // Drains the device-op windows and the memory counter window.
  void Finish() {
    for (auto& kv : streams_) {
      while (!kv.second.heap.empty()) PlaceOp(kv.second);
    }
    for (auto& kv : host_lanes_) {
      while (!kv.second.heap.empty()) PlaceHostSlice(kv.second);
    }
    while (!pending_.empty()) PopMemory();
  }

 private:
  // Device ops of one stream are written in start order and never overlap on a track, which
  // trace_processor needs: it sorts a track's events by time and an end closes the innermost
  // open slice, so an op that starts before the previous one ended (CUDA-event timing rounds
  // the two readings apart; records of one stream can arrive out of order) would end the wrong
  // slice, and the JSON importer drops an overlapping complete event. Ops wait in a window
  // (kOpWindow ops or kOpHorizonNs) to be sorted; one that starts at most kOpClampNs before the
  // previous end starts at that end (timing resolution: the slice is shorter than the op by that
  // much; the agent keeps a stream's CUDA-event times in order, so only older files have them);
  // one that truly overlaps goes to an "overlapping" lane track under the stream's, whole.
  static constexpr size_t kOpWindow = 4096;
  static constexpr uint64_t kOpHorizonNs = 100'000'000;
  static constexpr uint64_t kOpClampNs = 1000;
  struct PendingOp {
    uint64_t end;
    Name name;
    Arg args[6];
    int nargs;
    uint64_t flow_in;
    bool flow_through;
  };
  struct OpKey {  // heap entries stay small: the op waits in the pool
    uint64_t start, seq;
    uint32_t slot;
    bool operator>(const OpKey& o) const {
      return start != o.start ? start > o.start : seq > o.seq;
    }
  };
  struct StreamOps {
    uint32_t device = 0, stream = 0, index = 0;
    std::vector<OpKey> heap;  // min-heap by start
    std::vector<PendingOp> pool;
    std::vector<uint32_t> free;
    uint64_t next_seq = 0, latest_start = 0;
    std::vector<std::pair<pi::TrackId, uint64_t>> lanes;  // track, end of its last op
  };

  void PlaceOp(StreamOps& so) {
    std::pop_heap(so.heap.begin(), so.heap.end(), std::greater<OpKey>());
    const OpKey key = so.heap.back();
    so.heap.pop_back();
    const PendingOp& p = so.pool[key.slot];
    so.free.push_back(key.slot);
    uint64_t start = key.start;
    size_t lane = 0;
    for (; lane < so.lanes.size(); ++lane) {
      const uint64_t busy_until = so.lanes[lane].second;
      if (start >= busy_until) break;
      if (start + kOpClampNs >= busy_until && p.end >= busy_until) {
        start = busy_until;
        break;
      }
    }
    if (lane == so.lanes.size()) {
      const uint64_t id = (uint64_t{so.index} << 6) | std::min<size_t>(lane, 63);
      const pi::TrackId t = sink_->NamedTrack(
          TrackUuid(file_, kTrackStreamLane, id), so.lanes[0].first,
          absl::StrCat("GPU ", so.device, " stream ", so.stream, " (overlapping ", lane, ")"),
          pid_, JsonTid(kTrackStreamLane, id));
      so.lanes.emplace_back(t, 0);
    }
    so.lanes[lane].second = std::max(so.lanes[lane].second, p.end);
    sink_->Slice(so.lanes[lane].first, start, p.end, p.name, p.args, p.nargs,
                 p.flow_through ? p.flow_in : 0, p.flow_in);
  }

  // Host slices that need not nest with their neighbours: NVTX start/end ranges (process-scoped,
  // recorded by the thread that ended them, free to overlap), steps and runs (a step ended on
  // another thread, pipelined micro-batches). Slices on one track must nest, or trace_processor
  // closes the wrong one; these arrive in end order, so they wait in a window (kHostWindow
  // slices or kHostHorizonNs) and are placed in start order, the longer first at equal starts,
  // each on the first lane where it nests inside every slice still open there, else on a new
  // "(overlapping k)" lane under the first, so no duration is changed.
  static constexpr size_t kHostWindow = 4096;
  static constexpr uint64_t kHostHorizonNs = 1'000'000'000;
  static constexpr uint64_t kOpenEnd = UINT64_MAX;  // a range still open when the file ended
  struct PendingHost {
    Name name;
    Arg args[10];
    int nargs;
  };
  struct HostKey {
    uint64_t start, end, seq;
    uint32_t slot;
    bool operator>(const HostKey& o) const {
      if (start != o.start) return start > o.start;
      if (end != o.end) return end < o.end;
      return seq > o.seq;
    }
  };
  struct HostLane {
    pi::TrackId track;
    uint64_t last_start = 0;
    std::vector<uint64_t> open;  // ends of the slices open at last_start, outermost first
  };
  struct HostLanes {
    uint32_t thread = 0;
    TrackKind kind = kTrackSteps;
    std::vector<HostKey> heap;  // min-heap by (start, longer first)
    std::vector<PendingHost> pool;
    std::vector<uint32_t> free;
    uint64_t next_seq = 0, latest_start = 0;
    std::vector<HostLane> lanes;  // made at first sight: lanes[0] is the thread's child track
  };

  static const char* HostTrackName(TrackKind kind) {
    return kind == kTrackSteps   ? "steps"
           : kind == kTrackRuns  ? "runs"
           : kind == kTrackPolls ? "polls"
                                 : "NVTX ranges";
  }

  HostLanes& Lanes(uint32_t thread, TrackKind kind) {
    HostLanes& hl = host_lanes_[(uint64_t{kind} << 32) | thread];
    if (hl.lanes.empty()) {
      hl.thread = thread;
      hl.kind = kind;
      hl.lanes.emplace_back();
      hl.lanes[0].track = ChildTrack(thread, kind, HostTrackName(kind));
    }
    return hl;
  }

  void AddHostSlice(HostLanes& hl, uint64_t start, uint64_t end, Name name, const Arg* args,
                    int nargs) {
    const uint32_t slot = TakeSlot(&hl.pool, &hl.free);
    PendingHost& p = hl.pool[slot];
    p.name = name;
    std::copy(args, args + nargs, p.args);
    p.nargs = nargs;
    hl.heap.push_back(HostKey{start, end, hl.next_seq++, slot});
    std::push_heap(hl.heap.begin(), hl.heap.end(), std::greater<HostKey>());
    hl.latest_start = std::max(hl.latest_start, start);
    while (!hl.heap.empty() && (hl.heap.size() > kHostWindow ||
                                hl.heap.front().start + kHostHorizonNs < hl.latest_start)) {
      PlaceHostSlice(hl);
    }
  }

  void PlaceHostSlice(HostLanes& hl) {
    std::pop_heap(hl.heap.begin(), hl.heap.end(), std::greater<HostKey>());
    const HostKey key = hl.heap.back();
    hl.heap.pop_back();
    const PendingHost& p = hl.pool[key.slot];
    hl.free.push_back(key.slot);
    // A lane takes the slice when its slices so far started no later (a late arrival cannot
    // be checked against what was placed after its start) and it ends within every slice still
    // open there (their ends do not increase inwards; those ended by its start are closed).
    size_t lane = 0, keep = 0;
    for (; lane < hl.lanes.size(); ++lane) {
      const HostLane& l = hl.lanes[lane];
      if (key.start < l.last_start) continue;
      keep = l.open.size();
      while (keep > 0 && l.open[keep - 1] <= key.start) --keep;
      if (keep == 0 || key.end <= l.open[keep - 1]) break;
    }
    if (lane == hl.lanes.size()) {
      if (lane < kMaxHostLanes) {
        const uint64_t id = next_host_lane_++;
        HostLane l;
        l.track =
            sink_->NamedTrack(TrackUuid(file_, kTrackHostLane, id), hl.lanes[0].track,
                              absl::StrCat(HostTrackName(hl.kind), " (", ThreadName(hl.thread),
                                           ") (overlapping ", lane, ")"),
                              pid_, JsonTid(kTrackHostLane, id));
        hl.lanes.push_back(std::move(l));
        keep = 0;
      } else {  // pathological: written where it may cross (counted, see misplaced())
        ++misplaced_;
        lane = hl.lanes.size() - 1;
        keep = 0;
      }
    }
    HostLane& l = hl.lanes[lane];
    l.open.resize(keep);
    l.open.push_back(key.end);
    l.last_start = key.start;
    if (key.end == kOpenEnd) {
      sink_->OpenSlice(l.track, key.start, p.name, p.args, p.nargs);
    } else {
      sink_->Slice(l.track, key.start, key.end, p.name, p.args, p.nargs, 0, 0);
    }
  }

  struct MemUpdate {
    uint64_t ts;
    uint64_t seq;
    uint32_t device;
    int64_t delta;
    bool operator>(const MemUpdate& o) const {
      return ts != o.ts ? ts > o.ts : seq > o.seq;
    }
  };

  void OnString(uint32_t id, const std::string& value) {
    if (id < (1u << 24) && id <= 2 * strings_defined_ + kStringIdSlack) {
      ++strings_defined_;
      if (id >= names_.size()) names_.resize(std::max<size_t>(id + 1, names_.size() * 2));
      string_store_.push_back(Demangle(value));
      const std::string& s = string_store_.back();
      names_[id] = Name{s.empty() ? 0 : id, s};
      if (s == "cudaDeviceReset") reset_api_ = id;
    } else {
      big_strings_[id] = Demangle(value);
    }
  }

  // The api_dur value of untimed launches, interned at first use (a file whose launches were
  // all timed keeps the value numbering it had before schema 1.1).
  Name NotTimed() {
    if (not_timed_.iid == 0) {
      not_timed_ =
          values_.Get(absl::StrCat("not timed (1 in ", meta_.launch_api_sample, " sampled)"));
    }
    return not_timed_;
  }

  // local + offset, clamped to [0, 2^64) (corrupt times or offsets must not overflow).
  uint64_t Ts(uint64_t local) {
    uint64_t r;
    if (offset_ >= 0) {
      if (__builtin_add_overflow(local, static_cast<uint64_t>(offset_), &r)) r = UINT64_MAX;
    } else {
      const uint64_t back = 0 - static_cast<uint64_t>(offset_);
      r = local > back ? local - back : 0;
    }
    last_ts_ = r;
    return r;
  }

  Name Synth(const std::string& s) {
    auto it = synth_.find(s);
    if (it != synth_.end()) return Name{it->second, it->first};
    uint64_t iid = kSynthIidBase + synth_.size();
    auto ins = synth_.emplace(s, iid);
    return Name{iid, ins.first->first};
  }

  uint32_t reset_api_ = 0;  // string id of "cudaDeviceReset" (its implied frees: no slice)

  Name StringName(uint32_t id) {
    if (__builtin_expect(id < names_.size() && names_[id].iid != 0, 1)) return names_[id];
    return FarStringName(id);
  }
  __attribute__((noinline)) Name FarStringName(uint32_t id) {
    auto it = big_strings_.find(id);
    if (it != big_strings_.end()) return Name{kFarIidBase + id, it->second};
    return unknown_name_;
  }

  Name NameOr(uint32_t first, uint32_t second, EventKind kind) {
    if (first != 0) return StringName(first);
    if (second != 0) return StringName(second);
    return uint32_t(kind) <= EV_MARKER ? kind_names_[kind] : unknown_name_;
  }

  int32_t Tid(uint32_t thread) {
    auto it = meta_.threads.find(thread);
    if (!remapped_ && it != meta_.threads.end() && it->second.tid != 0) {
      return static_cast<int32_t>(it->second.tid);
    }
    if (remapped_ && it != meta_.threads.end() && it->second.tid == meta_.pid) return pid_;
    return kSyntheticBase + static_cast<int32_t>((file_ + 1) * 4096 + thread % 4096);
  }

  std::string ThreadName(uint32_t thread) {
    auto it = meta_.threads.find(thread);
    if (it != meta_.threads.end() && !it->second.name.empty()) return it->second.name;
    return absl::StrCat("thread ", thread);
  }

  pi::TrackId ThreadTrack(uint32_t thread) {
    if (__builtin_expect(thread == last_thread_, 1)) return last_thread_track_;
    return SwitchThreadTrack(thread);
  }
  __attribute__((noinline)) pi::TrackId SwitchThreadTrack(uint32_t thread) {
    auto it = threads_.find(thread);
    if (it == threads_.end()) {
      const pi::TrackId id = sink_->ThreadTrack(TrackUuid(file_, kTrackThread, thread),
                                                process_track_, pid_, Tid(thread),
                                                ThreadName(thread));
      it = threads_.emplace(thread, id).first;
    }
    last_thread_ = thread;
    last_thread_track_ = it->second;
    return it->second;
  }

  pi::TrackId ChildTrack(uint32_t thread, TrackKind kind, const char* what) {
    const uint64_t uuid = TrackUuid(file_, kind, thread);
    auto it = children_.find(uuid);
    if (it == children_.end()) {
      const pi::TrackId parent = ThreadTrack(thread);
      const pi::TrackId id =
          sink_->NamedTrack(uuid, parent, absl::StrCat(what, " (", ThreadName(thread), ")"),
                            pid_, JsonTid(kind, thread));
      it = children_.emplace(uuid, id).first;
    }
    return it->second;
  }

  static int32_t JsonTid(TrackKind kind, uint64_t id) {
    return static_cast<int32_t>(0x40000000u | (uint32_t(kind) << 24) | uint32_t(id & 0xffffff));
  }

  // The stream's state, its track (lanes[0]) made at first sight.
  StreamOps& Stream(uint32_t device, uint32_t stream) {
    const uint64_t key = (uint64_t{device} << 32) | stream;
    if (key == last_stream_key_ && last_stream_ != nullptr) return *last_stream_;
    // Few streams in practice: a short linear scan beats the map.
    for (const auto& kv : recent_streams_) {
      if (kv.first == key) {
        last_stream_key_ = key;
        last_stream_ = kv.second;
        return *kv.second;
      }
    }
    auto it = streams_.find(key);
    if (it == streams_.end()) {
      const uint32_t index = uint32_t(streams_.size());
      // JSON: a thread id per stream track, by its index (a stream's handle or CUPTI id does
      // not fit a tid: two streams must not share one).
      // The name the application gave the stream (NVTX), after its number.
      auto named = meta_.stream_names.find({device, stream});
      const pi::TrackId id = sink_->NamedTrack(
          TrackUuid(file_, kTrackStream, index), process_track_,
          named == meta_.stream_names.end()
              ? absl::StrCat("GPU ", device, " stream ", stream)
              : absl::StrCat("GPU ", device, " stream ", stream, " (", named->second, ")"),
          pid_, JsonTid(kTrackStream, index));
      StreamOps so;
      so.device = device;
      so.stream = stream;
      so.index = index;
      so.lanes.emplace_back(id, 0);
      it = streams_.emplace(key, std::move(so)).first;
    }
    if (recent_streams_.size() < 16) recent_streams_.emplace_back(key, &it->second);
    last_stream_key_ = key;
    last_stream_ = &it->second;
    return it->second;
  }

  pi::TrackId MemoryTrack(uint32_t device) {
    const uint64_t uuid = TrackUuid(file_, kTrackMemory, device);
    auto it = children_.find(uuid);
    if (it == children_.end()) {
      const pi::TrackId id = sink_->CounterTrack(
          uuid, process_track_, absl::StrCat("GPU ", device, " memory"), pid_);
      it = children_.emplace(uuid, id).first;
    }
    return it->second;
  }

  void MemoryDelta(uint64_t ts, uint32_t device, int64_t delta) {
    pending_.push(MemUpdate{ts, mem_seq_++, device, delta});
    if (pending_.size() > window_) PopMemory();
  }

  void PopMemory() {
    MemUpdate u = pending_.top();
    pending_.pop();
    int64_t& v = mem_value_[u.device];
    if (__builtin_add_overflow(v, u.delta, &v)) v = u.delta > 0 ? INT64_MAX : INT64_MIN;
    sink_->Counter(MemoryTrack(u.device), u.ts, v);
  }

  TraceSink* sink_;
  uint32_t file_;
  const FileMeta& meta_;
  int64_t offset_;
  int32_t pid_;
  bool remapped_;
  size_t window_;
  pi::TrackId process_track_ = 0;
  uint64_t last_ts_ = 0;

  // String records: dense ids (below 2^24, see kStringIdSlack) by index (iid = id, 0 for an
  // empty or unknown string; the text in string_store_, which never moves), any other in
  // big_strings_ (iid kFarIidBase + id).
  uint64_t strings_defined_ = 0;
  std::vector<Name> names_;
  std::deque<std::string> string_store_;
  std::unordered_map<uint32_t, std::string> big_strings_;
  std::unordered_map<std::string, uint64_t> synth_;
  Name kind_names_[EV_MARKER + 1];
  Name memcpy_names_[5];
  Name launch_name_, memset_name_, device_op_name_, graph_launch_name_, unknown_name_, drops_name_;
  ValueInterner values_;
  Name copy_kinds_[5];
  ShapeCache shapes_;
  Name not_timed_{0, {}};  // see NotTimed()
  StepInfo step_;          // scratch for EV_STEP / EV_RUN
  Collective coll_;        // scratch for EV_COLLECTIVE

  std::unordered_map<uint32_t, pi::TrackId> threads_;
  std::unordered_map<uint64_t, pi::TrackId> children_;  // steps, runs, memory: by uuid
  uint32_t last_thread_ = ~0u;
  pi::TrackId last_thread_track_ = 0;
  // By device << 32 | stream; ordered, so that Finish writes the same bytes on every run;
  // node-based, so that the caches' pointers stay valid.
  std::map<uint64_t, StreamOps> streams_;
  std::vector<std::pair<uint64_t, StreamOps*>> recent_streams_;
  uint64_t last_stream_key_ = ~uint64_t{0};
  StreamOps* last_stream_ = nullptr;
  std::map<uint64_t, HostLanes> host_lanes_;  // by kind << 32 | thread; ordered, as streams_
  uint64_t next_host_lane_ = 0;
  uint64_t misplaced_ = 0;  // host slices beyond kMaxHostLanes lanes

  struct LiveAlloc {
    uint64_t bytes;
    uint32_t device;
  };
  std::unordered_map<uint64_t, LiveAlloc> live_;  // ptr -> live allocation
  uint64_t last_coll_flow_ = 0;                   // correlation id of the last NCCL call's flow
  std::priority_queue<MemUpdate, std::vector<MemUpdate>, std::greater<MemUpdate>> pending_;
  uint64_t mem_seq_ = 0;
  std::unordered_map<uint32_t, int64_t> mem_value_;
};

}  // namespace

absl::StatusOr<FileMeta> ScanFileMeta(const std::string& path) {
  {
    // Same preamble checks and messages as the main pass.
    auto r = RecordReader::Open(path);
    if (!r.ok()) return r.status();
  }
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> closer(f, fclose);
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot stat: ", strerror(errno)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  setvbuf(f, nullptr, _IOFBF, 1 << 16);
  if (fseek(f, kFilePreambleBytes, SEEK_SET) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": cannot seek past the preamble"));
  }
  FileMeta meta;
  meta.path = path;
  uint64_t off = kFilePreambleBytes;
  Record rec;
  std::string buf;
  bool rank_from_process = false;
  for (;;) {
    const uint64_t frame_start = off;
    uint64_t len = 0;
    int shift = 0;
    int c;
    size_t nbytes = 0;
    bool eof = false;
    for (;;) {
      c = getc_unlocked(f);
      if (c == EOF) {
        eof = true;
        break;
      }
      ++nbytes;
      if (shift >= 63) {
        return absl::DataLossError(absl::StrCat(path, ": offset ", frame_start,
                                                ": corrupt frame length (varint too long)"));
      }
      len |= uint64_t(c & 0x7f) << shift;
      shift += 7;
      if ((c & 0x80) == 0) break;
    }
    if (eof) break;  // clean end, or a length cut short (the main pass warns)
    if (len > kMaxFrameBytes) {
      return absl::DataLossError(absl::StrCat(path, ": offset ", frame_start,
                                              ": corrupt frame length ", len, " (limit ",
                                              kMaxFrameBytes, ")"));
    }
    off += nbytes;
    if (off + len > size) break;  // truncated last frame
    off += len;
    if (len == 0) continue;
    c = getc_unlocked(f);
    const int field = (c & 0x80) == 0 ? (c >> 3) : 0;
    const bool wanted = field == Record::kHeader || field == Record::kProcess ||
                        field == Record::kClockOffset || field == Record::kThread ||
                        field == Record::kDeviceInfo || field == Record::kStreamInfo;
    if (!wanted) {
      if (fseek(f, static_cast<long>(len - 1), SEEK_CUR) != 0) {
        return absl::DataLossError(absl::StrCat(path, ": offset ", frame_start, ": seek failed"));
      }
      continue;
    }
    buf.resize(len);
    buf[0] = static_cast<char>(c);
    if (len > 1 && fread(&buf[1], 1, len - 1, f) != len - 1) break;
    if (!rec.ParseFromString(buf)) {
      return absl::DataLossError(
          absl::StrCat(path, ": offset ", frame_start, ": corrupt record (", len, " bytes)"));
    }
    switch (rec.kind_case()) {
      case Record::kHeader: {
        const Header& h = rec.header();
        meta.has_header = true;
        meta.pid = h.pid();
        meta.hostname = h.hostname();
        if (!rank_from_process) meta.rank = h.rank();
        meta.start_realtime_ns = h.start_realtime_ns();
        meta.start_monotonic_ns = h.start_monotonic_ns();
        meta.boot_id_hash = h.boot_id_hash();
        meta.launch_api_sample = h.launch_api_sample();
        meta.host_timing = h.gpu_timing() == GPU_TIMING_HOST;
        meta.cupti_timing = h.gpu_timing() == GPU_TIMING_CUPTI;
        break;
      }
      case Record::kProcess:
        if (rec.process().gpu_timing() != GPU_TIMING_UNKNOWN) {
          meta.host_timing = rec.process().gpu_timing() == GPU_TIMING_HOST;
          meta.cupti_timing = rec.process().gpu_timing() == GPU_TIMING_CUPTI;
        }
        if (rec.process().rank() >= 0) {
          meta.rank = rec.process().rank();
          rank_from_process = true;
        }
        break;
      case Record::kClockOffset: {
        const ClockOffset& co = rec.clock_offset();
        if (!meta.has_clock_offset || co.error_ns() < meta.clock_error_ns) {
          meta.has_clock_offset = true;
          meta.clock_offset_ns = co.offset_ns();
          meta.clock_error_ns = co.error_ns();
          meta.clock_method = co.method();
        }
        break;
      }
      case Record::kThread: {
        FileMeta::Thread& t = meta.threads[rec.thread().thread()];
        t.tid = rec.thread().tid();
        if (!rec.thread().name().empty()) t.name = rec.thread().name();
        break;
      }
      case Record::kDeviceInfo:
        meta.devices[rec.device_info().device()] = rec.device_info().name();
        break;
      case Record::kStreamInfo: {
        const StreamInfo& si = rec.stream_info();
        meta.stream_names[{si.device(), si.stream()}] = si.name();
        break;
      }
      default:
        break;
    }
  }
  return meta;
}

std::vector<FileAlignment> ComputeAlignment(const std::vector<FileMeta>& files) {
  std::vector<FileAlignment> out(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    out[i].path = files[i].path;
    out[i].rank = files[i].rank;
    out[i].method = "none";
  }
  if (files.size() <= 1) return out;
  size_t ref = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].rank == 0) {
      ref = i;
      break;
    }
  }
  const FileMeta& r = files[ref];
  int64_t ref_offset = 0;
  uint64_t ref_error = 0;
  if (r.has_clock_offset) {
    ref_offset = r.clock_offset_ns;
    ref_error = r.clock_error_ns;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const FileMeta& f = files[i];
    FileAlignment& a = out[i];
    if (f.has_clock_offset) {
      a.offset_ns = f.clock_offset_ns;
      a.error_ns = f.clock_error_ns;
      a.method = absl::StrCat("clock_offset:", f.clock_method.empty() ? "?" : f.clock_method);
    } else if (i == ref) {
      a.method = "reference";
    } else if (f.boot_id_hash != 0 && f.boot_id_hash == r.boot_id_hash) {
      a.offset_ns = ref_offset;
      a.error_ns = ref_error;
      a.method = "boot_id";
    } else if (f.has_header && r.has_header && f.start_realtime_ns != 0 &&
               r.start_realtime_ns != 0) {
      // local -> realtime -> reference monotonic -> rank 0.
      // In wrapping 64-bit arithmetic: corrupt clocks give a wrong offset, not overflow.
      const uint64_t f_rt = f.start_realtime_ns - f.start_monotonic_ns;
      const uint64_t r_rt = r.start_realtime_ns - r.start_monotonic_ns;
      a.offset_ns = static_cast<int64_t>(f_rt - r_rt + static_cast<uint64_t>(ref_offset));
      a.method = "realtime";
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ResolveProfileInputs(const std::string& file_or_dir) {
  struct stat st;
  if (stat(file_or_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return ListProfileFiles(file_or_dir);
  }
  return std::vector<std::string>{file_or_dir};
}

std::string DefaultTraceOutputPath(const std::string& file_or_dir, TraceFormat format) {
  const char* ext = format == TraceFormat::kChromeJson ? ".json" : ".pftrace";
  struct stat st;
  if (stat(file_or_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string dir = file_or_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + "/trace" + ext;
  }
  std::string base = file_or_dir;
  if (base.size() > 3 && base.compare(base.size() - 3, 3, ".pb") == 0) {
    base.resize(base.size() - 3);
  }
  return base + ext;
}

namespace {

// Appends the file at `path` to `out_fd` (an in-kernel copy where the filesystem allows).
absl::Status AppendFile(const std::string& path, int out_fd, const std::string& out_path) {
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    return absl::DataLossError(absl::StrCat(path, ": cannot reopen: ", strerror(errno)));
  }
  bool kernel_copy = true;
  std::vector<char> buf;
  for (;;) {
    ssize_t n;
    if (kernel_copy) {
      n = copy_file_range(in, nullptr, out_fd, nullptr, size_t{1} << 30, 0);
      if (n < 0 && (errno == ENOSYS || errno == EXDEV || errno == EINVAL ||
                    errno == EOPNOTSUPP)) {
        kernel_copy = false;
        buf.resize(1 << 20);
        continue;
      }
    } else {
      n = read(in, buf.data(), buf.size());
      for (ssize_t done = 0; n > 0 && done < n;) {
        const ssize_t w = write(out_fd, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          n = -1;
          break;
        }
        done += w;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      close(in);
      if (n == 0) return absl::OkStatus();
      return absl::DataLossError(absl::StrCat(out_path, ": write error: ", strerror(err)));
    }
  }
}

// What converting one input file produced.
struct PartResult {
  absl::Status status;
  FileSummary summary;
  uint64_t events = 0;
  uint64_t bytes = 0;
  uint64_t misplaced = 0;
};

}  // namespace

absl::Status ExportTrace(const std::vector<std::string>& all_inputs, const std::string& out_path,
                         const ExportOptions& options, ExportStats* stats) {
  ExportStats local;
  ExportStats* s = stats != nullptr ? stats : &local;
  if (all_inputs.empty()) return absl::InvalidArgumentError("no input files");
  // Two files of one process (the same pid, host, boot and start: a copy, a symlink) would draw
  // it twice: the larger one is kept, as the report keeps the one with more records.
  std::vector<std::string> inputs;
  std::vector<FileMeta> metas;
  std::map<std::tuple<uint32_t, std::string, uint64_t, uint64_t, uint64_t>, size_t> seen;
  auto size_of = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
  };
  for (const std::string& path : all_inputs) {
    auto m = ScanFileMeta(path);
    if (!m.ok()) return m.status();
    if (m->start_monotonic_ns != 0) {
      auto key = std::make_tuple(m->pid, m->hostname, m->boot_id_hash, m->start_monotonic_ns,
                                 m->start_realtime_ns);
      auto it = seen.find(key);
      if (it != seen.end()) {
        std::string& other = inputs[it->second];
        const bool replace = size_of(path) > size_of(other);
        s->warnings.push_back(absl::StrCat(replace ? other : path, ": the same process as ",
                                           replace ? path : other, " (a copy of it?): left out"));
        if (replace) {
          other = path;
          metas[it->second] = std::move(*m);
        }
        continue;
      }
      seen.emplace(key, inputs.size());
    }
    inputs.push_back(path);
    metas.push_back(std::move(*m));
  }
  const size_t n = inputs.size();
  s->alignment = ComputeAlignment(metas);
  std::vector<int32_t> pids(n);
  std::vector<char> remapped(n, 0);
  std::set<int32_t> used_pids;
  for (size_t i = 0; i < n; ++i) {
    pids[i] = static_cast<int32_t>(metas[i].pid);
    if (pids[i] <= 0 || pids[i] >= kSyntheticBase || used_pids.count(pids[i]) != 0) {
      pids[i] = kSyntheticBase + static_cast<int32_t>(i);
      remapped[i] = 1;
    }
    used_pids.insert(pids[i]);
  }

  const std::string tmp_path = out_path + ".partial";
  const int out = open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(out_path, ": cannot create: ", strerror(errno)));
  }
  // Converts input i into fd: a part of the output that depends on nothing but i and the
  // metadata of all inputs (packet sequence ids are i + 1 + k * n), so parts written by any
  // number of workers concatenate into the same trace.
  auto convert = [&](size_t i, int fd) {
    std::unique_ptr<TraceSink> sink;
    if (options.format == TraceFormat::kChromeJson) {
      sink.reset(new ChromeJsonSink(fd, i == 0, i + 1 == n));
    } else {
      sink.reset(new PerfettoProtoSink(fd, static_cast<uint32_t>(i + 1),
                                       static_cast<uint32_t>(n)));
    }
    FileConverter conv(sink.get(), static_cast<uint32_t>(i), metas[i],
                       s->alignment[i].offset_ns, pids[i], remapped[i] != 0,
                       options.counter_window);
    conv.Start();
    PartResult r;
    r.status = ScanFile(inputs[i], &conv, &r.summary);
    if (!r.status.ok()) return r;
    conv.Finish();
    r.misplaced = conv.misplaced();
    if (!sink->Finish()) {
      r.status = absl::DataLossError(absl::StrCat(out_path, ": write error: ", strerror(errno)));
    }
    r.events = sink->events();
    r.bytes = sink->bytes_written();
    return r;
  };

  // Workers take inputs in order. The input at `head` (the next one due in the output) is
  // written straight into it; any other goes to its own part file, appended once every
  // earlier input is in. Memory stays per worker; output order is the input order.
  std::vector<PartResult> results(n);
  std::mutex mu;
  size_t next = 0, head = 0;
  std::vector<char> parked(n, 0);
  absl::Status append_status;
  auto part_path = [&](size_t i) { return absl::StrCat(tmp_path, ".", i); };
  auto worker = [&]() {
    for (;;) {
      size_t i;
      bool direct;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next == n) return;
        i = next++;
        direct = i == head;
      }
      PartResult r;
      if (direct) {
        r = convert(i, out);
      } else {
        const int fd = open(part_path(i).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
          r.status = absl::PermissionDeniedError(
              absl::StrCat(part_path(i), ": cannot create: ", strerror(errno)));
        } else {
          r = convert(i, fd);
          close(fd);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(r);
      if (direct) {
        head = i + 1;
      } else {
        parked[i] = 1;
      }
      for (; head < n && parked[head]; ++head) {
        if (append_status.ok()) append_status = AppendFile(part_path(head), out, out_path);
        remove(part_path(head).c_str());
      }
    }
  };
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers = std::min(n, options.threads > 0 ? size_t(options.threads) : hw);
  s->threads = static_cast<int>(workers);
  if (workers <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }

  absl::Status st = append_status;
  for (size_t i = 0; i < n; ++i) {
    const PartResult& r = results[i];
    if (!r.status.ok()) {
      st = r.status;  // the first failing input wins
      break;
    }
    s->host_events += r.summary.host_events;
    s->device_ops += r.summary.device_ops;
    s->output_events += r.events;
    s->output_bytes += r.bytes;
    if (r.summary.truncated) s->warnings.push_back(r.summary.warning);
    // As the report says it: the end of the run (its last records, open ranges) is missing.
    if (!r.summary.has_footer && !r.summary.truncated) {
      s->warnings.push_back(absl::StrCat(inputs[i], ": no footer (the process ended abnormally)"));
    }
    if (r.misplaced != 0) {
      s->warnings.push_back(absl::StrCat(inputs[i], ": ", r.misplaced,
                                         " host ranges overlap more than ", kMaxHostLanes,
                                         " others on their thread; shown on the last lane, they "
                                         "may be cut short"));
    }
  }
  if (st.ok() && close(out) != 0) {
    st = absl::DataLossError(absl::StrCat(out_path, ": write error: ", strerror(errno)));
  } else if (!st.ok()) {
    close(out);
  }
  if (!st.ok()) {
    remove(tmp_path.c_str());
    return st;
  }
  if (rename(tmp_path.c_str(), out_path.c_str()) != 0) {
    remove(tmp_path.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat(out_path, ": cannot rename into place: ", strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

int RunPerfettoCommand(const std::string& input, const std::string& output,
                       const std::string& format, std::ostream& out, std::ostream& err,
                       int threads) {
  ExportOptions options;
  options.threads = threads;
  if (format == "json") {
    options.format = TraceFormat::kChromeJson;
  } else if (format.empty() || format == "perfetto" || format == "proto") {
    options.format = TraceFormat::kPerfetto;
  } else {
    err << "profanalyze perfetto: unknown --format '" << format << "' (perfetto or json)\n";
    return 2;
  }
  auto inputs = ResolveProfileInputs(input);
  if (!inputs.ok()) {
    err << "profanalyze perfetto: " << OneLine(std::string(inputs.status().message())) << "\n";
    return 2;
  }
  const std::string out_path =
      output.empty() ? DefaultTraceOutputPath(input, options.format) : output;
  ExportStats stats;
  absl::Status st = ExportTrace(*inputs, out_path, options, &stats);
  if (!st.ok()) {
    err << "profanalyze perfetto: " << OneLine(std::string(st.message())) << "\n";
    return 2;
  }
  for (const std::string& w : stats.warnings) err << "profanalyze perfetto: warning: " << w << "\n";
  out << "wrote " << out_path << ": " << stats.output_events
      << (options.format == TraceFormat::kChromeJson ? " trace events, " : " packets, ")
      << stats.output_bytes << " bytes from " << inputs->size() << " file(s) ("
      << stats.host_events << " host events, " << stats.device_ops << " device ops)\n";
  if (stats.alignment.size() > 1) {
    for (const FileAlignment& a : stats.alignment) {
      out << "  " << a.path << ": rank " << a.rank << ", offset " << a.offset_ns << " ns";
      if (a.error_ns != 0) out << " +-" << a.error_ns << " ns";
      out << " (" << a.method << ")\n";
    }
  }
  return 0;
}

void AddPerfettoCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string input;
    std::string output;
    std::string format = "perfetto";
    int threads = 0;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "perfetto", "Write a Perfetto trace (or Chrome JSON) of a profile file or directory");
  sub->add_option("input", opts->input, "rank file (.pb) or profile directory")->required();
  sub->add_option(
      "-o,--output", opts->output,
      "output path (default: FILE with .pb replaced by .pftrace or .json, or DIR/trace.pftrace)");
  sub->add_option("--format", opts->format, "perfetto (native protobuf) or json (Chrome trace)")
      ->check(CLI::IsMember({"perfetto", "json"}));
  sub->add_option("--threads", opts->threads, "files converted in parallel (default: cores)")
      ->check(CLI::Range(0, 4096));
  sub->callback([opts, exit_code]() {
    *exit_code = RunPerfettoCommand(opts->input, opts->output, opts->format, std::cout,
                                    std::cerr, opts->threads);
  });
}

}  // namespace analyzer
}  // namespace profagent
