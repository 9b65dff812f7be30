// gpusim's libcupti.so.13: the CUPTI callback and activity APIs on top of the simulated device.
//
// What it implements (against the real cupti.h of CUDA 13, so records have the real layouts):
//   * Callback API: one subscriber (cuptiSubscribe / cuptiSubscribe_v2, as the header documents:
//     a second one gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), runtime- and driver-API
//     domains with a real CUpti_CallbackData, per-cbid and per-domain enables; the resource
//     domain's CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED and _CLONED (a CUpti_ResourceData whose
//     resourceDescriptor is a CUpti_GraphData), issued where gpusim_internal.h says (inside the
//     API call that made the node; instantiation clones every node), and cuptiGetGraphNodeId.
//   * Activity API: tool-owned buffers (cuptiActivityRegisterCallbacks), records for KERNEL /
//     CONCURRENT_KERNEL (CUpti_ActivityKernel10; NCCL collectives appear as their device kernels),
//     MEMCPY (CUpti_ActivityMemcpy6: copies with CUDA arrays have the HTOA/ATOH/ATOA/ATOD/DTOA
//     copy kinds and ARRAY memory kinds; each copy of a batch is a record of its own, copyCount
//     1, with the batch call's correlation id), MEMSET (CUpti_ActivityMemset4), RUNTIME / DRIVER
//     (CUpti_ActivityAPI) and SYNCHRONIZATION (CUpti_ActivitySynchronization2, derived from the
//     synchronizing runtime calls). Other kinds can be enabled but produce no records.
//   * Timestamps: without a timestamp callback, CLOCK_REALTIME ns like NVIDIA's library on Linux;
//     the simulator's CLOCK_MONOTONIC op times are converted with one fixed offset measured at
//     load. With cuptiActivityRegisterTimestampCallback, device times are mapped into the tool's
//     clock with an offset measured at registration (CPU-side API records and cuptiGetTimestamp
//     call it directly).
//   * Every other function NVIDIA's libcupti.so.13 exports exists (cupti_sim_stubs.cc) and
//     returns CUPTI_ERROR_NOT_SUPPORTED (legacy event/metric API: ..._LEGACY_PROFILER_...).
//   * GPUSIM_CUPTI_FAIL=<CUptiResult> makes cuptiSubscribe(_v2) and cuptiActivityEnable return
//     that code (999 = CUPTI_ERROR_UNKNOWN, what NVIDIA's library returns without a driver).
//   * GPUSIM_CUPTI_DROP_EVERY=N drops every N-th activity record as if the buffers were full:
//     counted, and reported by cuptiActivityGetNumDroppedRecords like NVIDIA's library does.
//
// Threading: every entry point is thread safe. Activity records are appended under one mutex
// from the thread that produced them (API records: the calling thread; device records: the
// stream worker). Full buffers are handed to the tool from a delivery thread; cuptiActivity-
// FlushAll delivers synchronously on the caller's thread. The tool's buffer callbacks must not
// call cuptiActivityFlushAll themselves.
//
// The simulator is reached through gpusim_internal.h (dlsym at first use); with NVIDIA's
// libcudart loaded instead, subscribing and enabling activity return CUPTI_ERROR_NOT_INITIALIZED.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include <cupti.h>

#include "tests/gpusim/gpusim_internal.h"

