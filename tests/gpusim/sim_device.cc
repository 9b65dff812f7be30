#include "tests/gpusim/sim_device.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "tests/gpusim/sim_pool.h"

namespace gpusim {
namespace {

struct CbidEntry {
  const char* name;
  int cbid;
};
const CbidEntry kCbids[] = {
#include "tests/gpusim/cudart_cbid_table.inc"
};

// First id for created streams; ids below are the legacy default streams (device d has id d).
constexpr uint32_t kFirstStreamId = 64;

// What nvcc's registration code fills at load time, before main: kept apart from State, whose
// construction starts the device (stream workers, the fork handler). As CUDA initializes
// lazily, a program may fork before its first CUDA call (ranks forked by a launcher) and each
// child then starts a device of its own; had registration started it, every child would be a
// forked child of a started device, whose streams do not work.
struct Registry {
  Registry();
  CostModel costs;
  std::shared_mutex kernels_mu;
  std::unordered_map<const void*, Kernel*> kernels_by_fn;
  std::unordered_set<const void*> kernel_handles;
  std::mutex symbols_mu;
  std::unordered_map<const void*, size_t> symbols;  // __cudaRegisterVar: host shadow -> size
  std::mutex modules_mu;
  std::unordered_set<const Module*> modules;  // registered fat binaries
};

Registry::Registry() {
  const char* costs_path = getenv("GPUSIM_COSTS");
  if (costs_path != nullptr && *costs_path != '\0') {
    std::string error;
    if (!costs.LoadFile(costs_path, &error)) {
      fprintf(stderr, "gpusim: GPUSIM_COSTS=%s: %s; using the default costs\n", costs_path,
              error.c_str());
    }
  }
}

// Never destroyed (kernels may be looked up during exit).
Registry& R() {
  static Registry* registry = new Registry();
  return *registry;
}

struct State {
  State();
  int device_count = 1;

  std::shared_mutex streams_mu;          // guards `streams` (read on every stream lookup)
  std::unordered_set<Stream*> streams;   // live created / per-thread streams
  std::mutex mu;  // guards the tables below
  std::vector<Stream*> device_streams[kMaxDevices];  // all non-legacy streams with a worker
  Stream* legacy[kMaxDevices] = {};
  std::unordered_set<Event*> events;

  std::mutex graph_mu;  // GraphMutex(): graphs, nodes and everything in them
  std::unordered_set<const Graph*> graphs;
  std::unordered_set<const GraphNode*> nodes;
  // Every node handle ever handed out (graph and exec nodes; never freed), for
  // gpusim_graph_node_id. Its lock is a leaf, taken with or without graph_mu.
  std::shared_mutex node_ids_mu;
  std::unordered_set<const GraphNode*> node_ids;
  struct GraphObserver {
    GpusimGraphNodeCallback cb;
    void* user;
  };
  std::atomic<const GraphObserver*> graph_observer{nullptr};

  std::mutex alloc_mu;
  std::map<uintptr_t, Allocation> allocations;
  // device + managed bytes in `allocations`, plus cuMemCreate's physical memory
  size_t device_bytes[kMaxDevices] = {};

  std::atomic<uint32_t> next_stream_id{kFirstStreamId};
  std::atomic<uint32_t> next_graph_id{1};
  std::atomic<uint32_t> next_node_id{1};
  std::atomic<uint32_t> next_corr{1};
  std::atomic<const Observer*> observer{nullptr};

  // Ground truth.
  std::string truth_path;  // as given, may contain %p
  std::mutex truth_mu;
  int truth_fd = -1;
  dev_t truth_dev = 0;  // identity of the log file truth_fd was opened on
  ino_t truth_ino = 0;
  std::string truth_open_path;
  pid_t truth_pid = 0;
  int rank = -1;
};

State& S();

void WorkerLoop(Stream* s);

// Set in the child of a fork(): the stream workers did not survive it, so stream operations
// fail (invalid handle) and synchronizations return at once instead of hanging. A real forked
// child cannot use its parent's CUDA context either.
std::atomic<bool> g_forked_child{false};
void OnForkChild() { g_forked_child.store(true); }

Stream* NewStream(int device, uint32_t id, unsigned flags, int priority, bool legacy) {
  Stream* s = new Stream();
  s->id = id;
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  s->legacy = legacy;
  StartSimThread(WorkerLoop, s);
  return s;
}

int ReadRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}) {
    const char* v = getenv(var);
    if (v != nullptr && *v != '\0') return atoi(v);
  }
  return -1;
}

State::State() {
  const char* devices = getenv("GPUSIM_DEVICES");
  if (devices != nullptr && atoi(devices) > 0) device_count = atoi(devices);
  if (device_count > kMaxDevices) device_count = kMaxDevices;
  for (int d = 0; d < device_count; ++d) {
    legacy[d] = NewStream(d, static_cast<uint32_t>(d), 0, 0, /*legacy=*/true);
  }
  const char* truth = getenv("GPUSIM_TRUTH");
  if (truth != nullptr) truth_path = truth;
  rank = ReadRank();
  pthread_atfork(nullptr, nullptr, OnForkChild);
}

// Never destroyed: worker threads may still run while the process exits.
State& S() {
  static State* state = new State();
  return *state;
}

bool IsDeviceKind(MemKind kind) { return kind == MemKind::kDevice || kind == MemKind::kManaged; }

// ---- Ground truth ---------------------------------------------------------------------------

// The truth's "kind" of a copy: HtoD, DtoH, DtoD, HtoH between pointers; with a CUDA array
// (GpusimOpRecord::copy_arrays) HtoA, AtoH, AtoA, AtoD or DtoA, as CUPTI's copy kinds name them.
const char* CopyKindName(int kind, uint32_t arrays) {
  const bool src_array = (arrays & GPUSIM_COPY_SRC_ARRAY) != 0;
  const bool dst_array = (arrays & GPUSIM_COPY_DST_ARRAY) != 0;
  if (src_array && dst_array) return "AtoA";
  if (src_array) return kind == cudaMemcpyDeviceToHost ? "AtoH" : "AtoD";
  if (dst_array) return kind == cudaMemcpyHostToDevice ? "HtoA" : "DtoA";
  switch (kind) {
    case cudaMemcpyHostToHost: return "HtoH";
    case cudaMemcpyHostToDevice: return "HtoD";
    case cudaMemcpyDeviceToHost: return "DtoH";
    case cudaMemcpyDeviceToDevice: return "DtoD";
    default: return "Default";
  }
}

void AppendJsonString(std::string* out, const char* s) {
  out->push_back('"');
  for (; s != nullptr && *s != '\0'; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

void WriteTruthLine(const GpusimOpRecord& r) {
  const char* op;
  switch (r.kind) {
    case GPUSIM_OP_KERNEL: op = "kernel"; break;
    case GPUSIM_OP_MEMCPY: op = "memcpy"; break;
    case GPUSIM_OP_MEMSET: op = "memset"; break;
    case GPUSIM_OP_HOSTFN: op = "hostfn"; break;
    default: return;  // collectives: libnccl writes them; event markers are not operations
  }
  char buf[512];
  snprintf(buf, sizeof(buf),
           "{\"op\":\"%s\",\"pid\":%d,\"rank\":%d,\"device\":%u,\"stream\":%u,\"corr\":%u,"
           "\"queued_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,\"graph\":%u,\"node\":%u",
           op, static_cast<int>(getpid()), S().rank, r.device, r.stream_id, r.correlation_id,
           static_cast<unsigned long long>(r.queued_ns),
           static_cast<unsigned long long>(r.start_ns),
           static_cast<unsigned long long>(r.end_ns), r.graph_id, r.graph_node_id);
  std::string line = buf;
  if (r.kind == GPUSIM_OP_KERNEL) {
    line += ",\"name\":";
    AppendJsonString(&line, r.name);
    line += ",\"mangled\":";
    AppendJsonString(&line, r.mangled_name);
    snprintf(buf, sizeof(buf), ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%u",
             r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2], r.shared_mem);
    line += buf;
  } else if (r.kind == GPUSIM_OP_MEMCPY) {
    snprintf(buf, sizeof(buf), ",\"kind\":\"%s\",\"bytes\":%llu",
             CopyKindName(r.copy_kind, r.copy_arrays), static_cast<unsigned long long>(r.bytes));
    line += buf;
  } else if (r.kind == GPUSIM_OP_MEMSET) {
    snprintf(buf, sizeof(buf), ",\"bytes\":%llu", static_cast<unsigned long long>(r.bytes));
    line += buf;
  }
  line += "}";
  TruthWrite(line.c_str());
}

void Report(const GpusimOpRecord& r) {
  const Observer* obs = S().observer.load(std::memory_order_acquire);
  if (obs != nullptr && obs->op_cb != nullptr) obs->op_cb(obs->user, &r);
  if (TruthEnabled()) WriteTruthLine(r);
}

// ---- Stream workers -------------------------------------------------------------------------

// Writes `value` into every element of `size` bytes (2 or 4) of [d, d + bytes).
void FillElements(char* d, size_t bytes, unsigned size, uint32_t value) {
  if (size == 2) {
    uint16_t v = static_cast<uint16_t>(value);
    for (size_t i = 0; i + 2 <= bytes; i += 2) memcpy(d + i, &v, 2);
  } else {
    for (size_t i = 0; i + 4 <= bytes; i += 4) memcpy(d + i, &value, 4);
  }
}

void MoveBytes(const Op& op) {
  bool staged = !op.staging.empty();  // packed: slices of height rows of width bytes
  const char* s = staged ? op.staging.data() : static_cast<const char*>(op.src);
  size_t spitch = staged ? op.width : op.spitch;
  size_t sslice = staged ? op.width * op.height : op.spitch * op.sysize;
  size_t dslice = op.dpitch * op.dysize;
  for (size_t z = 0; z < op.depth; ++z) {
    char* d = static_cast<char*>(op.dst) + z * dslice;
    for (size_t row = 0; row < op.height; ++row) {
      if (op.action == Op::kCopy) {
        memmove(d + row * op.dpitch, s + z * sslice + row * spitch, op.width);
      } else if (op.element_size <= 1) {
        memset(d + row * op.dpitch, op.value, op.width);
      } else {
        FillElements(d + row * op.dpitch, op.width, op.element_size,
                     static_cast<uint32_t>(op.value));
      }
    }
  }
}

// Runs `op` on stream `s`'s worker. `ready_ns` is when the device could start it: not before it
// was enqueued, the stream's previous op ended and the ops it waits for ended. Modelled ops
// (kernels, copies, sets, event records) start at ready_ns and end exactly `duration_ns` later;
// the worker does not complete them before that instant in real time. When the worker thread
// was starved of CPU, ready_ns lies in the past and the stream catches up, so a loaded host
// shifts completions later but never stretches the recorded durations. Host functions and
// custom ops (collectives) run in real time: they start when the worker reaches them.
void Execute(Stream* s, Op* op, uint64_t ready_ns) {
  GpusimOpRecord& r = op->rec;
  r.stream_id = s->id;
  r.device = static_cast<uint32_t>(s->device);
  r.context_id = static_cast<uint32_t>(s->device) + 1;
  r.start_ns = ready_ns;
  r.end_ns = ready_ns + op->duration_ns;
  switch (op->action) {
    case Op::kKernel:
      SleepUntilNs(r.end_ns);
      break;
    case Op::kCopy:
    case Op::kSet:
      if (op->width > 0 && op->height > 0 && op->depth > 0) MoveBytes(*op);
      SleepUntilNs(r.end_ns);
      break;
    case Op::kEventRecord: {
      std::lock_guard<std::mutex> lock(op->event->mu);
      if (op->event->generation == op->event_generation) {
        op->event->time_ns = ready_ns;
        op->event->timed = true;
      }
      break;
    }
    case Op::kHostFn:
    case Op::kStreamCallback:
      r.start_ns = NowNs();
      if (op->action == Op::kHostFn) {
        op->host_fn(op->user_data);
      } else {
        op->stream_callback(op->callback_stream, cudaSuccess, op->user_data);
      }
      r.end_ns = NowNs();
      break;
    case Op::kCustom:
      r.start_ns = NowNs();
      r.end_ns = 0;
      op->run(op->arg, &r);
      if (r.end_ns < r.start_ns) r.end_ns = NowNs();
      break;
    case Op::kFreeMemory:
      if (op->pool_free_token != 0) {
        CompletePoolFree(op->dst, op->pool_free_token);
      } else {
        free(op->dst);
      }
      break;
    case Op::kWaitOnly:
    case Op::kStop:
      break;
  }
  s->last_end_ns.store(r.end_ns, std::memory_order_release);
  if (op->report) Report(r);
  if (op->action == Op::kCustom && op->free_arg != nullptr) op->free_arg(op->arg);
}

// The device end time of op `seq` of `t`, which has completed. Exact while the op is among the
// last Stream::kEndRing of its stream; otherwise the stream's latest end (a later bound).
uint64_t EndOfSeq(Stream* t, uint64_t seq) {
  uint64_t end = t->end_ring[seq % Stream::kEndRing].load(std::memory_order_acquire);
  if (t->completed_seq.load(std::memory_order_acquire) < seq + Stream::kEndRing) return end;
  return t->last_end_ns.load(std::memory_order_acquire);
}

// How long an idle worker polls for new work before parking on its condition variable. A
// host thread launching back to back then rarely pays a futex wake-up per launch.
constexpr uint64_t kWorkerPollNs = 10000;

void WorkerLoop(Stream* s) {
  std::deque<Op*> batch;
  uint64_t taken_seq = 0;  // sequence number of the last op moved into `batch`
  for (;;) {
    if (batch.empty()) {
      uint64_t poll_until = NowNs() + kWorkerPollNs;
      for (int i = 0; s->enqueued_seq.load(std::memory_order_acquire) == taken_seq; ++i) {
        if ((i & 15) == 15 && NowNs() > poll_until) break;
        __builtin_ia32_pause();
      }
      std::unique_lock<std::mutex> lock(s->mu);
      while (s->queue.empty()) {
        s->worker_waiting = true;
        s->work_cv.wait(lock);
        s->worker_waiting = false;
      }
      batch.swap(s->queue);
      taken_seq = batch.back()->seq;
    }
    Op* op = batch.front();
    batch.pop_front();
    uint64_t ready = op->rec.queued_ns;
    uint64_t prev_end = s->last_end_ns.load(std::memory_order_acquire);
    if (prev_end > ready) ready = prev_end;
    for (const auto& w : op->waits) {
      WaitForSeq(w.first, w.second);
      uint64_t end = EndOfSeq(w.first, w.second);
      if (end > ready) ready = end;
    }
    bool stop = op->action == Op::kStop;
    if (stop) {
      std::lock_guard<std::mutex> lock(S().mu);
      auto& list = S().device_streams[s->device];
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i] == s) {
          list.erase(list.begin() + static_cast<long>(i));
          break;
        }
      }
    } else {
      Execute(s, op, ready);
    }
    s->end_ring[op->seq % Stream::kEndRing].store(
        op->action == Op::kStop ? ready : op->rec.end_ns, std::memory_order_relaxed);
    // Publish, then wake host threads only if one waits (seq_cst pairs with WaitForSeq).
    s->completed_seq.store(op->seq, std::memory_order_seq_cst);
    if (s->sync_waiters.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(s->mu); }
      s->done_cv.notify_all();
    }
    delete op;
    if (stop) return;
  }
}