namespace gpusim_cupti {
namespace {

// ----------------------------------------------------------------------------------------------
// Access to the simulated runtime.

struct SimApi {
  decltype(&gpusim_set_observer) set_observer = nullptr;
  decltype(&gpusim_stream_id) stream_id = nullptr;
  decltype(&gpusim_now_ns) now_ns = nullptr;
  decltype(&gpusim_current_device) current_device = nullptr;
  decltype(&gpusim_set_graph_observer) set_graph_observer = nullptr;  // NULL in older gpusims
  decltype(&gpusim_graph_node_id) graph_node_id = nullptr;
};

std::atomic<const SimApi*> g_sim{nullptr};

// Resolves the simulator's internal functions; retried until found (libcupti may be loaded
// before libcudart). Returns NULL when the simulator is not in the process.
const SimApi* Sim() {
  const SimApi* sim = g_sim.load(std::memory_order_acquire);
  if (sim != nullptr) return sim;
  // In the global scope, or in a libcudart the program loaded with dlopen(RTLD_LOCAL) (as
  // NVIDIA's CUPTI sees a runtime however it was loaded).
  void* lib = RTLD_DEFAULT;
  void* set_observer = dlsym(lib, "gpusim_set_observer");
  if (set_observer == nullptr) {
    lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return nullptr;
    set_observer = dlsym(lib, "gpusim_set_observer");
    if (set_observer == nullptr) return nullptr;  // not gpusim's (the handle stays referenced)
  }
  SimApi* s = new SimApi;
  s->set_observer = reinterpret_cast<decltype(s->set_observer)>(set_observer);
  s->stream_id = reinterpret_cast<decltype(s->stream_id)>(dlsym(lib, "gpusim_stream_id"));
  s->now_ns = reinterpret_cast<decltype(s->now_ns)>(dlsym(lib, "gpusim_now_ns"));
  s->current_device =
      reinterpret_cast<decltype(s->current_device)>(dlsym(lib, "gpusim_current_device"));
  s->set_graph_observer =
      reinterpret_cast<decltype(s->set_graph_observer)>(dlsym(lib, "gpusim_set_graph_observer"));
  s->graph_node_id =
      reinterpret_cast<decltype(s->graph_node_id)>(dlsym(lib, "gpusim_graph_node_id"));
  const SimApi* expected = nullptr;
  if (!g_sim.compare_exchange_strong(expected, s)) {
    delete s;
    return expected;
  }
  return s;
}

uint64_t ClockNs(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t MonoNs() {
  const SimApi* sim = g_sim.load(std::memory_order_acquire);
  if (sim != nullptr && sim->now_ns != nullptr) return sim->now_ns();
  return ClockNs(CLOCK_MONOTONIC);
}

// Offset from CLOCK_MONOTONIC to `other()`: the sample with the tightest bracket wins.
template <typename Fn>
int64_t MeasureOffset(Fn other) {
  int64_t best_offset = 0;
  uint64_t best_gap = ~0ull;
  for (int i = 0; i < 7; ++i) {
    uint64_t m1 = ClockNs(CLOCK_MONOTONIC);
    uint64_t o = other();
    uint64_t m2 = ClockNs(CLOCK_MONOTONIC);
    if (m2 - m1 < best_gap) {
      best_gap = m2 - m1;
      best_offset = static_cast<int64_t>(o) - static_cast<int64_t>(m1 + (m2 - m1) / 2);
    }
  }
  return best_offset;
}

int64_t RealtimeOffset() {
  static const int64_t offset = MeasureOffset([] { return ClockNs(CLOCK_REALTIME); });
  return offset;
}

std::atomic<CUpti_TimestampCallbackFunc> g_ts_callback{nullptr};
std::atomic<int64_t> g_ts_callback_offset{0};

// Simulator (monotonic) time -> CUPTI time.
uint64_t ToCuptiTime(uint64_t mono_ns) {
  if (mono_ns == 0) return CUPTI_TIMESTAMP_UNKNOWN;
  if (g_ts_callback.load(std::memory_order_acquire) != nullptr) {
    return mono_ns + g_ts_callback_offset.load(std::memory_order_relaxed);
  }
  return mono_ns + RealtimeOffset();
}

// CPU-side timestamp "now" in CUPTI's clock.
uint64_t CuptiNow() {
  CUpti_TimestampCallbackFunc cb = g_ts_callback.load(std::memory_order_acquire);
  if (cb != nullptr) return cb();
  return MonoNs() + RealtimeOffset();
}

// ----------------------------------------------------------------------------------------------
// Diagnostics and failure injection.

CUptiResult InjectedFailure() {
  static const int code = [] {
    const char* v = getenv("GPUSIM_CUPTI_FAIL");
    return v != nullptr ? atoi(v) : 0;
  }();
  return static_cast<CUptiResult>(code);
}

size_t InjectedDropEvery() {
  static const size_t every = [] {
    const char* v = getenv("GPUSIM_CUPTI_DROP_EVERY");
    long n = v != nullptr ? atol(v) : 0;
    return n > 0 ? size_t(n) : size_t(0);
  }();
  return every;
}

thread_local CUptiResult t_last_error = CUPTI_SUCCESS;

CUptiResult Ret(CUptiResult r) {
  if (r != CUPTI_SUCCESS) t_last_error = r;
  return r;
}

// ----------------------------------------------------------------------------------------------
// Callback API state.

constexpr int kNumDomains = CUPTI_CB_DOMAIN_SIZE;
constexpr uint32_t kMaxCbid = 1024;  // > CUPTI_DRIVER_TRACE_CBID_SIZE and the runtime's SIZE

uint32_t DomainSize(int domain) {
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API: return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API: return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE: return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX: return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE: return CUPTI_CBID_STATE_SIZE;
    default: return 0;
  }
}

}  // namespace
}  // namespace gpusim_cupti

// The subscriber handle CUPTI hands out (opaque to tools).
struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback;
  void* userdata;
  char name[CUPTI_SUBSCRIBER_NAME_MAX_LEN + 1];
  std::atomic<uint8_t> enabled[gpusim_cupti::kNumDomains][gpusim_cupti::kMaxCbid];
};