// The calling thread's per-thread default streams, destroyed when the thread exits.
struct PerThreadStreams {
  Stream* streams[kMaxDevices] = {};
  ~PerThreadStreams() {
    for (Stream* s : streams) {
      if (s != nullptr) DestroyStream(s);
    }
  }
};
thread_local PerThreadStreams t_per_thread;

Stream* PerThreadStream(int device) {
  Stream*& s = t_per_thread.streams[device];
  if (s == nullptr) {
    s = CreateStream(device, 0, 0);
    s->per_thread = true;
  }
  return s;
}

// Adds CUDA's legacy-default-stream ordering to an op about to be enqueued on `s`.
void AddLegacyWaits(Stream* s, Op* op) {
  State& st = S();
  if (s->legacy) {
    std::lock_guard<std::mutex> lock(st.mu);
    for (Stream* t : st.device_streams[s->device]) {
      if (!t->blocking()) continue;
      uint64_t e = t->enqueued_seq.load(std::memory_order_acquire);
      if (e > t->completed_seq.load(std::memory_order_acquire)) op->waits.emplace_back(t, e);
    }
  } else if (s->blocking()) {
    Stream* l = st.legacy[s->device];
    uint64_t e = l->enqueued_seq.load(std::memory_order_acquire);
    if (e > l->completed_seq.load(std::memory_order_acquire)) op->waits.emplace_back(l, e);
  }
}

// Records `op` into the capture graph of `s` (s->mu held). Takes ownership. A captured event
// record remembers the stream's capture dependencies (for a later cudaStreamWaitEvent join);
// every other op becomes a node depending on them, and the stream's only dependency after it.
void CaptureOp(Stream* s, Op* op) {
  Graph* g = s->capture_graph;
  if (op->action == Op::kEventRecord) {
    std::lock_guard<std::mutex> lock(op->event->mu);
    op->event->capture_graph = g;
    op->event->capture_nodes = s->capture_deps;
  } else if (op->action == Op::kCustom && op->clone_arg == nullptr) {
    // A custom op without a clone function is not captured: its argument is single-use.
    fprintf(stderr, "gpusim: a %s enqueued during stream capture is dropped\n",
            op->rec.name != nullptr ? op->rec.name : "custom operation");
    if (op->free_arg != nullptr) op->free_arg(op->arg);
  } else if (op->action != Op::kWaitOnly) {
    NodeWork work = WorkFromCapturedOp(*op);
    std::lock_guard<std::mutex> lock(S().graph_mu);
    if (IsLiveGraphLocked(g, false)) {
      std::vector<GraphNode*> deps;
      for (GraphNode* d : s->capture_deps) {  // a node destroyed meanwhile is not a dependency
        if (IsLiveNodeLocked(d) && d->graph == g) deps.push_back(d);
      }
      s->capture_deps.assign(1, AddNodeLocked(g, std::move(work), deps, nullptr));
    }
  }
  delete op;
}

}  // namespace

// ---- Clock ----------------------------------------------------------------------------------

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUntilNs(uint64_t deadline_ns) {
  constexpr uint64_t kSpinNs = 60000;
  if (deadline_ns > NowNs() + kSpinNs) {
    uint64_t wake = deadline_ns - kSpinNs;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(wake / 1000000000ull);
    ts.tv_nsec = static_cast<long>(wake % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while (NowNs() < deadline_ns) __builtin_ia32_pause();
}

// ---- Process state --------------------------------------------------------------------------

const CostModel& Costs() { return R().costs; }
int DeviceCount() { return S().device_count; }

int& CurrentDevice() {
  thread_local int device = 0;
  return device;
}

cudaError_t& LastError() {
  thread_local cudaError_t error = cudaSuccess;
  return error;
}

// ---- Kernels --------------------------------------------------------------------------------

void ChooseImage(const void* fat_cubin, int device_arch, int* ptx_version, int* binary_version) {
  *ptx_version = *binary_version = device_arch;
  // nvcc's wrapper (magic 0x466243b1) points at the fat binary: a 16-byte header (magic
  // 0xBA55ED50, version, header size, size of the entries) and entries, each a header (kind:
  // 1 PTX, 2 cubin; its header size at +4, its payload size at +8, the architecture at +28) and
  // the payload. Several fat binaries may follow each other.
  struct Wrapper {
    int32_t magic;
    int32_t version;
    const unsigned char* data;
    const void* filename_or_fatbins;
  };
  const auto* w = static_cast<const Wrapper*>(fat_cubin);
  if (w == nullptr || uint32_t(w->magic) != 0x466243b1u || w->data == nullptr) return;
  auto u16 = [](const unsigned char* p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
  };
  auto u32 = [](const unsigned char* p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  };
  auto u64 = [](const unsigned char* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
  };
  const unsigned char* fb = w->data;
  if (u32(fb) != 0xBA55ED50u) return;
  const uint16_t header_size = u16(fb + 6);
  const uint64_t entries_size = u64(fb + 8);
  if (header_size < 16 || entries_size > (uint64_t(1) << 34)) return;
  int best_cubin = -1, best_ptx = -1, newest = -1;
  const unsigned char* e = fb + header_size;
  const unsigned char* const end = e + entries_size;
  for (int n = 0; n < 100000 && e + 32 <= end; ++n) {
    const uint16_t kind = u16(e);
    const uint32_t entry_header = u32(e + 4);
    const uint64_t payload = u64(e + 8);
    const int arch = int(u32(e + 28));
    if (entry_header < 32 || payload > uint64_t(end - e)) break;
    if (arch > 0 && arch < 10000) {
      newest = std::max(newest, arch);
      if (kind == 2 && arch / 10 == device_arch / 10 && arch <= device_arch) {
        best_cubin = std::max(best_cubin, arch);
      } else if (kind == 1 && arch <= device_arch) {
        best_ptx = std::max(best_ptx, arch);
      }
    }
    if (uint64_t(end - e) < entry_header + payload) break;
    e += entry_header + payload;
  }
  if (best_cubin > 0) {
    *ptx_version = *binary_version = best_cubin;
  } else if (best_ptx > 0) {
    *ptx_version = best_ptx;  // JIT-compiled for the device
  } else if (newest > 0) {
    *ptx_version = *binary_version = newest;
  }
}

Module* RegisterModule(const void* fat_cubin) {
  Module* m = new Module();
  ChooseImage(fat_cubin, 90, &m->ptx_version, &m->binary_version);
  std::lock_guard<std::mutex> lock(R().modules_mu);
  R().modules.insert(m);
  return m;
}

const Module* ModuleOf(void** handle) {
  const Module* m = reinterpret_cast<const Module*>(handle);
  std::lock_guard<std::mutex> lock(R().modules_mu);
  return R().modules.count(m) != 0 ? m : nullptr;
}

Kernel* RegisterKernel(const void* host_fn, const char* mangled_name, const Module* module) {
  Registry& st = R();
  {
    std::shared_lock<std::shared_mutex> lock(st.kernels_mu);
    auto it = st.kernels_by_fn.find(host_fn);
    if (it != st.kernels_by_fn.end()) return it->second;
  }
  Kernel* k = new Kernel();
  k->host_fn = host_fn;
  k->mangled = mangled_name != nullptr ? mangled_name : "";
  int status = 0;
  char* demangled = abi::__cxa_demangle(k->mangled.c_str(), nullptr, nullptr, &status);
  k->demangled = (status == 0 && demangled != nullptr) ? demangled : k->mangled;
  free(demangled);
  k->cost = st.costs.ForKernel(k->demangled);
  if (module != nullptr) {
    k->ptx_version = module->ptx_version;
    k->binary_version = module->binary_version;
  }
  std::unique_lock<std::shared_mutex> lock(st.kernels_mu);
  auto inserted = st.kernels_by_fn.emplace(host_fn, k);
  if (!inserted.second) {
    delete k;
    return inserted.first->second;
  }
  st.kernel_handles.insert(k);
  return k;
}

Kernel* FindKernel(const void* func) {
  Registry& st = R();
  std::shared_lock<std::shared_mutex> lock(st.kernels_mu);
  if (st.kernel_handles.count(func) != 0) {
    return const_cast<Kernel*>(static_cast<const Kernel*>(func));
  }
  auto it = st.kernels_by_fn.find(func);
  return it == st.kernels_by_fn.end() ? nullptr : it->second;
}

// ---- Streams --------------------------------------------------------------------------------

Stream* LegacyStream(int device) { return S().legacy[device]; }

Stream* ResolveStream(cudaStream_t handle, bool per_thread_default) {
  if (g_forked_child.load(std::memory_order_relaxed)) return nullptr;
  int device = CurrentDevice();
  if (handle == nullptr) {
    return per_thread_default ? PerThreadStream(device) : S().legacy[device];
  }
  if (handle == cudaStreamLegacy) return S().legacy[device];
  if (handle == cudaStreamPerThread) return PerThreadStream(device);
  Stream* s = reinterpret_cast<Stream*>(handle);
  State& st = S();
  std::shared_lock<std::shared_mutex> lock(st.streams_mu);
  return st.streams.count(s) != 0 ? s : nullptr;
}

Stream* CreateStream(int device, unsigned flags, int priority) {
  State& st = S();
  Stream* s = NewStream(device, st.next_stream_id.fetch_add(1), flags, priority, false);
  {
    std::unique_lock<std::shared_mutex> lock(st.streams_mu);
    st.streams.insert(s);
  }
  std::lock_guard<std::mutex> lock(st.mu);
  st.device_streams[device].push_back(s);
  return s;
}

bool DestroyStream(Stream* s) {
  State& st = S();
  {
    std::unique_lock<std::shared_mutex> lock(st.streams_mu);
    if (st.streams.erase(s) == 0) return false;
  }
  Op* stop = new Op();
  stop->action = Op::kStop;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->capture_graph = nullptr;
    stop->seq = s->enqueued_seq.load(std::memory_order_relaxed) + 1;
    s->enqueued_seq.store(stop->seq, std::memory_order_release);
    s->queue.push_back(stop);
    wake = s->worker_waiting;
  }
  if (wake) s->work_cv.notify_one();
  return true;
}

uint64_t Enqueue(Stream* s, Op* op) {
  AddLegacyWaits(s, op);
  if (op->rec.queued_ns == 0) op->rec.queued_ns = NowNs();
  bool wake;
  uint64_t seq;  // read under the lock: the worker may run and delete `op` once it is released
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture_graph != nullptr) {
      CaptureOp(s, op);
      return 0;
    }
    seq = s->enqueued_seq.load(std::memory_order_relaxed) + 1;
    op->seq = seq;
    s->queue.push_back(op);
    s->enqueued_seq.store(seq, std::memory_order_release);
    wake = s->worker_waiting;
  }
  if (wake) s->work_cv.notify_one();
  return seq;
}

void WaitForSeq(Stream* s, uint64_t seq) {
  if (s->completed_seq.load(std::memory_order_acquire) >= seq) return;
  if (g_forked_child.load(std::memory_order_relaxed)) return;
  std::unique_lock<std::mutex> lock(s->mu);
  s->sync_waiters.fetch_add(1, std::memory_order_seq_cst);
  while (s->completed_seq.load(std::memory_order_seq_cst) < seq) s->done_cv.wait(lock);
  s->sync_waiters.fetch_sub(1, std::memory_order_relaxed);
}

void SynchronizeStream(Stream* s) { WaitForSeq(s, s->enqueued_seq.load()); }

bool StreamIdle(Stream* s) {
  return s->completed_seq.load(std::memory_order_acquire) >=
         s->enqueued_seq.load(std::memory_order_acquire);
}

void SynchronizeDevice(int device) {
  State& st = S();
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    streams = st.device_streams[device];
  }
  streams.push_back(st.legacy[device]);
  for (Stream* s : streams) SynchronizeStream(s);
}

void ResetDevice(int device) {
  SynchronizeDevice(device);
  State& st = S();
  std::vector<Stream*> doomed;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    std::shared_lock<std::shared_mutex> streams_lock(st.streams_mu);
    for (Stream* s : st.device_streams[device]) {
      if (!s->per_thread && st.streams.count(s) != 0) doomed.push_back(s);
    }
  }
  for (Stream* s : doomed) DestroyStream(s);
  {
    // The device's events go too (their handles become invalid, as on hardware).
    std::lock_guard<std::mutex> lock(st.mu);
    for (auto it = st.events.begin(); it != st.events.end();) {
      it = (*it)->device == device ? st.events.erase(it) : std::next(it);
    }
  }
  ResetPools(device);  // releases (and untracks) the pools' allocations on the device
  ResetArrays(device);
  std::lock_guard<std::mutex> lock(st.alloc_mu);
  for (auto it = st.allocations.begin(); it != st.allocations.end();) {
    if (it->second.device == device && IsDeviceKind(it->second.kind) && !it->second.pooled) {
      st.device_bytes[device] -= it->second.size;
      free(reinterpret_cast<void*>(it->first));
      it = st.allocations.erase(it);
    } else {
      ++it;
    }
  }
}