namespace gpusim_cupti {
namespace {

std::mutex g_sub_mu;  // serializes subscribe/unsubscribe
std::atomic<CUpti_Subscriber_st*> g_subscriber{nullptr};
std::atomic<uint32_t> g_callback_epoch{0};  // bumps on subscribe; pairs enter/exit frames

// Fake per-device contexts: the CUcontext values tools see in callbacks.
constexpr int kMaxDevices = 64;
struct FakeContext {
  int device;
};
FakeContext g_contexts[kMaxDevices];

int CurrentDevice() {
  const SimApi* sim = Sim();
  int dev = (sim != nullptr && sim->current_device != nullptr) ? sim->current_device() : 0;
  return (dev >= 0 && dev < kMaxDevices) ? dev : 0;
}

CUcontext ContextFor(int device) {
  g_contexts[device].device = device;
  return reinterpret_cast<CUcontext>(&g_contexts[device]);
}

// Returns the device of a context handed out by ContextFor, else -1.
int DeviceOfContext(CUcontext ctx) {
  auto* p = reinterpret_cast<FakeContext*>(ctx);
  if (p < &g_contexts[0] || p >= &g_contexts[kMaxDevices]) return -1;
  return static_cast<int>(p - &g_contexts[0]);
}

// Context ids: device + 1 (CUPTI's ids start at 1), matching the simulator's op records when it
// leaves context_id at 0.
uint32_t ContextIdForDevice(int device) { return static_cast<uint32_t>(device) + 1; }

// ----------------------------------------------------------------------------------------------
// Activity state.

std::atomic<uint8_t> g_kind_enabled[CUPTI_ACTIVITY_KIND_COUNT];
std::atomic<uint8_t> g_api_record_enabled[3][kMaxCbid];  // [domain][cbid], default on
std::atomic<bool> g_latency_timestamps{false};
std::atomic<int> g_thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
std::atomic<uint64_t> g_grid_id{0};

struct ActivityBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t valid = 0;
  size_t max_records = 0;
  size_t records = 0;
};

// All activity buffer state, never destroyed (the delivery thread may outlive static
// destruction at exit).
struct ActivityState {
  std::mutex mu;  // guards everything below except the callbacks' invocation
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  ActivityBuffer current;
  std::deque<ActivityBuffer> full;
  size_t dropped = 0;
  size_t appended = 0;  // records offered (GPUSIM_CUPTI_DROP_EVERY)
  uint32_t flush_period_ms = 0;
  bool thread_started = false;
  std::condition_variable cv;
  std::mutex deliver_mu;  // held while handing buffers to the tool (keeps their order)
  std::unordered_set<std::string> names;  // interned kernel names (never freed)
};

ActivityState& Act() {
  static ActivityState* state = new ActivityState;
  return *state;
}

bool AnyActivityEnabled() {
  for (auto& k : g_kind_enabled) {
    if (k.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

// Kernel names must outlive the buffers, as with CUPTI.
const char* InternName(const char* name) {
  if (name == nullptr) return nullptr;
  ActivityState& a = Act();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.names.insert(name).first->c_str();
}

// Moves a non-empty current buffer to the full list. Caller holds a.mu.
void RetireCurrentLocked(ActivityState& a) {
  if (a.current.data != nullptr && a.current.valid > 0) {
    a.full.push_back(a.current);
    a.current = ActivityBuffer();
    a.cv.notify_all();
  }
}

// Hands buffers in a.full to the tool, in order. Caller holds a.deliver_mu, not a.mu.
void DeliverFull(ActivityState& a) {
  for (;;) {
    ActivityBuffer b;
    CUpti_BuffersCallbackCompleteFunc complete;
    {
      std::lock_guard<std::mutex> lock(a.mu);
      if (a.full.empty()) return;
      b = a.full.front();
      a.full.pop_front();
      complete = a.complete;
    }
    if (complete != nullptr) complete(nullptr, 0, b.data, b.size, b.valid);
  }
}

void DeliveryThread() {
  ActivityState& a = Act();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(a.mu);
      if (a.flush_period_ms > 0) {
        a.cv.wait_for(lock, std::chrono::milliseconds(a.flush_period_ms));
        RetireCurrentLocked(a);
      } else {
        a.cv.wait(lock, [&] { return !a.full.empty(); });
      }
    }
    std::lock_guard<std::mutex> dlock(a.deliver_mu);
    DeliverFull(a);
  }
}

constexpr size_t kAlign = ACTIVITY_RECORD_ALIGNMENT;

size_t AlignUp(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// Offset of the first record in a tool buffer (records are 8-byte aligned).
size_t FirstRecordOffset(const uint8_t* buffer) {
  uintptr_t p = reinterpret_cast<uintptr_t>(buffer);
  return AlignUp(p) - p;
}

// Appends one record; requests a new buffer from the tool when needed; counts a drop when the
// tool gives none.
void AppendRecord(const void* record, size_t size) {
  ActivityState& a = Act();
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.request == nullptr) {
    ++a.dropped;
    return;
  }
  const size_t drop_every = InjectedDropEvery();
  if (drop_every > 0 && ++a.appended % drop_every == 0) {
    ++a.dropped;
    return;
  }
  ActivityBuffer& cur = a.current;
  bool fits = cur.data != nullptr && cur.valid + size <= cur.size &&
              (cur.max_records == 0 || cur.records < cur.max_records);
  if (!fits) {
    RetireCurrentLocked(a);
    if (cur.data != nullptr) cur = ActivityBuffer();  // empty and too small: abandon (rare)
    uint8_t* data = nullptr;
    size_t bsize = 0, max_records = 0;
    a.request(&data, &bsize, &max_records);
    if (data == nullptr || bsize < FirstRecordOffset(data) + size) {
      ++a.dropped;
      return;
    }
    cur.data = data;
    cur.size = bsize;
    cur.valid = FirstRecordOffset(data);
    cur.max_records = max_records;
    cur.records = 0;
  }
  memcpy(cur.data + cur.valid, record, size);
  cur.valid += AlignUp(size);
  if (cur.valid > cur.size) cur.valid = cur.size;
  ++cur.records;
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    default: return 0;
  }
}

bool KindOn(CUpti_ActivityKind k) { return g_kind_enabled[k].load(std::memory_order_relaxed); }

uint32_t ThreadId() {
  if (g_thread_id_type.load(std::memory_order_relaxed) == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return static_cast<uint32_t>(syscall(SYS_gettid));
  }
  return static_cast<uint32_t>(pthread_self());
}

// CUPTI's copy kind of a simulated copy: its cudaMemcpyKind, or with a CUDA array on a side
// (GpusimOpRecord::copy_arrays) HTOA, ATOH, ATOA, ATOD or DTOA.
uint8_t MemcpyKind(int cuda_kind, uint32_t arrays) {
  const bool src_array = (arrays & GPUSIM_COPY_SRC_ARRAY) != 0;
  const bool dst_array = (arrays & GPUSIM_COPY_DST_ARRAY) != 0;
  if (src_array && dst_array) return CUPTI_ACTIVITY_MEMCPY_KIND_ATOA;
  if (src_array) {
    return cuda_kind == cudaMemcpyDeviceToHost ? CUPTI_ACTIVITY_MEMCPY_KIND_ATOH
                                               : CUPTI_ACTIVITY_MEMCPY_KIND_ATOD;
  }
  if (dst_array) {
    return cuda_kind == cudaMemcpyHostToDevice ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOA
                                               : CUPTI_ACTIVITY_MEMCPY_KIND_DTOA;
  }
  switch (cuda_kind) {
    case cudaMemcpyHostToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
    case cudaMemcpyHostToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    case cudaMemcpyDeviceToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    case cudaMemcpyDeviceToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
  }
}

// ----------------------------------------------------------------------------------------------
// Observer callbacks (installed into the simulator).

// An API call in progress on this thread: enter and exit callbacks share correlationData and
// the start timestamp of the API record.
struct ApiFrame {
  uint32_t correlation_id;
  int domain;
  uint64_t start;
  uint64_t correlation_data;
};
constexpr int kMaxFrames = 32;
thread_local ApiFrame t_frames[kMaxFrames];
thread_local int t_depth = 0;

int SyncType(int cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
      return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000:
      return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
      return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020:
      return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    default: return -1;
  }
}