// ---- Ops ------------------------------------------------------------------------------------

void InitKernelOp(Op* op, const Kernel* k, dim3 grid, dim3 block, size_t shared_mem) {
  op->action = Op::kKernel;
  op->report = true;
  op->kernel = k;
  op->rec.kind = GPUSIM_OP_KERNEL;
  op->rec.name = k->demangled.c_str();
  op->rec.mangled_name = k->mangled.c_str();
  op->rec.grid[0] = grid.x;
  op->rec.grid[1] = grid.y;
  op->rec.grid[2] = grid.z;
  op->rec.block[0] = block.x;
  op->rec.block[1] = block.y;
  op->rec.block[2] = block.z;
  op->rec.shared_mem = static_cast<uint32_t>(shared_mem);
  uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z * grid.x * grid.y *
                     grid.z;
  op->duration_ns = k->cost.DurationNs(threads);
}

void InitCopyOp3D(Op* op, void* dst, size_t dpitch, size_t dysize, const void* src,
                  size_t spitch, size_t sysize, size_t width, size_t height, size_t depth,
                  int kind) {
  op->action = Op::kCopy;
  op->report = true;
  op->rec.kind = GPUSIM_OP_MEMCPY;
  op->rec.copy_kind = ResolveCopyKind(dst, src, kind);
  op->rec.bytes = static_cast<uint64_t>(width) * height * depth;
  op->dst = dst;
  op->src = src;
  op->dpitch = dpitch;
  op->spitch = spitch;
  op->dysize = dysize;
  op->sysize = sysize;
  op->width = width;
  op->height = height;
  op->depth = depth;
  op->duration_ns = Costs().CopyNs(op->rec.copy_kind, op->rec.bytes);
}

void InitCopyOp(Op* op, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                size_t height, int kind) {
  InitCopyOp3D(op, dst, dpitch, height, src, spitch, height, width, height, 1, kind);
}

void InitSetOp(Op* op, void* dst, size_t pitch, int value, unsigned element_size,
               size_t width_bytes, size_t height) {
  op->action = Op::kSet;
  op->report = true;
  op->rec.kind = GPUSIM_OP_MEMSET;
  op->rec.bytes = static_cast<uint64_t>(width_bytes) * height;
  op->dst = dst;
  op->dpitch = pitch;
  op->dysize = height;
  op->width = width_bytes;
  op->height = height;
  op->value = value;
  op->element_size = element_size;
  op->duration_ns = Costs().MemsetNs(op->rec.bytes);
}

void InitSetOp3D(Op* op, void* dst, size_t pitch, size_t ysize, int value, size_t width_bytes,
                 size_t height, size_t depth) {
  InitSetOp(op, dst, pitch, value, 1, width_bytes, height);
  op->dysize = ysize;
  op->depth = depth;
  op->rec.bytes = static_cast<uint64_t>(width_bytes) * height * depth;
  op->duration_ns = Costs().MemsetNs(op->rec.bytes);
}

namespace {

// The byte address of element `pos` of a pitched allocation (slices ysize rows apart).
char* PitchedAddress(const cudaPitchedPtr& p, const cudaPos& pos) {
  return static_cast<char*>(p.ptr) + (pos.z * p.ysize + pos.y) * p.pitch + pos.x;
}

// One side of a copy with a CUDA array (InitArrayCopyOp): its first byte, row pitch, slice
// height in rows, and whether it is device memory.
struct CopySide {
  char* base = nullptr;
  size_t pitch = 0, ysize = 0;
  bool device = false;
};

// A pointer side of a copy whose other side is an array: `width` bytes per row, positions in
// bytes. `kind_device`: where the call's kind puts it (cudaMemcpyDefault: the pointer decides).
cudaError_t PointerSide(const cudaPitchedPtr& ptr, const cudaPos& pos, const cudaExtent& e,
                        size_t width, int kind, bool kind_device, CopySide* out) {
  if (ptr.ptr == nullptr) return cudaErrorInvalidValue;
  const size_t rows = e.height * e.depth;
  const bool multi_row = rows > 1 || pos.y != 0 || pos.z != 0;
  if (multi_row && (ptr.pitch < width || pos.x > ptr.pitch - width)) {
    return cudaErrorInvalidPitchValue;
  }
  if (e.depth > 1 && (ptr.ysize < e.height || pos.y > ptr.ysize - e.height)) {
    return cudaErrorInvalidValue;
  }
  out->base = PitchedAddress(ptr, pos);
  out->pitch = rows > 1 ? ptr.pitch : width;
  out->ysize = e.depth > 1 ? ptr.ysize : e.height;
  if (kind == cudaMemcpyDefault) {
    Allocation a;
    out->device = FindAllocation(out->base, nullptr, &a) && OnDevice(a.kind);
  } else {
    out->device = kind_device;
  }
  return cudaSuccess;
}

// An array side: the box of `e` elements at `pos` must lie inside the array.
cudaError_t ArraySide(const CudaArray& a, const cudaPos& pos, const cudaExtent& e, CopySide* out) {
  if (pos.x > a.width || e.width > a.width - pos.x || pos.y > a.height ||
      e.height > a.height - pos.y || pos.z > a.depth || e.depth > a.depth - pos.z) {
    return cudaErrorInvalidValue;
  }
  out->base = a.data + ((pos.z * a.height + pos.y) * a.width + pos.x) * a.element_size;
  out->pitch = a.row_bytes();
  out->ysize = a.height;
  out->device = true;
  return cudaSuccess;
}

// InitCopyOpFromParms with a CUDA array on one side or both.
cudaError_t InitArrayCopyOp(Op* op, const cudaMemcpy3DParms& p) {
  if ((p.srcArray != nullptr && p.srcPtr.ptr != nullptr) ||
      (p.dstArray != nullptr && p.dstPtr.ptr != nullptr)) {
    return cudaErrorInvalidValue;  // "more than one non-zero source or destination"
  }
  CudaArray src_array = {}, dst_array = {};
  if ((p.srcArray != nullptr && !FindArray(p.srcArray, &src_array)) ||
      (p.dstArray != nullptr && !FindArray(p.dstArray, &dst_array))) {
    return cudaErrorInvalidValue;
  }
  if (p.srcArray != nullptr && p.dstArray != nullptr &&
      src_array.element_size != dst_array.element_size) {
    return cudaErrorInvalidValue;
  }
  const size_t element = p.srcArray != nullptr ? src_array.element_size : dst_array.element_size;
  const cudaExtent& e = p.extent;
  const size_t width = e.width * element;  // bytes per row
  CopySide src, dst;
  if (e.width != 0 && e.height != 0 && e.depth != 0) {
    // The kind's word on the pointer side: the source is device memory for DtoH and DtoD, the
    // destination for HtoD and DtoD; what it implies for an array side is ignored.
    const bool src_dev = p.kind == cudaMemcpyDeviceToHost || p.kind == cudaMemcpyDeviceToDevice;
    const bool dst_dev = p.kind == cudaMemcpyHostToDevice || p.kind == cudaMemcpyDeviceToDevice;
    cudaError_t err = p.srcArray != nullptr
                          ? ArraySide(src_array, p.srcPos, e, &src)
                          : PointerSide(p.srcPtr, p.srcPos, e, width, p.kind, src_dev, &src);
    if (err != cudaSuccess) return err;
    err = p.dstArray != nullptr ? ArraySide(dst_array, p.dstPos, e, &dst)
                                : PointerSide(p.dstPtr, p.dstPos, e, width, p.kind, dst_dev, &dst);
    if (err != cudaSuccess) return err;
  } else {
    src.device = dst.device = true;  // nothing moves: a 0-byte copy, never executed
  }
  const int kind = src.device ? (dst.device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                              : (dst.device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  InitCopyOp3D(op, dst.base, dst.pitch, dst.ysize, src.base, src.pitch, src.ysize, width, e.height,
               e.depth, kind);
  op->rec.copy_arrays = (p.srcArray != nullptr ? uint32_t{GPUSIM_COPY_SRC_ARRAY} : 0u) |
                        (p.dstArray != nullptr ? uint32_t{GPUSIM_COPY_DST_ARRAY} : 0u);
  op->array_copy = p;
  return cudaSuccess;
}

}  // namespace

cudaError_t InitCopyOpFromParms(Op* op, const cudaMemcpy3DParms& p) {
  if (p.kind < cudaMemcpyHostToHost || p.kind > cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  if (p.srcArray != nullptr || p.dstArray != nullptr) return InitArrayCopyOp(op, p);
  const cudaExtent& e = p.extent;
  size_t rows = e.height * e.depth;
  if (e.width != 0 && rows != 0) {
    if (p.srcPtr.ptr == nullptr || p.dstPtr.ptr == nullptr) return cudaErrorInvalidValue;
    bool multi_row = rows > 1 || p.srcPos.y != 0 || p.srcPos.z != 0 || p.dstPos.y != 0 ||
                     p.dstPos.z != 0;
    if (multi_row && (p.srcPtr.pitch < p.srcPos.x + e.width ||
                      p.dstPtr.pitch < p.dstPos.x + e.width)) {
      return cudaErrorInvalidPitchValue;
    }
    if (e.depth > 1 && (p.srcPtr.ysize < p.srcPos.y + e.height ||
                        p.dstPtr.ysize < p.dstPos.y + e.height)) {
      return cudaErrorInvalidValue;
    }
  }
  // A single row needs no pitch (1D copies may leave it 0); a single slice no ysize.
  size_t spitch = rows > 1 ? p.srcPtr.pitch : e.width;
  size_t dpitch = rows > 1 ? p.dstPtr.pitch : e.width;
  size_t sysize = e.depth > 1 ? p.srcPtr.ysize : e.height;
  size_t dysize = e.depth > 1 ? p.dstPtr.ysize : e.height;
  InitCopyOp3D(op, PitchedAddress(p.dstPtr, p.dstPos), dpitch, dysize,
               PitchedAddress(p.srcPtr, p.srcPos), spitch, sysize, e.width, e.height, e.depth,
               p.kind);
  return cudaSuccess;
}

// ---- Events ---------------------------------------------------------------------------------

Event* CreateEvent(unsigned flags) {
  Event* e = new Event();
  e->flags = flags;
  e->device = CurrentDevice();
  std::lock_guard<std::mutex> lock(S().mu);
  S().events.insert(e);
  return e;
}

bool IsLiveEvent(Event* e) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().events.count(e) != 0;
}

void DestroyEvent(Event* e) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().events.erase(e);
}

uint64_t RecordEvent(Stream* s, Event* e, Op* op) {
  op->action = Op::kEventRecord;
  op->report = true;
  op->rec.kind = GPUSIM_OP_EVENT;
  op->event = e;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    op->event_generation = ++e->generation;
    e->timed = false;
    e->capture_graph = nullptr;
  }
  // Holding e->mu across Enqueue could deadlock with the worker; a concurrent query between
  // the two sections sees the previous record, as it would on a real device.
  uint64_t seq = Enqueue(s, op);
  if (seq != 0) {
    std::lock_guard<std::mutex> lock(e->mu);
    e->stream = s;
    e->seq = seq;
  }
  return seq;
}

// ---- Graphs ---------------------------------------------------------------------------------

std::mutex& GraphMutex() { return S().graph_mu; }

Graph* CreateGraphLocked(bool exec) {
  Graph* g = new Graph();
  g->exec = exec;
  g->id = S().next_graph_id.fetch_add(1);
  S().graphs.insert(g);
  return g;
}

Graph* CreateGraph(bool exec) {
  std::lock_guard<std::mutex> lock(S().graph_mu);
  return CreateGraphLocked(exec);
}

bool IsLiveGraphLocked(const Graph* g, bool exec) {
  return S().graphs.count(g) != 0 && g->exec == exec;
}

bool IsLiveGraph(Graph* g, bool exec) {
  std::lock_guard<std::mutex> lock(S().graph_mu);
  return IsLiveGraphLocked(g, exec);
}

bool IsLiveNodeLocked(const GraphNode* n) { return S().nodes.count(n) != 0; }

void DestroyGraphLocked(Graph* g) {
  if (S().graphs.erase(g) == 0) return;
  for (GraphNode* n : g->nodes) {
    S().nodes.erase(n);
    if (n->work.child != nullptr) DestroyGraphLocked(n->work.child);
  }
  g->nodes.clear();
  g->launch.clear();
  g->launch.shrink_to_fit();
  g->shape.clear();
}

void DestroyGraph(Graph* g) {
  std::lock_guard<std::mutex> lock(S().graph_mu);
  DestroyGraphLocked(g);
}

uint32_t NextGraphNodeId() { return S().next_node_id.fetch_add(1); }

namespace {

// Graph node events queued by this thread (GraphMutex() held), delivered by
// FlushGraphNodeEvents once the locks are released.
thread_local std::vector<GpusimGraphNodeEvent> t_graph_events;

void RegisterNodeId(const GraphNode* n) {
  std::unique_lock<std::shared_mutex> lock(S().node_ids_mu);
  S().node_ids.insert(n);
}

void QueueGraphNodeEvent(int what, const Graph* graph, const GraphNode* node,
                         const GraphNode* original, const Graph* exec) {
  if (S().graph_observer.load(std::memory_order_acquire) == nullptr) return;
  GpusimGraphNodeEvent ev = {};
  ev.what = what;
  ev.graph = const_cast<Graph*>(graph);
  ev.node = const_cast<GraphNode*>(node);
  ev.node_type = static_cast<int>(node->work.type);
  ev.graph_exec = const_cast<Graph*>(exec);
  ev.node_id = node->id;
  if (what == GPUSIM_GRAPHNODE_CLONED) {
    ev.original_graph = original->graph;
    ev.original_node = const_cast<GraphNode*>(original);
    ev.original_node_id = original->id;
  }
  t_graph_events.push_back(ev);
}

}  // namespace