void EmitApiRecords(const ApiFrame& f, int cbid, const void* params, const void* ret,
                    uint64_t end) {
  int ret_value = ret != nullptr ? *static_cast<const int*>(ret) : 0;
  CUpti_ActivityKind kind = f.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? CUPTI_ACTIVITY_KIND_RUNTIME
                                                                    : CUPTI_ACTIVITY_KIND_DRIVER;
  if (KindOn(kind) && g_api_record_enabled[f.domain][cbid].load(std::memory_order_relaxed)) {
    CUpti_ActivityAPI r;
    memset(&r, 0, sizeof(r));
    r.kind = kind;
    r.cbid = static_cast<CUpti_CallbackId>(cbid);
    r.start = f.start;
    r.end = end;
    r.processId = static_cast<uint32_t>(getpid());
    r.threadId = ThreadId();
    r.correlationId = f.correlation_id;
    r.returnValue = static_cast<uint32_t>(ret_value);
    AppendRecord(&r, sizeof(r));
  }
  if (f.domain == CUPTI_CB_DOMAIN_RUNTIME_API && KindOn(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    int type = SyncType(cbid);
    if (type < 0) return;
    CUpti_ActivitySynchronization2 r;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = static_cast<CUpti_ActivitySynchronizationType>(type);
    r.start = f.start;
    r.end = end;
    r.correlationId = f.correlation_id;
    r.contextId = ContextIdForDevice(CurrentDevice());
    r.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    const SimApi* sim = Sim();
    if (params != nullptr && sim != nullptr && sim->stream_id != nullptr &&
        (type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ||
         type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT)) {
      // Both parameter structs start with the stream.
      cudaStream_t stream = *static_cast<const cudaStream_t*>(params);
      r.streamId = sim->stream_id(reinterpret_cast<gpusim_stream_t>(stream));
    }
    r.returnValue = static_cast<uint32_t>(ret_value);
    AppendRecord(&r, sizeof(r));
  }
}

void OnApi(void* /*user*/, int domain, int is_exit, int cbid, const char* func_name,
           const char* symbol_name, uint32_t correlation_id, const void* params,
           const void* ret) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  if (cbid <= 0 || static_cast<uint32_t>(cbid) >= kMaxCbid) return;
  CUpti_Subscriber_st* sub = g_subscriber.load(std::memory_order_acquire);
  bool cb_on = sub != nullptr && sub->enabled[domain][cbid].load(std::memory_order_relaxed);
  bool act_on = KindOn(CUPTI_ACTIVITY_KIND_RUNTIME) || KindOn(CUPTI_ACTIVITY_KIND_DRIVER) ||
                KindOn(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  ApiFrame* frame = nullptr;
  if (!is_exit) {
    if (t_depth < kMaxFrames) {
      frame = &t_frames[t_depth];
      frame->correlation_id = correlation_id;
      frame->domain = domain;
      frame->start = act_on ? CuptiNow() : 0;
      frame->correlation_data = 0;
    }
    ++t_depth;
  } else {
    uint64_t end = act_on ? CuptiNow() : 0;
    int top = t_depth - 1;
    if (top >= 0 && top < kMaxFrames && t_frames[top].correlation_id == correlation_id) {
      frame = &t_frames[top];
    }
    if (frame != nullptr && act_on && frame->start != 0) {
      EmitApiRecords(*frame, cbid, params, ret, end);
    }
  }
  if (cb_on) {
    int dev = CurrentDevice();
    CUpti_CallbackData data;
    memset(&data, 0, sizeof(data));
    data.callbackSite = is_exit ? CUPTI_API_EXIT : CUPTI_API_ENTER;
    data.functionName = func_name;
    data.functionParams = params;
    data.functionReturnValue = const_cast<void*>(ret);
    data.symbolName = symbol_name;
    data.context = ContextFor(dev);
    data.contextUid = ContextIdForDevice(dev);
    static thread_local uint64_t scratch;
    data.correlationData = frame != nullptr ? &frame->correlation_data : &scratch;
    data.correlationId = correlation_id;
    sub->callback(sub->userdata, static_cast<CUpti_CallbackDomain>(domain),
                  static_cast<CUpti_CallbackId>(cbid), &data);
  }
  if (is_exit && t_depth > 0) --t_depth;
}

// The latest forced flush (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)), simulator
// time. NVIDIA's CUPTI hands back the records of work still queued or running at a forced flush
// incomplete (no times) and never delivers them again (cupti_activity.h, cuptiActivityFlushAll:
// a forced flush is for the end of a session; the default flush is the periodic one).
std::atomic<uint64_t> g_forced_flush_ns{0};

// An op queued before the latest forced flush and finished after it: its record lost its times.
bool CutByForcedFlush(const GpusimOpRecord* rec) {
  const uint64_t forced = g_forced_flush_ns.load(std::memory_order_relaxed);
  return forced != 0 && rec->queued_ns != 0 && rec->queued_ns <= forced && rec->end_ns > forced;
}

void OnOp(void* /*user*/, const GpusimOpRecord* rec) {
  uint32_t context_id = rec->context_id != 0 ? rec->context_id : ContextIdForDevice(rec->device);
  GpusimOpRecord cut_copy;
  if (CutByForcedFlush(rec)) {
    cut_copy = *rec;
    cut_copy.start_ns = cut_copy.end_ns = 0;  // ToCuptiTime: CUPTI_TIMESTAMP_UNKNOWN
    rec = &cut_copy;
  }
  switch (rec->kind) {
    case GPUSIM_OP_KERNEL:
    case GPUSIM_OP_COLLECTIVE: {
      bool conc = KindOn(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (!conc && !KindOn(CUPTI_ACTIVITY_KIND_KERNEL)) return;
      CUpti_ActivityKernel10 r;
      memset(&r, 0, sizeof(r));
      r.kind = conc ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
      r.registersPerThread = 32;
      r.start = ToCuptiTime(rec->start_ns);
      r.end = ToCuptiTime(rec->end_ns);
      r.completed = r.end;
      r.deviceId = rec->device;
      r.contextId = context_id;
      r.streamId = rec->stream_id;
      r.gridX = static_cast<int32_t>(rec->grid[0]);
      r.gridY = static_cast<int32_t>(rec->grid[1]);
      r.gridZ = static_cast<int32_t>(rec->grid[2]);
      r.blockX = static_cast<int32_t>(rec->block[0]);
      r.blockY = static_cast<int32_t>(rec->block[1]);
      r.blockZ = static_cast<int32_t>(rec->block[2]);
      r.dynamicSharedMemory = static_cast<int32_t>(rec->shared_mem);
      r.correlationId = rec->correlation_id;
      r.gridId = static_cast<int64_t>(g_grid_id.fetch_add(1, std::memory_order_relaxed) + 1);
      // CUPTI reports the mangled name (NCCL collectives carry their device kernel's name there).
      r.name = InternName(rec->mangled_name != nullptr ? rec->mangled_name : rec->name);
      if (g_latency_timestamps.load(std::memory_order_relaxed)) {
        r.queued = ToCuptiTime(rec->queued_ns);
        r.submitted = r.queued;
      }
      r.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
      r.graphId = rec->graph_id;
      r.graphNodeId = rec->graph_node_id;
      r.clusterX = r.clusterY = r.clusterZ = 1;
      AppendRecord(&r, sizeof(r));
      break;
    }
    case GPUSIM_OP_MEMCPY: {
      if (!KindOn(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
      CUpti_ActivityMemcpy6 r;
      memset(&r, 0, sizeof(r));
      r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      r.copyKind = MemcpyKind(rec->copy_kind, rec->copy_arrays);
      bool src_dev = rec->copy_kind == cudaMemcpyDeviceToHost ||
                     rec->copy_kind == cudaMemcpyDeviceToDevice;
      bool dst_dev = rec->copy_kind == cudaMemcpyHostToDevice ||
                     rec->copy_kind == cudaMemcpyDeviceToDevice;
      r.srcKind = (rec->copy_arrays & GPUSIM_COPY_SRC_ARRAY) != 0 ? CUPTI_ACTIVITY_MEMORY_KIND_ARRAY
                  : src_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
                            : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      r.dstKind = (rec->copy_arrays & GPUSIM_COPY_DST_ARRAY) != 0 ? CUPTI_ACTIVITY_MEMORY_KIND_ARRAY
                  : dst_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
                            : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      r.bytes = rec->bytes;
      r.start = ToCuptiTime(rec->start_ns);
      r.end = ToCuptiTime(rec->end_ns);
      r.deviceId = rec->device;
      r.contextId = context_id;
      r.streamId = rec->stream_id;
      r.correlationId = rec->correlation_id;
      r.graphId = rec->graph_id;
      r.graphNodeId = rec->graph_node_id;
      r.copyCount = 1;
      AppendRecord(&r, sizeof(r));
      break;
    }
    case GPUSIM_OP_MEMSET: {
      if (!KindOn(CUPTI_ACTIVITY_KIND_MEMSET)) return;
      CUpti_ActivityMemset4 r;
      memset(&r, 0, sizeof(r));
      r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      r.bytes = rec->bytes;
      r.start = ToCuptiTime(rec->start_ns);
      r.end = ToCuptiTime(rec->end_ns);
      r.deviceId = rec->device;
      r.contextId = context_id;
      r.streamId = rec->stream_id;
      r.correlationId = rec->correlation_id;
      r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      r.graphId = rec->graph_id;
      r.graphNodeId = rec->graph_node_id;
      AppendRecord(&r, sizeof(r));
      break;
    }
    default:
      break;
  }
}

// A graph node event of the simulator: a resource-domain callback when its cbid is enabled.
// Called on the thread of the API call that made the node, between its enter and exit.
void OnGraphNode(void* /*user*/, const GpusimGraphNodeEvent* ev) {
  if (ev->what != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED &&
      ev->what != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    return;
  }
  CUpti_Subscriber_st* sub = g_subscriber.load(std::memory_order_acquire);
  if (sub == nullptr ||
      !sub->enabled[CUPTI_CB_DOMAIN_RESOURCE][ev->what].load(std::memory_order_relaxed)) {
    return;
  }
  CUpti_GraphData graph;
  memset(&graph, 0, sizeof(graph));
  graph.graph = static_cast<CUgraph>(ev->graph);
  graph.originalGraph = static_cast<CUgraph>(ev->original_graph);
  graph.node = static_cast<CUgraphNode>(ev->node);
  graph.originalNode = static_cast<CUgraphNode>(ev->original_node);
  graph.nodeType = static_cast<CUgraphNodeType>(ev->node_type);
  graph.graphExec = static_cast<CUgraphExec>(ev->graph_exec);
  CUpti_ResourceData data;
  memset(&data, 0, sizeof(data));
  data.context = ContextFor(CurrentDevice());
  data.resourceDescriptor = &graph;
  sub->callback(sub->userdata, CUPTI_CB_DOMAIN_RESOURCE, static_cast<CUpti_CallbackId>(ev->what),
                &data);
}

// Installs or removes the observer as subscribers and activity kinds come and go.
CUptiResult UpdateObserver() {
  const SimApi* sim = Sim();
  if (sim == nullptr) {
    static std::once_flag once;
    std::call_once(once, [] {
      fprintf(stderr, "gpusim-cupti: gpusim's libcudart is not loaded; no data\n");
    });
    return CUPTI_ERROR_NOT_INITIALIZED;
  }
  bool subscribed = g_subscriber.load() != nullptr;
  if (subscribed || AnyActivityEnabled()) {
    sim->set_observer(&OnApi, &OnOp, nullptr);
  } else {
    sim->set_observer(nullptr, nullptr, nullptr);
  }
  // Graph node events only feed resource callbacks: observed while there is a subscriber.
  if (sim->set_graph_observer != nullptr) {
    sim->set_graph_observer(subscribed ? &OnGraphNode : nullptr, nullptr);
  }
  return CUPTI_SUCCESS;
}

void InitDefaults() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (auto& d : g_api_record_enabled) {
      for (auto& e : d) e.store(1, std::memory_order_relaxed);
    }
    (void)RealtimeOffset();
  });
}

struct Init {
  Init() { InitDefaults(); }
} g_init;

// ----------------------------------------------------------------------------------------------
// Callback names, generated from cupti_runtime_cbid.h / cupti_driver_cbid.h.

struct CbidName {
  uint32_t cbid;
  const char* name;
};
const CbidName kRuntimeNames[] = {
#include "tests/gpusim/cupti_sim_runtime_names.inc"
};
const CbidName kDriverNames[] = {
#include "tests/gpusim/cupti_sim_driver_names.inc"
};

const char* LookupName(const CbidName* table, size_t n, uint32_t cbid) {
  for (size_t i = 0; i < n; ++i) {
    if (table[i].cbid == cbid) return table[i].name;
  }
  return nullptr;
}

}  // namespace
}  // namespace gpusim_cupti

using namespace gpusim_cupti;  // NOLINT: the C API below is this library's only surface

extern "C" {

CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  switch (result) {
#define GPUSIM_CASE(code) \
  case code:              \
    *str = #code;         \
    return CUPTI_SUCCESS;
    GPUSIM_CASE(CUPTI_SUCCESS)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_PARAMETER)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_DEVICE)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_CONTEXT)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_EVENT_ID)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_EVENT_NAME)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_OPERATION)
    GPUSIM_CASE(CUPTI_ERROR_OUT_OF_MEMORY)
    GPUSIM_CASE(CUPTI_ERROR_HARDWARE)
    GPUSIM_CASE(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT)
    GPUSIM_CASE(CUPTI_ERROR_API_NOT_IMPLEMENTED)
    GPUSIM_CASE(CUPTI_ERROR_MAX_LIMIT_REACHED)
    GPUSIM_CASE(CUPTI_ERROR_NOT_READY)
    GPUSIM_CASE(CUPTI_ERROR_NOT_COMPATIBLE)
    GPUSIM_CASE(CUPTI_ERROR_NOT_INITIALIZED)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_METRIC_ID)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_METRIC_NAME)
    GPUSIM_CASE(CUPTI_ERROR_QUEUE_EMPTY)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_HANDLE)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_STREAM)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_KIND)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_EVENT_VALUE)
    GPUSIM_CASE(CUPTI_ERROR_DISABLED)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_MODULE)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_METRIC_VALUE)
    GPUSIM_CASE(CUPTI_ERROR_HARDWARE_BUSY)
    GPUSIM_CASE(CUPTI_ERROR_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE)
    GPUSIM_CASE(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES)
    GPUSIM_CASE(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS)
    GPUSIM_CASE(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE)
    GPUSIM_CASE(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    GPUSIM_CASE(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED)
    GPUSIM_CASE(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE)
    GPUSIM_CASE(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
    GPUSIM_CASE(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED)
    GPUSIM_CASE(CUPTI_ERROR_INVALID_CHIP_NAME)
    GPUSIM_CASE(CUPTI_ERROR_UNKNOWN)
#undef GPUSIM_CASE
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
}

CUptiResult cuptiGetErrorMessage(CUptiResult result, const char** str) {
  return cuptiGetResultString(result, str);
}

CUptiResult cuptiGetLastError(void) {
  CUptiResult r = t_last_error;
  t_last_error = CUPTI_SUCCESS;
  return r;
}

CUptiResult cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  CUpti_TimestampCallbackFunc cb = g_ts_callback.load(std::memory_order_acquire);
  *timestamp = cb != nullptr ? cb() : ClockNs(CLOCK_REALTIME);
  return CUPTI_SUCCESS;
}