GraphNode* AddNodeLocked(Graph* g, NodeWork work, const std::vector<GraphNode*>& deps,
                         const cudaGraphEdgeData* edge_data, const GraphNode* cloned_from) {
  GraphNode* n = new GraphNode();
  n->graph = g;
  n->id = NextGraphNodeId();
  n->work = std::move(work);
  n->work.op.rec.graph_node_id = n->id;
  n->deps = deps;
  n->edge_data.resize(deps.size());
  if (edge_data != nullptr) n->edge_data.assign(edge_data, edge_data + deps.size());
  if (n->work.child != nullptr) n->work.child->owner = n;
  n->cloned_from = cloned_from;
  g->nodes.push_back(n);
  S().nodes.insert(n);
  RegisterNodeId(n);
  if (cloned_from != nullptr) {
    QueueGraphNodeEvent(GPUSIM_GRAPHNODE_CLONED, g, n, cloned_from, nullptr);
  } else {
    QueueGraphNodeEvent(GPUSIM_GRAPHNODE_CREATED, g, n, nullptr, nullptr);
  }
  return n;
}

void AddExecNodeLocked(Graph* exec, const Graph* graph, ExecNode* x) {
  GraphNode* n = new GraphNode();
  n->graph = exec;
  n->id = NextGraphNodeId();
  n->work.type = x->work.type;  // the work itself stays in the ExecNode
  n->cloned_from = x->source;
  x->node = n;
  x->work.op.rec.graph_node_id = n->id;
  RegisterNodeId(n);
  QueueGraphNodeEvent(GPUSIM_GRAPHNODE_CREATED, graph, n, nullptr, exec);
  QueueGraphNodeEvent(GPUSIM_GRAPHNODE_CLONED, graph, n, x->source, exec);
}

void SetGraphObserver(GpusimGraphNodeCallback cb, void* user) {
  // The previous observer is leaked on purpose: another thread may still be using it.
  const State::GraphObserver* obs = nullptr;
  if (cb != nullptr) obs = new State::GraphObserver{cb, user};
  S().graph_observer.store(obs, std::memory_order_release);
}

uint64_t GraphNodeId(const void* node) {
  const GraphNode* n = static_cast<const GraphNode*>(node);
  std::shared_lock<std::shared_mutex> lock(S().node_ids_mu);
  return S().node_ids.count(n) != 0 ? n->id : 0;
}

void FlushGraphNodeEvents() {
  if (__builtin_expect(t_graph_events.empty(), 1)) return;
  std::vector<GpusimGraphNodeEvent> events;
  events.swap(t_graph_events);
  const State::GraphObserver* obs = S().graph_observer.load(std::memory_order_acquire);
  if (obs == nullptr) return;
  for (const GpusimGraphNodeEvent& ev : events) obs->cb(obs->user, &ev);
}

void DestroyNodeLocked(GraphNode* n) {
  Graph* g = n->graph;
  for (GraphNode* m : g->nodes) {
    for (size_t i = 0; i < m->deps.size();) {
      if (m->deps[i] == n) {
        m->deps.erase(m->deps.begin() + static_cast<long>(i));
        m->edge_data.erase(m->edge_data.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (g->nodes[i] == n) {
      g->nodes.erase(g->nodes.begin() + static_cast<long>(i));
      break;
    }
  }
  S().nodes.erase(n);
  if (n->work.child != nullptr) DestroyGraphLocked(n->work.child);
}

NodeWork WorkFromCapturedOp(const Op& op) {
  NodeWork w;
  w.op = op;
  w.op.waits.clear();
  w.op.staging.clear();  // a launch copies the source as it is then, like the device
  w.op.staging.shrink_to_fit();
  w.op.rec.correlation_id = 0;
  w.op.rec.queued_ns = 0;
  switch (op.action) {
    case Op::kKernel:
      w.type = cudaGraphNodeTypeKernel;
      w.kernel.func = const_cast<void*>(op.kernel->host_fn);
      w.kernel.gridDim = dim3(op.rec.grid[0], op.rec.grid[1], op.rec.grid[2]);
      w.kernel.blockDim = dim3(op.rec.block[0], op.rec.block[1], op.rec.block[2]);
      w.kernel.sharedMemBytes = op.rec.shared_mem;
      break;
    case Op::kCopy:
      w.type = cudaGraphNodeTypeMemcpy;
      if (op.array_copy.srcArray != nullptr || op.array_copy.dstArray != nullptr) {
        w.copy = op.array_copy;  // a copy with a CUDA array reads back as the call described it
        break;
      }
      w.copy.srcPtr = cudaPitchedPtr{const_cast<void*>(op.src), op.spitch, op.width, op.sysize};
      w.copy.dstPtr = cudaPitchedPtr{op.dst, op.dpitch, op.width, op.dysize};
      w.copy.extent = cudaExtent{op.width, op.height, op.depth};
      w.copy.kind = static_cast<cudaMemcpyKind>(op.rec.copy_kind);
      break;
    case Op::kSet:
      w.type = cudaGraphNodeTypeMemset;
      w.set.dst = op.dst;
      w.set.pitch = op.dpitch;
      w.set.value = static_cast<unsigned>(op.value);
      w.set.elementSize = op.element_size;
      w.set.width = op.width / (op.element_size == 0 ? 1 : op.element_size);
      // cudaMemsetParams has no depth: a captured 3D set reads back as its rows (exact when
      // its slices are consecutive); the node's op keeps the slices.
      w.set.height = op.height * op.depth;
      break;
    case Op::kCustom:
      // A captured NCCL call is a kernel node, as on the device (its kernel is the library's,
      // with no host stub: func stays NULL). Each launch runs a clone of the template argument.
      w.type = cudaGraphNodeTypeKernel;
      w.kernel.gridDim = dim3(op.rec.grid[0], op.rec.grid[1], op.rec.grid[2]);
      w.kernel.blockDim = dim3(op.rec.block[0], op.rec.block[1], op.rec.block[2]);
      break;
    case Op::kHostFn:
    case Op::kStreamCallback:
      w.type = cudaGraphNodeTypeHost;
      w.host.fn = op.host_fn;
      w.host.userData = op.user_data;
      break;
    case Op::kFreeMemory:
      // cudaFreeAsync during capture: CUDA adds a memory free node. Replaying a free on every
      // launch would free the memory twice, so the node frees nothing (the memory leaks).
      w.type = cudaGraphNodeTypeMemFree;
      w.op = Op();
      break;
    default:
      w.op = Op();
      break;
  }
  return w;
}

// ---- Memory ---------------------------------------------------------------------------------

void TrackAllocation(void* p, size_t size, MemKind kind, int device, bool pooled,
                     unsigned host_flags) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.alloc_mu);
  auto inserted = st.allocations.emplace(reinterpret_cast<uintptr_t>(p),
                                         Allocation{size, kind, device, pooled, host_flags});
  if (!inserted.second) {  // the address was reused behind our back (e.g. registered twice)
    if (IsDeviceKind(inserted.first->second.kind)) {
      st.device_bytes[inserted.first->second.device] -= inserted.first->second.size;
    }
    inserted.first->second = Allocation{size, kind, device, pooled, host_flags};
  }
  if (IsDeviceKind(kind)) st.device_bytes[device] += size;
}

bool UntrackAllocation(void* p, bool device_kinds) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.alloc_mu);
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.kind == MemKind::kMapped) return false;
  if (IsDeviceKind(it->second.kind) != device_kinds) return false;
  if (device_kinds) st.device_bytes[it->second.device] -= it->second.size;
  st.allocations.erase(it);
  return true;
}