// ---- Callback API ----

CUptiResult cuptiSupportedDomains(size_t* domain_count, CUpti_DomainTable* domain_table) {
  static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_CB_DOMAIN_RESOURCE};
  if (domain_count == nullptr || domain_table == nullptr) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  *domain_count = sizeof(domains) / sizeof(domains[0]);
  *domain_table = domains;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                              void* userdata, CUpti_SubscriberParams* params) {
  InitDefaults();
  if (subscriber == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  if (params != nullptr && params->structSize == 0) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  if (InjectedFailure() != CUPTI_SUCCESS) return Ret(InjectedFailure());
  if (Sim() == nullptr) return Ret(UpdateObserver());
  std::lock_guard<std::mutex> lock(g_sub_mu);
  CUpti_Subscriber_st* old = g_subscriber.load();
  if (old != nullptr) {
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > 0) {
      snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", old->name);
    }
    return Ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  }
  auto* sub = new CUpti_Subscriber_st;
  sub->callback = callback;
  sub->userdata = userdata;
  snprintf(sub->name, sizeof(sub->name), "%s",
           params != nullptr && params->subscriberName != nullptr ? params->subscriberName
                                                                  : "unnamed");
  for (auto& d : sub->enabled) {
    for (auto& e : d) e.store(0, std::memory_order_relaxed);
  }
  g_subscriber.store(sub, std::memory_order_release);
  if (subscriber != nullptr) *subscriber = sub;
  return Ret(UpdateObserver());
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                           void* userdata) {
  if (subscriber == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  CUptiResult r = cuptiSubscribe_v2(subscriber, callback, userdata, nullptr);
  if (r == CUPTI_SUCCESS) *subscriber = g_subscriber.load();
  return r;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(g_sub_mu);
  if (subscriber == nullptr || g_subscriber.load() != subscriber) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  g_subscriber.store(nullptr, std::memory_order_release);
  UpdateObserver();
  // The handle is leaked on purpose: a callback may still be running on another thread.
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (subscriber == nullptr || domain <= 0 || domain >= kNumDomains ||
      cbid >= DomainSize(domain)) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  subscriber->enabled[domain][cbid].store(enable ? 1 : 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                  CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (enable == nullptr || subscriber == nullptr || domain <= 0 || domain >= kNumDomains ||
      cbid >= DomainSize(domain)) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  *enable = subscriber->enabled[domain][cbid].load(std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                              CUpti_CallbackDomain domain) {
  if (subscriber == nullptr || domain <= 0 || domain >= kNumDomains) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  for (uint32_t i = 0; i < DomainSize(domain); ++i) {
    subscriber->enabled[domain][i].store(enable ? 1 : 0, std::memory_order_relaxed);
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  if (subscriber == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  for (int d = 1; d < kNumDomains; ++d) {
    cuptiEnableDomain(enable, subscriber, static_cast<CUpti_CallbackDomain>(d));
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  if (name == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  const char* n = nullptr;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    n = LookupName(kRuntimeNames, sizeof(kRuntimeNames) / sizeof(kRuntimeNames[0]), cbid);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    n = LookupName(kDriverNames, sizeof(kDriverNames) / sizeof(kDriverNames[0]), cbid);
  }
  if (n == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *name = n;
  return CUPTI_SUCCESS;
}

// ---- Ids ----

CUptiResult cuptiGetContextId(CUcontext context, uint32_t* context_id) {
  if (context_id == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  int dev = DeviceOfContext(context);
  if (dev < 0) return Ret(CUPTI_ERROR_INVALID_CONTEXT);
  *context_id = ContextIdForDevice(dev);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* device_id) {
  if (device_id == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  if (context == nullptr) {
    *device_id = static_cast<uint32_t>(CurrentDevice());
    return CUPTI_SUCCESS;
  }
  int dev = DeviceOfContext(context);
  if (dev < 0) return Ret(CUPTI_ERROR_INVALID_CONTEXT);
  *device_id = static_cast<uint32_t>(dev);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetStreamIdEx(CUcontext /*context*/, CUstream stream, uint8_t per_thread_stream,
                               uint32_t* stream_id) {
  if (stream_id == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  const SimApi* sim = Sim();
  if (sim == nullptr || sim->stream_id == nullptr) return Ret(CUPTI_ERROR_NOT_INITIALIZED);
  if (stream == nullptr && per_thread_stream) stream = reinterpret_cast<CUstream>(0x2);
  *stream_id = sim->stream_id(reinterpret_cast<gpusim_stream_t>(stream));
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* stream_id) {
  return cuptiGetStreamIdEx(context, stream, 0, stream_id);
}

// Any node handle the simulator handed out: graph nodes (also of destroyed graphs) and the
// exec nodes of resource callbacks; their id is the graphNodeId of the records of their work.
CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t* node_id) {
  if (node == nullptr || node_id == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  const SimApi* sim = Sim();
  if (sim == nullptr || sim->graph_node_id == nullptr) return Ret(CUPTI_ERROR_NOT_INITIALIZED);
  uint64_t id = sim->graph_node_id(node);
  if (id == 0) return Ret(CUPTI_ERROR_INVALID_PARAMETER);  // not a node handle
  *node_id = id;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetNumContexts(CUdevice /*device*/, uint32_t* num) {
  if (num == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *num = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiDeviceSupported(CUdevice /*dev*/, int* support) {
  if (support == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *support = 1;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiComputeCapabilitySupported(int major, int /*minor*/, int* support) {
  if (support == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *support = major >= 7 ? 1 : 0;
  return CUPTI_SUCCESS;
}

// ---- Activity API ----

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed) {
  InitDefaults();
  if (requested == nullptr || completed == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  ActivityState& a = Act();
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.request = requested;
    a.complete = completed;
    start = !a.thread_started;
    a.thread_started = true;
  }
  if (start) gpusim::StartSimThread(&DeliveryThread);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  InitDefaults();
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
    return Ret(CUPTI_ERROR_INVALID_KIND);
  }
  if (InjectedFailure() != CUPTI_SUCCESS) return Ret(InjectedFailure());
  if (Sim() == nullptr) return Ret(UpdateObserver());
  g_kind_enabled[kind].store(1, std::memory_order_release);
  return Ret(UpdateObserver());
}

CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  return cuptiActivityEnable(kind);
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
    return Ret(CUPTI_ERROR_INVALID_KIND);
  }
  g_kind_enabled[kind].store(0, std::memory_order_release);
  if (Sim() != nullptr) UpdateObserver();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableContext(CUcontext /*context*/, CUpti_ActivityKind kind) {
  return cuptiActivityEnable(kind);
}

CUptiResult cuptiActivityDisableContext(CUcontext /*context*/, CUpti_ActivityKind kind) {
  return cuptiActivityDisable(kind);
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  InitDefaults();
  g_api_record_enabled[CUPTI_CB_DOMAIN_RUNTIME_API][cbid].store(enable ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  InitDefaults();
  g_api_record_enabled[CUPTI_CB_DOMAIN_DRIVER_API][cbid].store(enable ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  g_latency_timestamps.store(enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableLaunchAttributes(uint8_t /*enable*/) { return CUPTI_SUCCESS; }

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  ActivityState& a = Act();
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) {
    g_forced_flush_ns.store(MonoNs(), std::memory_order_relaxed);
  }
  std::lock_guard<std::mutex> dlock(a.deliver_mu);
  {
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.complete == nullptr) return Ret(CUPTI_ERROR_INVALID_OPERATION);
    RetireCurrentLocked(a);
  }
  DeliverFull(a);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlush(CUcontext /*context*/, uint32_t /*stream_id*/, uint32_t flag) {
  return cuptiActivityFlushAll(flag);
}

CUptiResult cuptiActivityFlushPeriod(uint32_t time_ms) {
  ActivityState& a = Act();
  std::lock_guard<std::mutex> lock(a.mu);
  a.flush_period_ms = time_ms;
  a.cv.notify_all();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_size,
                                       CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  size_t offset;
  if (*record == nullptr) {
    offset = FirstRecordOffset(buffer);
  } else {
    size_t prev = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
    size_t size = RecordSize((*record)->kind);
    if (size == 0) return Ret(CUPTI_ERROR_INVALID_KIND);
    offset = prev + AlignUp(size);
  }
  if (offset + sizeof(CUpti_Activity) > valid_size) {
    *record = nullptr;
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  size_t size = RecordSize(next->kind);
  if (size == 0 || offset + size > valid_size) return Ret(CUPTI_ERROR_INVALID_KIND);
  *record = next;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext /*context*/, uint32_t /*stream_id*/,
                                              size_t* dropped) {
  if (dropped == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  ActivityState& a = Act();
  std::lock_guard<std::mutex> lock(a.mu);
  *dropped = a.dropped;
  a.dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc func) {
  if (func == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  g_ts_callback_offset.store(MeasureOffset([func] { return func(); }));
  g_ts_callback.store(func, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* value_size,
                                      void* value) {
  if (value_size == nullptr || value == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  if (attr == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE && *value_size >= sizeof(size_t)) {
    *static_cast<size_t*>(value) = 8u << 20;
    *value_size = sizeof(size_t);
    return CUPTI_SUCCESS;
  }
  return Ret(CUPTI_ERROR_NOT_SUPPORTED);
}

CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute /*attr*/, size_t* value_size,
                                      void* value) {
  // Device-side buffer tuning has no meaning in the simulator: accepted and ignored.
  if (value_size == nullptr || value == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  }
  g_thread_id_type.store(type);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (type == nullptr) return Ret(CUPTI_ERROR_INVALID_PARAMETER);
  *type = static_cast<CUpti_ActivityThreadIdType>(g_thread_id_type.load());
  return CUPTI_SUCCESS;
}

CUptiResult cuptiFinalize(void) {
  ActivityState& a = Act();
  bool registered;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    registered = a.complete != nullptr;
  }
  if (registered) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto& k : g_kind_enabled) k.store(0);
  {
    std::lock_guard<std::mutex> lock(g_sub_mu);
    g_subscriber.store(nullptr);
  }
  if (Sim() != nullptr) UpdateObserver();
  return CUPTI_SUCCESS;
}

}  // extern "C"