bool UntrackMapping(void* p) {
  State& st = S();
  std::lock_guard<std::mutex> lock(st.alloc_mu);
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.kind != MemKind::kMapped) return false;
  st.allocations.erase(it);
  return true;
}

void AddDeviceBytes(int device, int64_t delta) {
  if (device < 0 || device >= kMaxDevices) return;
  std::lock_guard<std::mutex> lock(S().alloc_mu);
  S().device_bytes[device] += static_cast<size_t>(delta);  // modular: a negative delta subtracts
}

bool FindAllocation(const void* p, void** base, Allocation* out) {
  State& st = S();
  uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(st.alloc_mu);
  auto it = st.allocations.upper_bound(addr);
  if (it == st.allocations.begin()) return false;
  --it;
  if (addr != it->first && addr >= it->first + it->second.size) return false;
  if (base != nullptr) *base = reinterpret_cast<void*>(it->first);
  if (out != nullptr) *out = it->second;
  return true;
}

size_t DeviceBytesInUse(int device) {
  std::lock_guard<std::mutex> lock(S().alloc_mu);
  return S().device_bytes[device];
}

int ResolveCopyKind(const void* dst, const void* src, int kind) {
  if (kind != cudaMemcpyDefault) return kind;
  auto on_device = [](const void* p) {
    Allocation a;
    return FindAllocation(p, nullptr, &a) && OnDevice(a.kind);
  };
  bool d = on_device(dst), s = on_device(src);
  if (d && s) return cudaMemcpyDeviceToDevice;
  if (d) return cudaMemcpyHostToDevice;
  if (s) return cudaMemcpyDeviceToHost;
  return cudaMemcpyHostToHost;
}

void RegisterSymbol(const void* host_var, size_t size) {
  std::lock_guard<std::mutex> lock(R().symbols_mu);
  R().symbols[host_var] = size;
}

bool SymbolSize(const void* host_var, size_t* size) {
  std::lock_guard<std::mutex> lock(R().symbols_mu);
  auto it = R().symbols.find(host_var);
  if (it == R().symbols.end()) return false;
  *size = it->second;
  return true;
}

// ---- Observer -------------------------------------------------------------------------------

// CUDA_INJECTION64_PATH, as NVIDIA's driver honours it when CUDA initializes: the library is
// dlopen'ed and its InitializeInjection() called, once per process, before the first API call
// is reported (so a tool that subscribes there sees that call). A call made while it runs (the
// tool's own) does not wait for it. A path that cannot be loaded, or a library without the
// function, is one line on stderr, as the driver ignores it and goes on.
void InjectOnce() {
  static std::atomic<int> state{0};  // 0 not yet, 1 running, 2 done
  if (__builtin_expect(state.load(std::memory_order_acquire) == 2, 1)) return;
  int expected = 0;
  if (!state.compare_exchange_strong(expected, 1)) return;
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (path != nullptr && path[0] != '\0') {
    void* h = dlopen(path, RTLD_NOW);
    auto init = h != nullptr ? reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"))
                             : nullptr;
    if (init != nullptr) {
      init();
    } else {
      fprintf(stderr, "gpusim: CUDA_INJECTION64_PATH=%s: %s\n", path,
              h == nullptr ? dlerror() : "no InitializeInjection");
    }
  }
  state.store(2, std::memory_order_release);
}

const Observer* CurrentObserver() {
  InjectOnce();
  return S().observer.load(std::memory_order_acquire);
}

void SetObserver(GpusimApiCallback api_cb, GpusimOpCallback op_cb, void* user) {
  // The previous Observer is leaked on purpose: another thread may still be using it.
  const Observer* obs = nullptr;
  if (api_cb != nullptr || op_cb != nullptr) obs = new Observer{api_cb, op_cb, user};
  S().observer.store(obs, std::memory_order_release);
}

uint32_t NextCorrelationId() {
  uint32_t id = S().next_corr.fetch_add(1, std::memory_order_relaxed);
  return id != 0 ? id : S().next_corr.fetch_add(1, std::memory_order_relaxed);
}

int RuntimeCbid(const char* func_name) {
  int cbid = 0;
  for (const CbidEntry& e : kCbids) {
    if (strcmp(e.name, func_name) == 0) cbid = e.cbid;  // later entries are newer versions
  }
  return cbid;
}

void ApiCall::Enter() {
  if (observer_->api_cb == nullptr) return;
  observer_->api_cb(observer_->user, GPUSIM_DOMAIN_RUNTIME, 0, info_.cbid, info_.name, symbol_,
                    corr_, params_, nullptr);
}

void ApiCall::Exit(cudaError_t err) {
  if (observer_->api_cb == nullptr) return;
  observer_->api_cb(observer_->user, GPUSIM_DOMAIN_RUNTIME, 1, info_.cbid, info_.name, symbol_,
                    corr_, params_, &err);
}

// ---- Ground truth ---------------------------------------------------------------------------

bool TruthEnabled() { return !S().truth_path.empty(); }

void TruthWrite(const char* json_object) {
  State& st = S();
  if (st.truth_path.empty()) return;
  int fd;
  {
    std::lock_guard<std::mutex> lock(st.truth_mu);
    pid_t pid = getpid();
    if (st.truth_fd < 0 || st.truth_pid != pid) {  // first line, or first line after fork()
      std::string path;
      for (size_t i = 0; i < st.truth_path.size(); ++i) {
        if (st.truth_path[i] == '%' && i + 1 < st.truth_path.size() &&
            st.truth_path[i + 1] == 'p') {
          path += std::to_string(pid);
          ++i;
        } else {
          path += st.truth_path[i];
        }
      }
      st.truth_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      st.truth_pid = pid;
      st.rank = ReadRank();
      if (st.truth_fd < 0) {
        fprintf(stderr, "gpusim: cannot open GPUSIM_TRUTH=%s: %s\n", path.c_str(),
                strerror(errno));
        st.truth_path.clear();
        return;
      }
      struct stat fs;
      if (fstat(st.truth_fd, &fs) == 0) {
        st.truth_dev = fs.st_dev;
        st.truth_ino = fs.st_ino;
      }
      st.truth_open_path = path;
    } else {
      // The program may have closed every descriptor and reused the number for a file of its
      // own: never write the log into it; reopen the log by its path.
      struct stat fs;
      if (fstat(st.truth_fd, &fs) != 0 || fs.st_dev != st.truth_dev || fs.st_ino != st.truth_ino) {
        st.truth_fd = open(st.truth_open_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (st.truth_fd < 0) return;
      }
    }
    fd = st.truth_fd;
  }
  std::string line(json_object);
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  ssize_t n = write(fd, line.data(), line.size());  // one write(2): lines never interleave
  (void)n;
}

}  // namespace gpusim
