#include "agent/hooks/cupti/cupti_tracer.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

#include "agent/core/agent.h"
#include "agent/core/capture.h"
#include "agent/core/clock.h"
#include "agent/core/event.h"
#include "agent/hooks/cupti/activity.h"
#include "agent/hooks/cupti/mem_sizes.h"
#include "agent/model/steps.h"

namespace profagent {
// Weak: the core may not implement it yet (see agent.h).
void RecordDeviceClockSync(uint64_t device_ns, uint64_t monotonic_ns, uint64_t uncertainty_ns)
    __attribute__((weak));

namespace cupti {

thread_local ThreadState t_state __attribute__((tls_model("initial-exec"))) = {};

namespace internal {
std::atomic<bool> g_active{false};
}  // namespace internal

namespace {

// ---- The CUPTI functions the agent uses, found with dlsym in the dlopen'ed library. ----------
struct CuptiApi {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) num_dropped = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetDeviceId) get_device_id = nullptr;
  decltype(&cuptiGetGraphNodeId) get_graph_node_id = nullptr;
  decltype(&cuptiGetStreamIdEx) get_stream_id_ex = nullptr;
};

// Everything used from the buffer callbacks and the shutdown flush is trivially destructible or
// leaked on purpose: CUPTI may deliver buffers during exit, after static destructors ran.
CuptiApi g_api;
CUpti_SubscriberHandle g_subscriber = nullptr;
std::mutex& Mu() {  // guards start, g_clock, Names()
  static auto* mu = new std::mutex();
  return *mu;
}
bool g_started = false;
bool g_start_ok = false;
std::string& StartReason() {
  static auto* s = new std::string();
  return *s;
}
ClockMap g_clock;
std::unordered_map<const void*, uint32_t>& Names() {  // CUPTI name pointer -> string id
  static auto* m = new std::unordered_map<const void*, uint32_t>();
  return *m;
}
std::atomic<bool> g_flusher_stop{false};
// Correlation ids of calls made while not recording (schedule, capture range): their activity
// records are dropped in BufferCompleted. Leaked: buffers may arrive during exit.
RecordedCorrs& Gate() {
  static auto* g = new RecordedCorrs();
  return *g;
}
uint64_t g_skipped = 0;  // records left out by the gate (Mu() held)
// Kernels launched outside graphs (driver-level launch callbacks that succeeded on a stream not
// being captured) and kernel records outside graphs received: at exit the difference is the
// work still running, which gets a moment to finish before the final flush (WaitForInFlight).
std::atomic<uint64_t> g_kernels_launched{0};
std::atomic<uint64_t> g_kernel_records{0};
// When the kernel records stopped coming while launches went on (another CUPTI client took
// the activity API: it serves one client per process): the last buffer with a kernel record
// (ticks) and the launches counted then, and the last launch counted (ticks).
std::atomic<uint64_t> g_last_record_tick{0}, g_launched_at_last_record{0};
std::atomic<uint64_t> g_last_launch_tick{0};

void EarlyExitFlush();  // below

// The application's first kernel launch: the CUDA runtime is initialized and the program's
// modules registered (nvcc's code registers their unregistration with atexit). An exit
// handler registered now runs before those (handlers run in reverse order) and before the
// runtime's teardown: the records of work still in CUPTI's buffers are taken while the
// context and the modules are still there. The final (forced) flush comes at the agent's own
// exit handler, after them, for what ran since.
void RegisterEarlyExitFlush() {
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_relaxed) || done.exchange(true)) return;
  atexit(EarlyExitFlush);
}

void CountKernelLaunch() {
  g_kernels_launched.fetch_add(1, std::memory_order_relaxed);
  g_last_launch_tick.store(Now(), std::memory_order_relaxed);
  RegisterEarlyExitFlush();
}
// Records CUPTI delivered without times (start or end 0: the kernel was still running at a
// forced flush, or CUPTI lacked device memory to time it), and buffers whose walk stopped at a
// record CUPTI called incomplete (the rest of that buffer is unreadable). Mu() held.
uint64_t g_untimed_records = 0;
uint64_t g_cut_buffers = 0;
InjectionStarter g_injection_starter = nullptr;

constexpr size_t kBufferBytes = 1 << 20;

std::string ResultName(CUptiResult r) {
  const char* s = nullptr;
  if (g_api.result_string && g_api.result_string(r, &s) == CUPTI_SUCCESS && s) {
    // NVIDIA's strings look like "CUPTI_ERROR_UNKNOWN"; keep the first word.
    std::string str(s);
    size_t sp = str.find_first_of(" :");
    return sp == std::string::npos ? str : str.substr(0, sp);
  }
  return "CUPTI error " + std::to_string(int(r));
}

std::string Failure(const char* call, CUptiResult r) {
  std::string s = std::string("CUPTI: ") + call + " returned " + ResultName(r);
  // CUPTI_ERROR_NOT_INITIALIZED: also a driver older than this libcupti (CUPTI's guide).
  if (r == CUPTI_ERROR_UNKNOWN) s += " (no driver?)";
  if (r == CUPTI_ERROR_NOT_INITIALIZED) {
    // The versions that tell the two apart, from what is loaded (no CUDA call here: this may
    // run inside the driver's InitializeInjection).
    std::string versions;
    uint32_t api = 0;
    if (g_api.get_version != nullptr && g_api.get_version(&api) == CUPTI_SUCCESS) {
      versions += ", CUPTI API version " + std::to_string(api);
    }
    using DriverVersion = CUresult (*)(int*);
    int driver = 0;
    if (auto get = reinterpret_cast<DriverVersion>(dlsym(RTLD_DEFAULT, "cuDriverGetVersion"));
        get != nullptr && get(&driver) == CUDA_SUCCESS) {
      versions += ", driver CUDA " + std::to_string(driver / 1000) + "." +
                  std::to_string(driver % 1000 / 10);
    }
    s += " (no driver, or one older than this CUPTI" + versions +
         "? PROFAGENT_CUPTI_PATH can name the libcupti of the driver's CUDA version)";
  }
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) s += " (another tool holds CUPTI)";
  return s;
}

uint64_t CUPTIAPI TimestampCallback() { return MonotonicNs(); }

uint32_t InternName(const char* name) {
  // Called with Mu() held by BufferCompleted.
  auto it = Names().find(name);
  if (it != Names().end()) return it->second;
  uint32_t id = InternKernelName(name);  // CUPTI reports mangled names
  Names().emplace(name, id);
  return id;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  if (posix_memalign(&p, 8, kBufferBytes) != 0) p = nullptr;
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                              size_t valid) {
  HookGuard guard;  // nothing this thread does here is the application's
  if (buffer && valid > 0 && g_api.next_record) {
    std::lock_guard<std::mutex> lock(Mu());
    const uint64_t kernel_records = g_kernel_records.load();
    CUpti_Activity* rec = nullptr;
    CUptiResult r;
    while ((r = g_api.next_record(buffer, valid, &rec)) == CUPTI_SUCCESS) {
      RawEvent e;
      bool untimed = false;
      // A buffer holds thousands of records: wait for ring space rather than drop (this is
      // CUPTI's thread, not the application's).
      // (Kernel records counted as the launches are, WaitForInFlight: of recorded calls only.)
      if (!ActivityToEvent(rec, g_clock, InternName, &e, &untimed)) {
        g_untimed_records += untimed;
        if (untimed && e.dev.kind == 0 && e.dev.graph == 0 && Gate().Recorded(e.dev.corr)) {
          g_kernel_records.fetch_add(1);
        }
        continue;
      }
      const bool recorded = Gate().Recorded(e.dev.corr);
      if (e.dev.kind == 0 && e.dev.graph == 0 && recorded) g_kernel_records.fetch_add(1);
      if (recorded) {
        const uint64_t node = GraphNodeOf(rec);
        if (node != 0) {
          EmitWaitWithBytes(e, &node, sizeof(node));
        } else {
          EmitWait(e);
        }
      } else {
        ++g_skipped;
      }
    }
    if (r == CUPTI_ERROR_INVALID_KIND) ++g_cut_buffers;
    if (g_kernel_records.load() != kernel_records) {
      g_launched_at_last_record.store(g_kernels_launched.load(std::memory_order_relaxed));
      g_last_record_tick.store(Now(), std::memory_order_relaxed);
    }
  }
  free(buffer);
  size_t dropped = 0;
  if (g_api.num_dropped && g_api.num_dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
    CountUpstreamDrops(dropped);
  }
}

// ---- Callbacks -----------------------------------------------------------------------------
// Registers a CUfunction's name once (tiny lock-free direct-mapped cache of seen handles).
void NoteFunctionName(const void* f, const char* name) {
  static std::atomic<const void*> seen[1024];
  if (!f || !name) return;
  size_t h = (reinterpret_cast<uintptr_t>(f) >> 4) & 1023;
  if (seen[h].load(std::memory_order_relaxed) == f) return;
  RegisterFunctionName(f, name);
  seen[h].store(f, std::memory_order_relaxed);
}

uint16_t ApiIdFor(const char* name) {
  // Callback-recorded calls are rare (injection without LD_PRELOAD, driver launches); a small
  // cache by name pointer keeps RegisterApi off the per-call path.
  static std::atomic<const char*> keys[256];
  static std::atomic<uint16_t> ids[256];
  size_t h = (reinterpret_cast<uintptr_t>(name) >> 3) & 255;
  if (keys[h].load(std::memory_order_acquire) == name) return ids[h].load(std::memory_order_relaxed);
  uint16_t id = RegisterApi(name);
  ids[h].store(id, std::memory_order_relaxed);
  keys[h].store(name, std::memory_order_release);
  return id;
}

// Fills a launch event; returns the dimensions as given, which the event must carry in a
// continuation slot (EmitLaunch) when they do not fit its payload.
LaunchShapeExtra FillLaunch(RawEvent* e, const void* f, dim3 g, dim3 b, size_t shmem,
                            const void* stream) {
  e->type = EvType::kLaunch;
  e->launch.func = f;
  e->launch.stream = reinterpret_cast<uint64_t>(stream);
  e->launch.grid_x = g.x;
  e->launch.grid_y = uint16_t(g.y);
  e->launch.grid_z = uint16_t(g.z);
  e->launch.block = PackBlock(b.x, b.y, b.z);
  e->launch.shmem = uint32_t(shmem < 0xffffff ? shmem : 0xffffff);
  e->launch.device = 0;  // (the kernel's device op carries it)
  return LaunchShapeExtra{{g.x, g.y, g.z}, {b.x, b.y, b.z}};
}

std::atomic<LaunchStackFn> g_launch_stack{nullptr};

// A launch recorded from a callback (injection, a static cudart, a driver-API launch): its
// host stack first, as the interposer takes one (PROFAGENT_STACKS).
void MaybeLaunchStack(const RawEvent& e) {
  if (e.type != EvType::kLaunch && e.type != EvType::kGraphLaunch) return;
  if (LaunchStackFn fn = g_launch_stack.load(std::memory_order_relaxed)) fn(e.t0);
}

// Emits a kLaunch event, with its shape in a continuation slot when the payload cannot hold it.
void EmitLaunch(const RawEvent& e, const LaunchShapeExtra& shape) {
  if (FitsLaunchPayload(shape)) {
    Emit(e);
  } else {
    EmitWithBytes(e, &shape, sizeof(shape));
  }
}

// CUDA 13's __cudaLaunchKernel(_ptsz): what nvcc's <<<>>> calls. Spelled as numbers so that the
// agent also builds against CUDA 12 headers; a CUPTI older than 13 rejects them (optional).
constexpr CUpti_CallbackId kCbidLaunchKernel13 = 505;
constexpr CUpti_CallbackId kCbidLaunchKernel13Ptsz = 506;
// cudaStreamBeginCaptureToGraph(_ptsz) (CUDA 12.3).
constexpr CUpti_CallbackId kCbidBeginCaptureToGraph = 452;
constexpr CUpti_CallbackId kCbidBeginCaptureToGraphPtsz = 453;

// Batch copies: cudaMemcpyBatchAsync and cudaMemcpy3DBatchAsync (and _ptsz) of CUDA 12.8/12.9
// (v12080, with a `failIdx` argument) and of CUDA 13 (v13000, without). The CUDA 13 header
// publishes only the v13000 parameter structs; the v12080 ones follow the 12.8 signatures.
constexpr CUpti_CallbackId kCbidMemcpyBatch128 = 482;
constexpr CUpti_CallbackId kCbidMemcpyBatch128Ptsz = 483;
constexpr CUpti_CallbackId kCbidMemcpy3DBatch128 = 484;
constexpr CUpti_CallbackId kCbidMemcpy3DBatch128Ptsz = 485;
constexpr CUpti_CallbackId kCbidMemcpyBatch13 = 509;
constexpr CUpti_CallbackId kCbidMemcpyBatch13Ptsz = 510;
constexpr CUpti_CallbackId kCbidMemcpy3DBatch13 = 511;
constexpr CUpti_CallbackId kCbidMemcpy3DBatch13Ptsz = 512;
struct MemcpyBatch128Params {
  void* const* dsts;
  const void* const* srcs;
  const size_t* sizes;
  size_t count;
  cudaMemcpyAttributes* attrs;
  size_t* attrsIdxs;
  size_t numAttrs;
  size_t* failIdx;
  cudaStream_t stream;
};
struct Memcpy3DBatch128Params {
  size_t numOps;
  cudaMemcpy3DBatchOp* opList;
  size_t* failIdx;
  unsigned long long flags;
  cudaStream_t stream;
};
// A 3D batch's bytes from a callback: an array's element size is not asked of the runtime there
// (its extent counts elements).
uint64_t Batch3DExtent(const cudaMemcpy3DBatchOp* ops, size_t count) {
  return Batch3DBytes(ops, count, [](cudaArray_const_t) { return 1u; });
}

// Capture bookkeeping (capture.h) for a runtime that no interposer sees (static cudart): every
// one of these calls' parameter structs starts with the stream.
bool IsEventRecord(CUpti_CallbackId cbid) {
  return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010;
}
// The _ptsz forms (what --default-stream per-thread builds call) of the runtime calls recorded
// from callbacks with their stream as given (copies and sets: FillCopyFromCallback): stream 0
// is the calling thread's per-thread default stream, as the interposers record it.
bool PerThreadRuntimeCall(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case kCbidLaunchKernel13Ptsz:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010:
      return true;
    default:
      return false;
  }
}

uint64_t StreamOf(const void* stream, bool per_thread) {
  const uint64_t s = reinterpret_cast<uint64_t>(stream);
  return s == 0 && per_thread ? kPerThreadStreamHandle : s;
}

// The same for the driver launches recorded from callbacks.
bool PerThreadDriverLaunch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
}

// The fork/join of a multi-stream capture, seen without the runtime query (capture.h): an
// event recorded on a capturing stream, a stream that waits on it (cudaStreamWaitEvent's and
// the two records' params begin with the same two handles, in their order).
void NoteCaptureJoinFromCallback(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const bool wait = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020 ||
                    cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000;
  if ((!wait && !IsEventRecord(cbid)) || cb->functionParams == nullptr ||
      cb->functionReturnValue == nullptr ||
      *static_cast<const cudaError_t*>(cb->functionReturnValue) != cudaSuccess) {
    return;
  }
  if (!wait) {
    auto* a = static_cast<const cudaEventRecord_v3020_params*>(cb->functionParams);
    NoteEventRecorded(reinterpret_cast<uint64_t>(a->event),
                      StreamOf(a->stream, PerThreadRuntimeCall(cbid)));
  } else {
    auto* a = static_cast<const cudaStreamWaitEvent_v3020_params*>(cb->functionParams);
    NoteStreamWaitedEvent(StreamOf(a->stream, PerThreadRuntimeCall(cbid)),
                          reinterpret_cast<uint64_t>(a->event));
  }
}

void NoteCaptureFromCallback(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const bool begin = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000 ||
                     cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000 ||
                     cbid == kCbidBeginCaptureToGraph || cbid == kCbidBeginCaptureToGraphPtsz;
  const bool end = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000 ||
                   cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000;
  if ((!begin && !end) || cb->functionParams == nullptr || cb->functionReturnValue == nullptr) {
    return;
  }
  uint64_t stream =
      reinterpret_cast<uint64_t>(*static_cast<const cudaStream_t*>(cb->functionParams));
  const bool ptsz = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000 ||
                    cbid == kCbidBeginCaptureToGraphPtsz ||
                    cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000;
  if (ptsz && stream == 0) stream = reinterpret_cast<uint64_t>(cudaStreamPerThread);
  NoteCaptureCall(stream, begin, *static_cast<const cudaError_t*>(cb->functionReturnValue));
}

// Flags a launch, copy or set made on a stream being captured into a graph (capture.h). From a
// CUPTI callback: no CUDA call, the capture table only.
void FlagCaptured(RawEvent* e) {
  const bool launch = e->type == EvType::kLaunch || e->type == EvType::kGraphLaunch;
  const bool mem = e->type == EvType::kMemcpy || e->type == EvType::kMemset;
  if ((launch && Capturing(e->launch.stream, false)) || (mem && Capturing(e->mem.stream, false))) {
    e->flags |= kFlagCaptured;
  }
}

// The copy or set of a runtime callback, as the interposers record it (runtime_hooks.cc): bytes
// (2D: width x height, 3D: the extent's), kind (peer copies: device to device), destination,
// stream (a synchronous call's is 0, or the per-thread stream for its _ptds variant; an async
// _ptsz call's 0 is the per-thread stream). False for a cbid that is not a copy or set.
bool FillCopyFromCallback(CUpti_CallbackId cbid, const void* p, RawEvent* e) {
  const cudaStream_t pt = cudaStreamPerThread;
  auto set = [e](EvType type, uint64_t bytes, uint32_t kind, const void* dst, cudaStream_t s) {
    e->type = type;
    e->mem.bytes = bytes;
    e->mem.kind = kind;
    e->mem.ptr = reinterpret_cast<uint64_t>(dst);
    e->mem.stream = reinterpret_cast<uint64_t>(s);
  };
  auto ptsz = [pt](cudaStream_t s) { return s == nullptr ? pt : s; };
  auto extent = [](const cudaExtent& x) { return uint64_t(x.width) * x.height * x.depth; };
  if (p == nullptr) return false;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpyAsync_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy2D_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy2DAsync_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000: {
      auto* a = static_cast<const cudaMemcpyPeer_v4000_params*>(p);
      set(EvType::kMemcpy, a->count, cudaMemcpyDeviceToDevice, a->dst, nullptr);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000: {
      auto* a = static_cast<const cudaMemcpyPeerAsync_v4000_params*>(p);
      set(EvType::kMemcpy, a->count, cudaMemcpyDeviceToDevice, a->dst, a->stream);
      return true;
    }
    // Symbol copies: a copy to a symbol names the symbol (its host shadow) as destination.
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpyToSymbol_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->symbol,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpyFromSymbol_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpyToSymbolAsync_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->symbol,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020 ? a->stream
                                                                         : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpyFromSymbolAsync_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020 ? a->stream
                                                                           : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000: {
      const cudaMemcpy3DParms* m = static_cast<const cudaMemcpy3D_v3020_params*>(p)->p;
      set(EvType::kMemcpy, m ? extent(m->extent) : 0, m ? uint32_t(m->kind) : 0,
          m ? m->dstPtr.ptr : nullptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy3DAsync_v3020_params*>(p);
      const cudaMemcpy3DParms* m = a->p;
      set(EvType::kMemcpy, m ? extent(m->extent) : 0, m ? uint32_t(m->kind) : 0,
          m ? m->dstPtr.ptr : nullptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000: {
      const cudaMemcpy3DPeerParms* m = static_cast<const cudaMemcpy3DPeer_v4000_params*>(p)->p;
      set(EvType::kMemcpy, m ? extent(m->extent) : 0, cudaMemcpyDeviceToDevice,
          m ? m->dstPtr.ptr : nullptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy3DPeerAsync_v4000_params*>(p);
      const cudaMemcpy3DPeerParms* m = a->p;
      set(EvType::kMemcpy, m ? extent(m->extent) : 0, cudaMemcpyDeviceToDevice,
          m ? m->dstPtr.ptr : nullptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000 ? a->stream
                                                                       : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000: {
      auto* a = static_cast<const cudaMemset_v3020_params*>(p);
      set(EvType::kMemset, a->count, 0, a->devPtr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemsetAsync_v3020_params*>(p);
      set(EvType::kMemset, a->count, 0, a->devPtr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000: {
      auto* a = static_cast<const cudaMemset2D_v3020_params*>(p);
      set(EvType::kMemset, uint64_t(a->width) * a->height, 0, a->devPtr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemset2DAsync_v3020_params*>(p);
      set(EvType::kMemset, uint64_t(a->width) * a->height, 0, a->devPtr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000: {
      auto* a = static_cast<const cudaMemset3D_v3020_params*>(p);
      set(EvType::kMemset, extent(a->extent), 0, a->pitchedDevPtr.ptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemset3DAsync_v3020_params*>(p);
      set(EvType::kMemset, extent(a->extent), 0, a->pitchedDevPtr.ptr,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020 ? a->stream : ptsz(a->stream));
      return true;
    }
    // Copies to, from and between CUDA arrays (the array handle stands for the address).
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpyToArray_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpyToArrayAsync_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020 ? a->stream
                                                                        : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpyFromArray_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpyFromArrayAsync_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020 ? a->stream
                                                                          : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpyArrayToArray_v3020_params*>(p);
      set(EvType::kMemcpy, a->count, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy2DToArray_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy2DToArrayAsync_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020 ? a->stream
                                                                          : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy2DFromArray_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020 ? nullptr : pt);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000: {
      auto* a = static_cast<const cudaMemcpy2DFromArrayAsync_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020 ? a->stream
                                                                            : ptsz(a->stream));
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000: {
      auto* a = static_cast<const cudaMemcpy2DArrayToArray_v3020_params*>(p);
      set(EvType::kMemcpy, uint64_t(a->width) * a->height, a->kind, a->dst,
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020 ? nullptr : pt);
      return true;
    }
    // Batch copies: their total bytes, kind cudaMemcpyDefault, the first copy's destination.
    case kCbidMemcpyBatch128:
    case kCbidMemcpyBatch128Ptsz: {
      auto* a = static_cast<const MemcpyBatch128Params*>(p);
      set(EvType::kMemcpy, BatchBytes(a->sizes, a->count), cudaMemcpyDefault,
          a->dsts != nullptr && a->count > 0 ? a->dsts[0] : nullptr,
          cbid == kCbidMemcpyBatch128 ? a->stream : ptsz(a->stream));
      return true;
    }
    case kCbidMemcpyBatch13:
    case kCbidMemcpyBatch13Ptsz: {
      auto* a = static_cast<const cudaMemcpyBatchAsync_v13000_params*>(p);
      set(EvType::kMemcpy, BatchBytes(a->sizes, a->count), cudaMemcpyDefault,
          a->dsts != nullptr && a->count > 0 ? a->dsts[0] : nullptr,
          cbid == kCbidMemcpyBatch13 ? a->stream : ptsz(a->stream));
      return true;
    }
    case kCbidMemcpy3DBatch128:
    case kCbidMemcpy3DBatch128Ptsz: {
      auto* a = static_cast<const Memcpy3DBatch128Params*>(p);
      set(EvType::kMemcpy, Batch3DExtent(a->opList, a->numOps), cudaMemcpyDefault, nullptr,
          cbid == kCbidMemcpy3DBatch128 ? a->stream : ptsz(a->stream));
      return true;
    }
    case kCbidMemcpy3DBatch13:
    case kCbidMemcpy3DBatch13Ptsz: {
      auto* a = static_cast<const cudaMemcpy3DBatchAsync_v13000_params*>(p);
      set(EvType::kMemcpy, Batch3DExtent(a->opList, a->numOps), cudaMemcpyDefault, nullptr,
          cbid == kCbidMemcpy3DBatch13 ? a->stream : ptsz(a->stream));
      return true;
    }
    default:
      return false;
  }
}

// The event of a call seen from its callbacks: its times, API and return code; the rest zero.
RawEvent CallEvent(const CUpti_CallbackData* cb, uint64_t t0, uint64_t t1) {
  RawEvent e;
  std::memset(&e, 0, sizeof(e));
  e.t0 = t0;
  e.t1 = t1;
  e.api = ApiIdFor(cb->functionName);
  if (cb->functionReturnValue) e.ret = *static_cast<const int*>(cb->functionReturnValue);
  return e;
}

// A runtime call that did not pass through an agent interposer: record it from its callback.

void RecordRuntimeFromCallback(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t t0,
                               uint64_t t1) {
  RawEvent e = CallEvent(cb, t0, t1);
  const void* p = cb->functionParams;
  uint32_t corr = cb->correlationId;
  LaunchShapeExtra shape{};  // a launch's dimensions (EmitLaunch)
  const bool per_thread = PerThreadRuntimeCall(cbid);
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    // CUDA 13's <<<>>> entry point. Its header publishes no params struct; the call's arguments
    // (cudaKernel_t, grid, block, args, shared memory, stream) have cudaLaunchKernel's layout.
    case kCbidLaunchKernel13:
    case kCbidLaunchKernel13Ptsz:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000: {
      auto* a = static_cast<const cudaLaunchKernel_v7000_params*>(p);
      if (a) {
        shape = FillLaunch(&e, a->func, a->gridDim, a->blockDim, a->sharedMem,
                           reinterpret_cast<const void*>(StreamOf(a->stream, per_thread)));
      } else {
        e.type = EvType::kLaunch;
      }
      if (cb->symbolName && a) NoteFunctionName(a->func, cb->symbolName);
      e.launch.corr = corr;
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
      auto* a = static_cast<const cudaLaunchKernelExC_v11060_params*>(p);
      if (a && a->config)
        shape = FillLaunch(&e, a->func, a->config->gridDim, a->config->blockDim,
                           a->config->dynamicSmemBytes,
                           reinterpret_cast<const void*>(StreamOf(a->config->stream, per_thread)));
      else e.type = EvType::kLaunch;
      if (cb->symbolName && a) NoteFunctionName(a->func, cb->symbolName);
      e.launch.corr = corr;
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: {
      auto* a = static_cast<const cudaGraphLaunch_v10000_params*>(p);
      e.type = EvType::kGraphLaunch;
      if (a) {
        e.launch.func = a->graphExec;
        e.launch.stream = StreamOf(a->stream, per_thread);
      }
      e.launch.corr = corr;
      model::OnGraphLaunch(t0, t1, e.launch.stream);
      break;
    }
    // Allocations (at the callback's exit the pointer is out) and frees. Kinds: profagent.MemKind.
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
      // Every one of these starts with (void** out, size_t size).
      auto* a = static_cast<const cudaMalloc_v3020_params*>(p);
      e.type = EvType::kAlloc;
      if (a) {
        e.mem.bytes = a->size;
        if (e.ret == 0 && a->devPtr) e.mem.ptr = reinterpret_cast<uint64_t>(*a->devPtr);
      }
      e.mem.kind = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020           ? 0
                   : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000 ? 2
                   : (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020 ||
                      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020)
                       ? 1
                       : 3;
      // On a capturing stream: a graph memory node, nothing allocated now (a plain call).
      if (e.mem.kind == 3 && a != nullptr &&
          Capturing(reinterpret_cast<uint64_t>(
                        static_cast<const cudaMallocAsync_v11020_params*>(p)->hStream),
                    false)) {
        e.type = EvType::kApi;
        e.mem = {};
      }
      break;
    }
    // CUDA arrays: elements x the channel format's size (mem_sizes.h).
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000: {
      e.type = EvType::kAlloc;
      e.mem.kind = 0;
      if (p == nullptr) break;
      void* const* out = *static_cast<void* const* const*>(p);  // every one starts with it
      if (e.ret == 0 && out != nullptr) e.mem.ptr = reinterpret_cast<uint64_t>(*out);
      if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020) {
        auto* a = static_cast<const cudaMallocArray_v3020_params*>(p);
        e.mem.bytes = ArrayBytes(a->desc, cudaExtent{a->width, a->height, 0}, 1, a->flags);
      } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020) {
        auto* a = static_cast<const cudaMalloc3DArray_v3020_params*>(p);
        e.mem.bytes = ArrayBytes(a->desc, a->extent, 1, a->flags);
      } else {
        auto* a = static_cast<const cudaMallocMipmappedArray_v5000_params*>(p);
        e.mem.bytes = ArrayBytes(a->desc, a->extent, a->numLevels, a->flags);
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeMipmappedArray_v5000: {
      void* handle = p != nullptr ? *static_cast<void* const*>(p) : nullptr;
      if (handle == nullptr) return;
      e.type = EvType::kFree;
      e.mem.ptr = reinterpret_cast<uint64_t>(handle);
      e.mem.kind = 0;
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
      auto* a = static_cast<const cudaFree_v3020_params*>(p);  // (void* ptr, ...) in all
      if (a == nullptr || a->devPtr == nullptr) return;  // cudaFree(0): not a free
      e.type = EvType::kFree;
      e.mem.ptr = reinterpret_cast<uint64_t>(a->devPtr);
      e.mem.kind = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020       ? 0
                   : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020 ? 1
                                                                         : 3;
      if (cbid != CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020 &&
          cbid != CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020) {
        e.mem.stream = reinterpret_cast<uint64_t>(
            static_cast<const cudaFreeAsync_v11020_params*>(p)->hStream);
        if (Capturing(e.mem.stream, false)) {  // a graph memory node (see the allocations)
          e.type = EvType::kApi;
          e.mem = {};
        }
      }
      break;
    }
    // Synchronizations (host waits are step boundaries under PROFAGENT_STEP_RULE=sync).
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
      e.type = EvType::kSync;
      e.gen.a = ~0ull;
      model::OnHostSync(t0, t1, ~0ull);
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000: {
      auto* a = static_cast<const cudaStreamSynchronize_v3020_params*>(p);
      e.type = EvType::kSync;
      e.gen.a = a ? StreamOf(a->stream, per_thread) : 0;
      model::OnHostSync(t0, t1, e.gen.a);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020: {
      auto* a = static_cast<const cudaEventSynchronize_v3020_params*>(p);
      e.type = EvType::kSync;
      e.gen.b = a ? reinterpret_cast<uint64_t>(a->event) : 0;
      break;
    }
    // An event record (as the interposer records it: the event, then the stream).
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010: {
      auto* a = static_cast<const cudaEventRecord_v3020_params*>(p);
      e.type = EvType::kEvent;
      if (a) {
        e.gen.a = reinterpret_cast<uint64_t>(a->event);
        e.gen.b = StreamOf(a->stream, per_thread);
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000: {
      auto* a = static_cast<const cudaStreamWaitEvent_v3020_params*>(p);
      e.type = EvType::kSync;
      if (a) {
        e.gen.a = StreamOf(a->stream, per_thread);
        e.gen.b = reinterpret_cast<uint64_t>(a->event);
      }
      break;
    }
    // Captures and graph upkeep (as the interposers record them, runtime_hooks.cc): the stream
    // captured and the graph made; the exec or graph worked on and the graph it now follows.
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000:
    case kCbidBeginCaptureToGraph:
    case kCbidBeginCaptureToGraphPtsz:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000: {
      e.type = EvType::kApi;
      if (p == nullptr) break;
      const bool ptsz = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000 ||
                        cbid == kCbidBeginCaptureToGraphPtsz ||
                        cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000;
      cudaStream_t s = *static_cast<const cudaStream_t*>(p);  // every one starts with it
      if (ptsz && s == nullptr) s = cudaStreamPerThread;
      e.gen.a = reinterpret_cast<uint64_t>(s);
      if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000 ||
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000) {
        auto* a = static_cast<const cudaStreamEndCapture_v10000_params*>(p);
        if (e.ret == 0 && a->pGraph != nullptr) e.gen.b = reinterpret_cast<uint64_t>(*a->pGraph);
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphClone_v10000: {
      // (made*, source graph, ...) in all of them.
      auto* a = static_cast<const cudaGraphInstantiate_v12000_params*>(p);
      e.type = EvType::kApi;
      if (a != nullptr) {
        if (e.ret == 0 && a->pGraphExec != nullptr) {
          e.gen.b = reinterpret_cast<uint64_t>(*a->pGraphExec);
        }
        e.gen.c = reinterpret_cast<uint64_t>(a->graph);
        e.flags |= kFlagHasPayload;
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020: {
      auto* a = static_cast<const cudaGraphExecUpdate_v10020_params*>(p);
      e.type = EvType::kApi;
      if (a != nullptr) {
        e.gen.b = reinterpret_cast<uint64_t>(a->hGraphExec);
        e.gen.c = reinterpret_cast<uint64_t>(a->hGraph);
        e.flags |= kFlagHasPayload;
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphCreate_v10000: {
      auto* a = static_cast<const cudaGraphCreate_v10000_params*>(p);
      e.type = EvType::kApi;
      if (a != nullptr && e.ret == 0 && a->pGraph != nullptr) {
        e.gen.b = reinterpret_cast<uint64_t>(*a->pGraph);
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020:
      e.type = EvType::kApi;  // the exec or graph worked on comes first in each
      if (p != nullptr) e.gen.b = reinterpret_cast<uint64_t>(*static_cast<void* const*>(p));
      break;
    default: {
      // Copies and sets, 1D to 3D, peer and symbol: what the interposers record.
      if (!FillCopyFromCallback(cbid, p, &e)) {
        const char* name = cb->functionName ? cb->functionName : "";
        e.type = std::strstr(name, "Memset") != nullptr   ? EvType::kMemset
                 : std::strstr(name, "Memcpy") != nullptr ? EvType::kMemcpy
                                                          : EvType::kApi;
      }
      if (e.type != EvType::kApi) e.mem.corr = corr;
      break;
    }
  }
  // Outside the schedule or capture range only allocations and frees are recorded.
  if (e.type != EvType::kAlloc && e.type != EvType::kFree && !Recording()) return;
  // The device of a copy, set, allocation or free (the memory counter is per device): the
  // callback's context's.
  uint32_t device = 0;
  if (e.type != EvType::kLaunch && e.type != EvType::kGraphLaunch && e.type != EvType::kSync &&
      cb->context != nullptr && g_api.get_device_id != nullptr &&
      g_api.get_device_id(cb->context, &device) == CUPTI_SUCCESS) {
    e.mem.device = device;
  }
  FlagCaptured(&e);
  MaybeLaunchStack(e);
  EmitLaunch(e, shape);  // any other type: the zero shape fits
}

// Driver-API memory: cuMemCreate/cuMemRelease (physical memory of virtual memory management:
// PyTorch's expandable segments, vLLM's CuMemAllocator, ncclMemAlloc, reached through
// cudaGetDriverEntryPoint, which no interposer sees) and cuMemAlloc/cuMemFree and their
// stream-ordered forms (Triton, CuPy, driver-API programs). Profagent.MemKind values.
bool IsDriverMemory(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      return true;
    default:
      return false;
  }
}

constexpr uint32_t kMemDevice = 0, kMemHost = 1, kMemManaged = 2, kMemAsync = 3, kMemVmm = 4;

// Driver-API copies, sets and host synchronizations (JAX/XLA, CuPy, numba, Triton's launcher
// and driver-API programs make them; cudaGetDriverEntryPoint reaches them from runtime code):
// recorded as the runtime's are, so their device ops join a call (correlation id) and their
// steps, and syncs are in the host API table.
#define PROFAGENT_DRIVER_COPIES(X)                                                                 \
  X(cuMemcpyHtoD_v2)                                                                               \
  X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds) X(cuMemcpyDtoD_v2) X(         \
      cuMemcpyDtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz)                   \
      X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2) X(              \
          cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpy) X(cuMemcpy_ptds) X(cuMemcpyAsync)                 \
          X(cuMemcpyAsync_ptsz) X(cuMemcpyPeer) X(cuMemcpyPeer_ptds) X(cuMemcpyPeerAsync) X(       \
              cuMemcpyPeerAsync_ptsz) X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds) X(cuMemcpy2DAsync_v2) \
              X(cuMemcpy2DAsync_v2_ptsz) X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)  \
                  X(cuMemcpy3D_v2) X(cuMemcpy3D_v2_ptds) X(cuMemcpy3DAsync_v2) X(                  \
                      cuMemcpy3DAsync_v2_ptsz) X(cuMemcpy3DPeer) X(cuMemcpy3DPeer_ptds)            \
                      X(cuMemcpy3DPeerAsync) X(cuMemcpy3DPeerAsync_ptsz) X(cuMemcpyHtoA_v2) X(     \
                          cuMemcpyHtoA_v2_ptds) X(cuMemcpyAtoH_v2) X(cuMemcpyAtoH_v2_ptds)         \
                          X(cuMemcpyDtoA_v2) X(cuMemcpyDtoA_v2_ptds) X(cuMemcpyAtoD_v2) X(         \
                              cuMemcpyAtoD_v2_ptds) X(cuMemcpyAtoA_v2) X(cuMemcpyAtoA_v2_ptds)     \
                              X(cuMemcpyHtoAAsync_v2) X(cuMemcpyHtoAAsync_v2_ptsz)                 \
                                  X(cuMemcpyAtoHAsync_v2) X(cuMemcpyAtoHAsync_v2_ptsz) X(          \
                                      cuMemsetD8_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2)       \
                                      X(cuMemsetD16_v2_ptds) X(cuMemsetD32_v2) X(                  \
                                          cuMemsetD32_v2_ptds) X(cuMemsetD8Async)                  \
                                          X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async) X(           \
                                              cuMemsetD16Async_ptsz) X(cuMemsetD32Async)           \
                                              X(cuMemsetD32Async_ptsz) X(cuMemsetD2D8_v2) X(       \
                                                  cuMemsetD2D8_v2_ptds) X(cuMemsetD2D16_v2)        \
                                                  X(cuMemsetD2D16_v2_ptds) X(cuMemsetD2D32_v2) X(  \
                                                      cuMemsetD2D32_v2_ptds) X(cuMemsetD2D8Async)  \
                                                      X(cuMemsetD2D8Async_ptsz)                    \
                                                          X(cuMemsetD2D16Async)                    \
                                                              X(cuMemsetD2D16Async_ptsz)           \
                                                                  X(cuMemsetD2D32Async)            \
                                                                      X(cuMemsetD2D32Async_ptsz)
#define PROFAGENT_DRIVER_SYNCS(X) \
  X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuCtxSynchronize) X(cuEventSynchronize)

bool IsDriverGraphLaunch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
}

bool IsDriverCopyOrSync(CUpti_CallbackId cbid) {
#define PROFAGENT_CASE(n) case CUPTI_DRIVER_TRACE_CBID_##n:
  switch (cbid) {
    PROFAGENT_DRIVER_COPIES(PROFAGENT_CASE)
    PROFAGENT_DRIVER_SYNCS(PROFAGENT_CASE)
    return true;
    default:
      return false;
  }
#undef PROFAGENT_CASE
}

// Bytes, kind (cudaMemcpyKind), destination and stream of the 1D copies and sets whose
// parameters say them; the others (2D, 3D, arrays) are recorded by their call's name, their
// bytes 0 (CUPTI's activity record has them). _ptds/_ptsz calls use the per-thread stream.
void FillDriverCopy(CUpti_CallbackId cbid, const void* p, const char* name, RawEvent* e) {
  const bool per_thread = name != nullptr && (std::strstr(name, "_ptds") != nullptr ||
                                              std::strstr(name, "_ptsz") != nullptr);
  const uint64_t pt = reinterpret_cast<uint64_t>(cudaStreamPerThread);
  auto stream = [&](CUstream s) {
    const uint64_t h = reinterpret_cast<uint64_t>(s);
    return h == 0 && per_thread ? pt : h;
  };
  e->type =
      name != nullptr && std::strstr(name, "Memset") != nullptr ? EvType::kMemset : EvType::kMemcpy;
  e->mem.stream = per_thread ? pt : 0;
  if (p == nullptr) return;
  auto copy = [&](uint64_t bytes, uint32_t kind, uint64_t dst) {
    e->mem.bytes = bytes;
    e->mem.kind = kind;
    e->mem.ptr = dst;
  };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds: {
      auto* a = static_cast<const cuMemcpyHtoD_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyHostToDevice, a->dstDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
      auto* a = static_cast<const cuMemcpyHtoDAsync_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyHostToDevice, a->dstDevice);
      e->mem.stream = stream(a->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds: {
      auto* a = static_cast<const cuMemcpyDtoH_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToHost, reinterpret_cast<uint64_t>(a->dstHost));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
      auto* a = static_cast<const cuMemcpyDtoHAsync_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToHost, reinterpret_cast<uint64_t>(a->dstHost));
      e->mem.stream = stream(a->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds: {
      auto* a = static_cast<const cuMemcpyDtoD_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToDevice, a->dstDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz: {
      auto* a = static_cast<const cuMemcpyDtoDAsync_v2_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToDevice, a->dstDevice);
      e->mem.stream = stream(a->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds: {
      auto* a = static_cast<const cuMemcpy_params*>(p);
      copy(a->ByteCount, cudaMemcpyDefault, a->dst);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
      auto* a = static_cast<const cuMemcpyAsync_params*>(p);
      copy(a->ByteCount, cudaMemcpyDefault, a->dst);
      e->mem.stream = stream(a->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds: {
      auto* a = static_cast<const cuMemcpyPeer_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToDevice, a->dstDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz: {
      auto* a = static_cast<const cuMemcpyPeerAsync_params*>(p);
      copy(a->ByteCount, cudaMemcpyDeviceToDevice, a->dstDevice);
      e->mem.stream = stream(a->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds: {
      // (dstDevice, value, N): the value's width is in the name.
      auto* a = static_cast<const cuMemsetD32_v2_params*>(p);
      const uint64_t width = std::strstr(name, "D32") ? 4 : std::strstr(name, "D16") ? 2 : 1;
      copy(uint64_t(a->N) * width, 0, a->dstDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz: {
      auto* a = static_cast<const cuMemsetD32Async_params*>(p);
      const uint64_t width = std::strstr(name, "D32") ? 4 : std::strstr(name, "D16") ? 2 : 1;
      copy(uint64_t(a->N) * width, 0, a->dstDevice);
      e->mem.stream = stream(a->hStream);
      break;
    }
    default:
      break;
  }
}

void RecordDriverCopyOrSync(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t t0,
                            uint64_t t1) {
  RawEvent e = CallEvent(cb, t0, t1);
  const void* p = cb->functionParams;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
      e.type = EvType::kSync;
      e.gen.a = ~0ull;
      model::OnHostSync(t0, t1, ~0ull);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: {
      e.type = EvType::kSync;
      uint64_t s =
          p ? reinterpret_cast<uint64_t>(static_cast<const cuStreamSynchronize_params*>(p)->hStream)
            : 0;
      if (s == 0 && cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz) {
        s = reinterpret_cast<uint64_t>(cudaStreamPerThread);
      }
      e.gen.a = s;
      model::OnHostSync(t0, t1, s);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
      e.type = EvType::kSync;
      e.gen.b =
          p ? reinterpret_cast<uint64_t>(static_cast<const cuEventSynchronize_params*>(p)->hEvent)
            : 0;
      break;
    default: {
      FillDriverCopy(cbid, p, cb->functionName, &e);
      e.mem.corr = cb->correlationId;
      uint32_t device = 0;
      if (cb->context != nullptr && g_api.get_device_id != nullptr &&
          g_api.get_device_id(cb->context, &device) == CUPTI_SUCCESS) {
        e.mem.device = device;
      }
      FlagCaptured(&e);
      break;
    }
  }
  Emit(e);
}

void RecordDriverMemory(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t t0,
                        uint64_t t1) {
  const void* p = cb->functionParams;
  if (p == nullptr) return;
  RawEvent e = CallEvent(cb, t0, t1);
  bool device_known = false;
  // The allocating calls' parameters begin (CUdeviceptr* dptr, size_t bytesize), the freeing
  // calls' (CUdeviceptr dptr): cuMemAlloc_v2_params, cuMemAllocAsync_params, ...
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* a = static_cast<const cuMemCreate_params*>(p);
      e.type = EvType::kAlloc;
      e.mem.bytes = a->size;
      if (e.ret == 0 && a->handle != nullptr) e.mem.ptr = uint64_t(*a->handle);
      e.mem.kind = kMemHost;  // host-located physical memory: not the device's
      if (a->prop != nullptr && a->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        e.mem.kind = kMemVmm;
        e.mem.device = uint32_t(a->prop->location.id);
        device_known = true;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      auto* a = static_cast<const cuMemRelease_params*>(p);
      if (a->handle == 0) return;
      e.type = EvType::kFree;
      e.mem.ptr = uint64_t(a->handle);
      e.mem.kind = kMemVmm;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      auto* a = static_cast<const cuMemFreeAsync_params*>(p);
      if (a->dptr == 0) return;
      e.type = EvType::kFree;
      e.mem.ptr = uint64_t(a->dptr);
      e.mem.kind = kMemDevice;
      if (cbid != CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) {
        e.mem.kind = kMemAsync;
        e.mem.stream = reinterpret_cast<uint64_t>(a->hStream);
      }
      break;
    }
    default: {  // the allocating calls
      auto* a = static_cast<const cuMemAlloc_v2_params*>(p);
      e.type = EvType::kAlloc;
      e.mem.bytes = a->bytesize;
      if (e.ret == 0 && a->dptr != nullptr) e.mem.ptr = uint64_t(*a->dptr);
      e.mem.kind = cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2       ? kMemDevice
                   : cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged ? kMemManaged
                                                                       : kMemAsync;
      if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync ||
          cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz) {
        e.mem.stream =
            reinterpret_cast<uint64_t>(static_cast<const cuMemAllocAsync_params*>(p)->hStream);
      } else if (cbid != CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 &&
                 cbid != CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged) {
        e.mem.stream = reinterpret_cast<uint64_t>(
            static_cast<const cuMemAllocFromPoolAsync_params*>(p)->hStream);
      }
      break;
    }
  }
  // A stream-ordered call on a capturing stream makes a graph memory node: nothing now.
  if (e.mem.kind == kMemAsync && e.mem.stream != 0 && Capturing(e.mem.stream, false)) return;
  uint32_t device = 0;
  if (!device_known && cb->context != nullptr && g_api.get_device_id != nullptr &&
      g_api.get_device_id(cb->context, &device) == CUPTI_SUCCESS) {
    e.mem.device = device;
  }
  Emit(e);
}

void RecordDriverLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t t0,
                        uint64_t t1) {
  RawEvent e = CallEvent(cb, t0, t1);
  e.type = EvType::kLaunch;
  const void* p = cb->functionParams;
  const void* f = nullptr;
  LaunchShapeExtra shape{};
  if (p && (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ||
            cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz)) {
    auto* a = static_cast<const cuLaunchKernelEx_params*>(p);
    f = a->f;
    if (a->config)
      shape = FillLaunch(
          &e, f, dim3(a->config->gridDimX, a->config->gridDimY, a->config->gridDimZ),
          dim3(a->config->blockDimX, a->config->blockDimY, a->config->blockDimZ),
          a->config->sharedMemBytes,
          reinterpret_cast<const void*>(StreamOf(a->config->hStream, PerThreadDriverLaunch(cbid))));
  } else if (p) {  // cuLaunchKernel, _ptsz, cuLaunchCooperativeKernel(_ptsz): same prefix
    auto* a = static_cast<const cuLaunchKernel_params*>(p);
    f = a->f;
    shape = FillLaunch(
        &e, f, dim3(a->gridDimX, a->gridDimY, a->gridDimZ),
        dim3(a->blockDimX, a->blockDimY, a->blockDimZ), a->sharedMemBytes,
        reinterpret_cast<const void*>(StreamOf(a->hStream, PerThreadDriverLaunch(cbid))));
  }
  // No CUfunction in the parameters: the symbol name's address keys the kernel's name.
  if (f == nullptr) f = cb->symbolName;
  e.launch.func = f;
  e.launch.corr = cb->correlationId;
  NoteFunctionName(f, cb->symbolName);
  FlagCaptured(&e);
  MaybeLaunchStack(e);
  EmitLaunch(e, shape);
}

// A graph launch through the driver API (cuda-python's bindings, a driver-API program): the
// runtime's cudaGraphLaunch is recorded as that call, and the driver launch inside it not.
void RecordDriverGraphLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t t0,
                             uint64_t t1) {
  RawEvent e = CallEvent(cb, t0, t1);
  e.type = EvType::kGraphLaunch;
  if (const auto* a = static_cast<const cuGraphLaunch_params*>(cb->functionParams)) {
    e.launch.func = a->hGraph;  // (the CUgraphExec, named hGraph in cuda.h)
    e.launch.stream = StreamOf(a->hStream, PerThreadDriverLaunch(cbid));
  }
  e.launch.corr = cb->correlationId;
  model::OnGraphLaunch(t0, t1, e.launch.stream);
  FlagCaptured(&e);
  MaybeLaunchStack(e);
  EmitLaunch(e, LaunchShapeExtra{});
}

// The stream of a driver launch (0 = default stream or unknown): cuLaunchKernel(_ptsz) and
// cuLaunchCooperativeKernel(_ptsz) share cuLaunchKernel's parameter prefix.
uint64_t DriverLaunchStream(CUpti_CallbackId cbid, const void* p) {
  if (p == nullptr) return 0;
  const bool pt = PerThreadDriverLaunch(cbid);
  if (IsDriverGraphLaunch(cbid)) {  // (hGraphExec, hStream): cuGraphLaunch(_ptsz)_params
    return StreamOf(static_cast<const cuGraphLaunch_params*>(p)->hStream, pt);
  }
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ||
      cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    auto* a = static_cast<const cuLaunchKernelEx_params*>(p);
    return a->config != nullptr ? StreamOf(a->config->hStream, pt) : 0;
  }
  return StreamOf(static_cast<const cuLaunchKernel_params*>(p)->hStream, pt);
}

// A kernel launch through the runtime that succeeded on a stream not being captured: one kernel
// record to wait for at exit (WaitForInFlight).
void CountRuntimeLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const void* p = cb->functionParams;
  if (p == nullptr || cb->functionReturnValue == nullptr ||
      *static_cast<const cudaError_t*>(cb->functionReturnValue) != cudaSuccess) {
    return;
  }
  cudaStream_t stream = nullptr;
  bool ptsz = false;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case kCbidLaunchKernel13Ptsz:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      ptsz = true;
      [[fallthrough]];
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case kCbidLaunchKernel13:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      stream = static_cast<const cudaLaunchKernel_v7000_params*>(p)->stream;
      break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      ptsz = true;
      [[fallthrough]];
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: {
      auto* a = static_cast<const cudaLaunchKernelExC_v11060_params*>(p);
      if (a->config != nullptr) stream = a->config->stream;
      break;
    }
    default:
      return;
  }
  if (ptsz && stream == nullptr) stream = cudaStreamPerThread;
  if (!Capturing(reinterpret_cast<uint64_t>(stream), false)) CountKernelLaunch();
}

bool IsInstantiate(uint32_t cbid) {
  return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000;
}

// A graph node made (EV_GRAPH_NODE): by stream capture, inside the captured call, whose NVTX
// context the analyzer gives the kernels the node runs at each launch; by cudaGraphAdd*Node; or
// as a copy of another (cudaGraphClone, and instantiation, whose exec nodes are what activity
// records name). Recorded whatever the schedule, like allocations: a graph captured while not
// recording runs in recorded steps.
void GraphNodeCallback(CUpti_CallbackId cbid, const void* data) {
  if (cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED &&
      cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    return;
  }
  if (g_api.get_graph_node_id == nullptr || data == nullptr || !RecordingMemory()) return;
  const auto* gd = static_cast<const CUpti_GraphData*>(
      static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  if (gd == nullptr || gd->node == nullptr) return;
  const ThreadState& ts = t_state;
  // A node instantiation makes is a copy, which its CLONED callback names.
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && ts.rt_cb_depth > 0 &&
      IsInstantiate(ts.rt_cbid)) {
    return;
  }
  uint64_t id = 0, source = 0;
  if (g_api.get_graph_node_id(gd->node, &id) != CUPTI_SUCCESS || id == 0) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED &&
      (gd->originalNode == nullptr ||
       g_api.get_graph_node_id(gd->originalNode, &source) != CUPTI_SUCCESS || source == 0)) {
    return;
  }
  HookGuard g;
  RawEvent e{};
  e.type = EvType::kGraphNode;
  e.t0 = e.t1 = Now();
  e.gen.a = id;
  e.gen.b = source;
  // A new node: the NVTX context it was made in, whether or not those ranges are recorded.
  char context[1024];
  const size_t n = source == 0 ? model::ThreadNvtxContext(context, sizeof(context)) : 0;
  if (n > 0) {
    EmitWithBytes(e, context, n);
  } else {
    Emit(e);
  }
}

bool IsProfilerCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, bool start) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    return cbid == (start ? CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000
                          : CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
  }
  return domain == CUPTI_CB_DOMAIN_DRIVER_API &&
         cbid == (start ? CUPTI_DRIVER_TRACE_CBID_cuProfilerStart
                        : CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
}

void CUPTIAPI ApiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    GraphNodeCallback(cbid, data);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  ThreadState& ts = t_state;
  bool enter = cb->callbackSite == CUPTI_API_ENTER;
  // cudaProfilerStart/Stop (or the driver's) not through the interposer, which handles its own:
  // the range opens before the call is recorded and closes after it, as there.
  const bool own = ts.in_runtime == 0 && !HookGuard::Active();
  if (enter && own && IsProfilerCall(domain, cbid, /*start=*/true) &&
      (domain == CUPTI_CB_DOMAIN_RUNTIME_API || ts.rt_cb_depth == 0)) {
    SetCaptureRangeActive(true);
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (enter) {
      if (ts.rt_cb_depth++ == 0) {
        ts.rt_cbid = cbid;
        ts.api_corr = cb->correlationId;
        ts.rt_recording = Recording();
        Gate().Note(cb->correlationId, ts.rt_recording);
        ts.rt_t0 = Now();
      }
    } else if (ts.rt_cb_depth > 0 && --ts.rt_cb_depth == 0) {
      // Joins of a capture, interposed or not: the table is what the callbacks' own capture
      // checks read (CountRuntimeLaunch, FlagCaptured), whatever the interposers ask the
      // runtime (before, under LD_PRELOAD a kernel on a joined stream was counted as one to
      // wait for at exit, which never came: 100 ms more at every exit, and a false warning).
      // (An interposed call runs under the interposer's HookGuard; the agent's own threads'
      // calls, under a HookGuard outside any interposed call, are left out.)
      if (!HookGuard::Active() || ts.in_runtime != 0) NoteCaptureJoinFromCallback(cbid, cb);
      if (ts.rt_recording) CountRuntimeLaunch(cbid, cb);
      // Not through an interposer and not the agent's own call: record it here.
      if (ts.in_runtime == 0 && !HookGuard::Active()) NoteCaptureFromCallback(cbid, cb);
      if (ts.in_runtime == 0 && !HookGuard::Active() && RecordingMemory()) {
        uint64_t t1 = Now();
        HookGuard g;
        RecordRuntimeFromCallback(cbid, cb, ts.rt_t0, t1);
      }
      if (own && IsProfilerCall(domain, cbid, /*start=*/false)) SetCaptureRangeActive(false);
    }
    return;
  }
  if (IsProfilerCall(domain, cbid, true) || IsProfilerCall(domain, cbid, false)) {
    // A driver call of the application's own (a runtime call's was handled as that call).
    if (!enter && own && ts.rt_cb_depth == 0 && IsProfilerCall(domain, cbid, false)) {
      SetCaptureRangeActive(false);
    }
    return;
  }
  if (IsDriverCopyOrSync(cbid)) {
    // A call of the application's (a runtime call's own driver calls are recorded as that call).
    if (ts.rt_cb_depth != 0 || ts.in_runtime != 0 || HookGuard::Active()) return;
    if (enter) {
      ts.drv_t0 = Now();
    } else if (Recording()) {
      const uint64_t t1 = Now();
      HookGuard g;
      RecordDriverCopyOrSync(cbid, cb, ts.drv_t0, t1);
    }
    return;
  }
  if (IsDriverMemory(cbid)) {
    // A call of the application's (a runtime call's own driver calls are recorded as that call).
    if (ts.rt_cb_depth != 0 || ts.in_runtime != 0 || HookGuard::Active()) return;
    if (enter) {
      ts.drv_t0 = Now();
    } else if (RecordingMemory()) {
      const uint64_t t1 = Now();
      HookGuard g;
      RecordDriverMemory(cbid, cb, ts.drv_t0, t1);
    }
    return;
  }
  if (IsDriverGraphLaunch(cbid)) {
    // An application's driver graph launch (the runtime's cudaGraphLaunch makes one inside,
    // recorded as that call). Its kernels come with its correlation id.
    if (ts.rt_cb_depth != 0 || ts.in_runtime != 0 || HookGuard::Active()) return;
    if (enter) {
      ts.drv_t0 = Now();
      ts.drv_recording = Recording();
      Gate().Note(cb->correlationId, ts.drv_recording);
    } else if (ts.drv_recording && Recording()) {
      const uint64_t t1 = Now();
      HookGuard g;
      RecordDriverGraphLaunch(cbid, cb, ts.drv_t0, t1);
    }
    return;
  }
  // Driver-API launch (the other cbids enabled in this domain).
  if (enter) {
    ts.drv_t0 = Now();
    ts.drv_recording = Recording();
    if (ts.rt_cb_depth == 0) Gate().Note(cb->correlationId, ts.drv_recording);
    SetLastDriverLaunchCorrelation(cb->correlationId);
    NoteDriverLaunch(DriverLaunchStream(cbid, cb->functionParams), cb->correlationId);
    // Inside an interposed runtime call whose own cbid is not enabled (a runtime newer than
    // this agent's list): the driver launch it makes carries the call's correlation id, which
    // the kernel's activity record has too.
    if (ts.in_runtime != 0 && ts.rt_cb_depth == 0 && ts.api_corr == 0) {
      ts.api_corr = cb->correlationId;
    }
    return;
  }
  // A driver launch of its own (NCCL, a driver-API program): a launch to wait for at exit (one
  // inside a runtime call was counted with that call).
  if (ts.rt_cb_depth == 0 && ts.drv_recording && cb->functionReturnValue != nullptr &&
      *static_cast<const CUresult*>(cb->functionReturnValue) == CUDA_SUCCESS &&
      !Capturing(DriverLaunchStream(cbid, cb->functionParams), false)) {
    CountKernelLaunch();
  }
  if (ts.in_runtime == 0 && ts.rt_cb_depth == 0 && Recording()) {
    uint64_t t1 = Now();
    HookGuard g;
    RecordDriverLaunch(cbid, cb, ts.drv_t0, t1);
  }
}

// At exit, after the final flush: kernel records that stopped coming for good while the
// launches went on (over a second of launches, 100 of them or more, none with a record): what
// another CUPTI client in the process does when it takes the activity API (torch.profiler's
// Kineto registers its own buffer callbacks and calls cuptiFinalize; Nsight Systems or Compute
// injected too), which serves one client. Said, or the report's only clue is launches without
// device activity.
void NoteRecordsStopped() {
  if (!CuptiActive()) return;  // (a forked child: CUPTI is the parent's)
  const uint64_t launched = g_kernels_launched.load(), records = g_kernel_records.load();
  const uint64_t after = launched - std::min(launched, g_launched_at_last_record.load());
  const uint64_t last_launch = g_last_launch_tick.load(), last_record = g_last_record_tick.load();
  if (records >= launched || after < 100 || last_launch == 0) return;
  const uint64_t since_ns = last_record != 0 && last_launch > last_record
                                ? TicksToNs(last_launch) - TicksToNs(last_record)
                                : 0;
  if (last_record != 0 && since_ns < 1000000000ull) return;
  AddNote("warning",
          "CUPTI: no device record for the last " + std::to_string(after) + " of the " +
              std::to_string(launched) + " kernel launches its callbacks reported (" +
              (last_record != 0
                   ? "none in the last " + std::to_string(since_ns / 1000000) + " ms of launches"
                   : std::string("none at all")) +
              "): another CUPTI client in the process (torch.profiler, Nsight Systems or "
              "Compute) may have taken CUPTI's activity API, which serves one client");
}

// At exit: kernels launched without a synchronization after them may still be running. The
// final (forced) flush would deliver them without times, or not at all: give them up to
// `budget_ms` to finish, taking the buffers that are complete meanwhile (a default flush).
// Only the kernels of recorded calls (both counts): threads still serving go on launching,
// unrecorded once recording stopped, and waiting for the records to catch up with all of them
// spent the whole budget at every stop signal (100 ms, where a supervisor's grace before SIGKILL
// can be 5 ms). A recorded call still returning (counted on its way out) is waited for.
void WaitForInFlight(int budget_ms, bool launched_so_far = false) {
  const uint64_t deadline = MonotonicNs() + uint64_t(budget_ms) * 1000000ull;
  // `launched_so_far`: the kernels launched by now only (recording is still on: threads that
  // go on serving would keep the target moving for the whole budget).
  const uint64_t target = launched_so_far ? g_kernels_launched.load() : UINT64_MAX;
  auto pending = [target] {
    return g_kernel_records.load() <
           std::min(target, g_kernels_launched.load(std::memory_order_relaxed));
  };
  while (pending() && MonotonicNs() < deadline) {
    g_api.flush_all(0);
    if (!pending()) break;
    usleep(200);
  }
  if (pending()) {
    const uint64_t launched = g_kernels_launched.load(), records = g_kernel_records.load();
    Log(2, "CUPTI: %llu kernel record(s) still missing after waiting %d ms (%llu launched)",
        static_cast<unsigned long long>(launched > records ? launched - records : 0), budget_ms,
        static_cast<unsigned long long>(launched));
  }
}

void EarlyExitFlush() {
  if (!CuptiActive() || g_api.flush_all == nullptr) return;
  HookGuard guard;
  WaitForInFlight(100, /*launched_so_far=*/true);
  FlushCupti(/*forced=*/false);
}

template <typename T>
bool Sym(void* lib, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(lib, name));
  return *out != nullptr;
}

void* OpenCupti(const std::string& explicit_path, const void* cudart_symbol, std::string* tried) {
  auto attempt = [&](const std::string& p) -> void* {
    if (!tried->empty()) *tried += ", ";
    *tried += p;
    return dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  };
  if (!explicit_path.empty()) return attempt(explicit_path);
  // The copy the process loaded already (a framework's own, through its RPATH): a second copy
  // of CUPTI loaded from another path would be a second instance beside it.
  if (void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD)) {
    *tried = "libcupti.so.13 (already loaded)";
    return h;
  }
  Dl_info info;
  if (cudart_symbol && dladdr(cudart_symbol, &info) && info.dli_fname) {
    std::string dir(info.dli_fname);
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
    if (void* h = attempt(dir + "/../extras/CUPTI/lib64/libcupti.so.13")) return h;
    if (void* h = attempt(dir + "/libcupti.so.13")) return h;
  }
  return attempt("libcupti.so.13");
}

void TakeClockSample() {
  if (g_clock.identity() || !g_api.get_timestamp) return;
  uint64_t m0 = MonotonicNs();
  uint64_t dev = 0;
  if (g_api.get_timestamp(&dev) != CUPTI_SUCCESS) return;
  uint64_t m1 = MonotonicNs();
  g_clock.AddSample(dev, m0 + (m1 - m0) / 2);
  if (&RecordDeviceClockSync != nullptr) RecordDeviceClockSync(dev, m0 + (m1 - m0) / 2, m1 - m0);
}

// Signal flushes (SetSignalFlush): asked for by number, done when the flusher has flushed
// since. A fatal signal stops the flusher's periodic work only once its own flush is done.
std::atomic<uint64_t> g_urgent_asked{0}, g_urgent_done{0};
// Wakes the flusher for an urgent flush at once: at a stop signal the finish has a few ms before
// a SIGKILL (Open MPI's mpirun sends it 5 ms after SIGTERM), and a poll of the request every
// 5 ms spent most of them (the finish took 6 ms at the median, 8 ms at worst).
sem_t g_flusher_wake;
void AskUrgentFlush() {
  g_urgent_asked.fetch_add(1, std::memory_order_acq_rel);
  sem_post(&g_flusher_wake);
}
bool UrgentFlushDone() {
  return g_urgent_done.load(std::memory_order_acquire) >=
         g_urgent_asked.load(std::memory_order_acquire);
}

void FlusherLoop() {
  HookGuard guard;
  pthread_setname_np(pthread_self(), "profagent-cupti");  // (ps -L tells the agent's CPU apart)
  while (!g_flusher_stop.load(std::memory_order_relaxed)) {
    // A flush every 200 ms, or at once when an urgent one is asked for.
    timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 200000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_nsec -= 1000000000;
      ++until.tv_sec;
    }
    uint64_t asked = 0;
    for (;;) {
      asked = g_urgent_asked.load(std::memory_order_acquire);
      if (asked > g_urgent_done.load(std::memory_order_relaxed)) break;
      if (g_flusher_stop.load(std::memory_order_relaxed)) break;
      if (sem_clockwait(&g_flusher_wake, CLOCK_MONOTONIC, &until) != 0 && errno == ETIMEDOUT) {
        break;
      }
    }
    if (g_flusher_stop.load()) break;
    // A fatal signal's flush: kernels launched just before it may still be running; as at
    // exit, they get up to 100 ms to finish, so that their records come with times.
    const bool urgent = asked > g_urgent_done.load(std::memory_order_relaxed);
    if (urgent) WaitForInFlight(100);
    FlushCupti(/*forced=*/urgent);
    if (asked > g_urgent_done.load(std::memory_order_relaxed)) {
      g_urgent_done.store(asked, std::memory_order_release);
    }
  }
}

void AfterForkChild() {
  // The child has no flusher thread and must not reuse the parent's CUPTI session. A parent
  // thread (CUPTI's buffer thread, the flusher) may have held the lock at the fork: the child's
  // copy would stay locked forever, and its exit path takes it.
  internal::g_active.store(false, std::memory_order_relaxed);
  SetSignalFlush(nullptr, nullptr);  // no flusher thread here
  // The parent's launches and records are not the child's (its exit would otherwise wait for
  // them, and take their missing records for another CUPTI client's doing).
  g_kernels_launched.store(0);
  g_kernel_records.store(0);
  g_last_record_tick.store(0);
  g_launched_at_last_record.store(0);
  g_last_launch_tick.store(0);
  new (&Mu()) std::mutex();
}

bool StartLocked(const std::string& explicit_path, const void* cudart_symbol,
                 std::string* reason) {
  std::string tried;
  void* lib = OpenCupti(explicit_path, cudart_symbol, &tried);
  if (!lib) {
    *reason = "CUPTI: cannot load libcupti (tried " + tried + ")";
    return false;
  }
  CuptiApi a;
  Sym(lib, "cuptiSubscribe_v2", &a.subscribe_v2);
  Sym(lib, "cuptiActivityRegisterTimestampCallback", &a.register_timestamp);
  Sym(lib, "cuptiGetResultString", &a.result_string);
  Sym(lib, "cuptiGetTimestamp", &a.get_timestamp);
  Sym(lib, "cuptiActivityGetNumDroppedRecords", &a.num_dropped);
  Sym(lib, "cuptiGetDeviceId", &a.get_device_id);
  Sym(lib, "cuptiGetGraphNodeId", &a.get_graph_node_id);
  Sym(lib, "cuptiGetStreamIdEx", &a.get_stream_id_ex);
  Sym(lib, "cuptiActivityDisable", &a.activity_disable);
  Sym(lib, "cuptiGetVersion", &a.get_version);
  bool ok = Sym(lib, "cuptiSubscribe", &a.subscribe) &&
            Sym(lib, "cuptiUnsubscribe", &a.unsubscribe) &&
            Sym(lib, "cuptiEnableCallback", &a.enable_callback) &&
            Sym(lib, "cuptiActivityEnable", &a.activity_enable) &&
            Sym(lib, "cuptiActivityRegisterCallbacks", &a.register_callbacks) &&
            Sym(lib, "cuptiActivityGetNextRecord", &a.next_record) &&
            Sym(lib, "cuptiActivityFlushAll", &a.flush_all);
  if (!ok) {
    *reason = "CUPTI: " + tried + " lacks required functions";
    return false;
  }
  g_api = a;
  CUptiResult r;
  std::string how;
  if (a.subscribe_v2) {
    char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {0};
    CUpti_SubscriberParams params;
    std::memset(&params, 0, sizeof(params));
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "profagent";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof(old_name);
    r = a.subscribe_v2(&g_subscriber, ApiCallback, nullptr, &params);
    if (r != CUPTI_SUCCESS) {
      *reason = Failure("cuptiSubscribe_v2", r);
      if (old_name[0]) *reason += std::string(": held by ") + old_name;
      return false;
    }
    if (g_subscriber == nullptr) {
      // A CUPTI that reports success without a handle cannot be configured (and cannot be
      // unsubscribed either): give up on it.
      *reason = "CUPTI: cuptiSubscribe_v2 returned CUPTI_SUCCESS but no subscriber handle";
      return false;
    }
    how = "cuptiSubscribe_v2";
  } else {
    r = a.subscribe(&g_subscriber, ApiCallback, nullptr);
    if (r != CUPTI_SUCCESS) {
      *reason = Failure("cuptiSubscribe", r);
      return false;
    }
    how = "cuptiSubscribe";
  }
  auto fail = [&](const char* call, CUptiResult res) {
    *reason = Failure(call, res);
    // The kinds already enabled would go on producing records beside the fallback's timing.
    if (a.activity_disable != nullptr) {
      for (CUpti_ActivityKind k :
           {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL,
            CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY2}) {
        a.activity_disable(k);
      }
    }
    a.unsubscribe(g_subscriber);
    g_subscriber = nullptr;
    return false;
  };
  if (a.register_timestamp && a.register_timestamp(TimestampCallback) == CUPTI_SUCCESS) {
    g_clock.SetIdentity();
    how += ", host-clock timestamps";
  } else {
    how += ", timestamps mapped by linear fit";
  }
  r = a.register_callbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks", r);
  r = a.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    // KERNEL records serialize every kernel on the GPU (cupti_activity.h): said, as it
    // changes what the profile measures.
    const CUptiResult concurrent = r;
    r = a.activity_enable(CUPTI_ACTIVITY_KIND_KERNEL);
    if (r == CUPTI_SUCCESS) {
      how += ", KERNEL records: CONCURRENT_KERNEL refused (" + ResultName(concurrent) +
             "), kernels run serialized";
    }
  }
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(KERNEL)", r);
  r = a.activity_enable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(MEMCPY)", r);
  r = a.activity_enable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (r != CUPTI_SUCCESS) return fail("cuptiActivityEnable(MEMSET)", r);
  a.activity_enable(CUPTI_ACTIVITY_KIND_MEMCPY2);  // peer copies: optional

  static const CUpti_CallbackId kRuntime[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
  };
  // Optional too: allocations, frees and synchronizations. The interposers record them; these
  // callbacks record them only when no interposer saw the call (a static runtime).
  static const CUpti_CallbackId kRuntimeOptional[] = {
      kCbidLaunchKernel13,
      kCbidLaunchKernel13Ptsz,
      // The capture range (PROFAGENT_CAPTURE=cudaProfilerApi) from calls no interposer sees.
      CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
      // Event records: the fork of a multi-stream capture (capture.h), and calls as recorded.
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
      kCbidBeginCaptureToGraph,
      kCbidBeginCaptureToGraphPtsz,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000,
      // Graph making and upkeep: host time between launches (a llama.cpp-style loop updates
      // its exec every token) and what ties captured NCCL calls to the exec that runs them.
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphCreate_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphClone_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000,
      // CUDA arrays: allocations, frees and copies.
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000,
      CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFreeMipmappedArray_v5000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000,
      // Batch copies (CUDA 12.8 and 13 forms).
      kCbidMemcpyBatch128,
      kCbidMemcpyBatch128Ptsz,
      kCbidMemcpy3DBatch128,
      kCbidMemcpy3DBatch128Ptsz,
      kCbidMemcpyBatch13,
      kCbidMemcpyBatch13Ptsz,
      kCbidMemcpy3DBatch13,
      kCbidMemcpy3DBatch13Ptsz,
  };
  for (CUpti_CallbackId id : kRuntime) {
    r = a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
    if (r != CUPTI_SUCCESS) return fail("cuptiEnableCallback(runtime)", r);
  }
  // Entry points newer than CUDA 12 (a CUPTI that does not know them says so; the driver-launch
  // fallback in ApiCallback then supplies the correlation ids of those launches).
  for (CUpti_CallbackId id : kRuntimeOptional) {
    a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  }
  static const CUpti_CallbackId kDriver[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
  };
  for (CUpti_CallbackId id : kDriver) {
    r = a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    if (r != CUPTI_SUCCESS) return fail("cuptiEnableCallback(driver)", r);
  }
  // Driver graph launches: optional, as the memory calls below.
  a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
  a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
  // Driver-API memory (RecordDriverMemory): a CUPTI that does not know a call loses it alone.
  static const CUpti_CallbackId kDriverMemory[] = {
      CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
      CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
      CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
  };
  for (CUpti_CallbackId id : kDriverMemory) {
    a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  }
  // Driver copies, sets and syncs (RecordDriverCopyOrSync): a CUPTI that does not know one
  // loses it alone.
#define PROFAGENT_ENABLE_DRIVER(n) \
  a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##n);
  PROFAGENT_DRIVER_COPIES(PROFAGENT_ENABLE_DRIVER)
  PROFAGENT_DRIVER_SYNCS(PROFAGENT_ENABLE_DRIVER)
#undef PROFAGENT_ENABLE_DRIVER
  // The driver's capture range calls (numba's cuda.profile_start(), cuda-python).
  for (CUpti_CallbackId id :
       {CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop}) {
    a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  }
  // Graph nodes (EV_GRAPH_NODE): without them, a kernel a graph runs is known by its launch
  // only, not by the call that captured it. A CUPTI that refuses loses that alone.
  if (a.get_graph_node_id != nullptr &&
      (a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                         CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) != CUPTI_SUCCESS ||
       a.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                         CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) != CUPTI_SUCCESS)) {
    g_api.get_graph_node_id = nullptr;
  }
  TakeClockSample();
  *reason = "CUPTI activity records (" + how + ")";
  return true;
}

}  // namespace

bool StartCupti(const std::string& explicit_path, const void* cudart_symbol,
                std::string* reason) {
  HookGuard guard;
  std::lock_guard<std::mutex> lock(Mu());
  if (!g_started) {
    g_started = true;
    g_start_ok = StartLocked(explicit_path, cudart_symbol, &StartReason());
    if (g_start_ok) {
      internal::g_active.store(true, std::memory_order_release);
      pthread_atfork(nullptr, nullptr, AfterForkChild);
      AtShutdown([] {
        g_flusher_stop.store(true);
        if (CuptiActive() && g_api.flush_all) {
          HookGuard guard;
          WaitForInFlight(100);
        }
        FlushCupti(/*forced=*/true);
        std::lock_guard<std::mutex> lock(Mu());
        if (g_skipped > 0) {
          Log(2, "CUPTI: %llu device records of calls made while not recording left out",
              static_cast<unsigned long long>(g_skipped));
        }
        NoteRecordsStopped();
        if (g_untimed_records > 0 || g_cut_buffers > 0) {
          AddNote("warning",
                  "CUPTI: " + std::to_string(g_untimed_records) +
                      " device records came without times (work still running at the final "
                      "flush: exit or a stop signal; a forced flush by another CUPTI client; or "
                      "no device memory to time it) and " +
                      std::to_string(g_cut_buffers) +
                      " buffers ended at a record CUPTI called incomplete; their launches "
                      "have no device time");
        }
      });
      sem_init(&g_flusher_wake, 0, 0);
      if (!StartDetachedThread(FlusherLoop)) {
        Log(1,
            "CUPTI: cannot start the flusher thread (thread limit?): device records arrive "
            "when CUPTI's buffers fill and at exit");
      } else {
        SetSignalFlush(AskUrgentFlush, UrgentFlushDone);
      }
    }
  }
  *reason = StartReason();
  return g_start_ok;
}

void NoteCaptureCall(uint64_t stream, bool begin, int result) {
  const cudaError_t r = static_cast<cudaError_t>(result);
  if (begin) {
    if (r == cudaSuccess) NoteCaptureBegin(stream);
    return;
  }
  NoteCaptureEnd(stream, r != cudaErrorStreamCaptureWrongThread && r != cudaErrorIllegalState &&
                             r != cudaErrorInvalidValue && r != cudaErrorInvalidResourceHandle);
}

bool StreamId(uint64_t handle, uint32_t* id) {
  if (!CuptiActive() || g_api.get_stream_id_ex == nullptr) return false;
  const bool special = handle == kLegacyStreamHandle || handle == kPerThreadStreamHandle;
  CUstream s = special ? nullptr : reinterpret_cast<CUstream>(handle);
  return g_api.get_stream_id_ex(nullptr, s, handle == kPerThreadStreamHandle ? 1 : 0, id) ==
         CUPTI_SUCCESS;
}

void FlushCupti(bool forced) {
  if (!CuptiActive() || !g_api.flush_all) return;
  HookGuard guard;
  // A forced flush hands back the records of work still queued or running incomplete (no
  // times), and CUPTI never delivers them again: only at the end (exit, a signal), after
  // WaitForInFlight. The periodic one takes the buffers whose records are all complete.
  g_api.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  std::lock_guard<std::mutex> lock(Mu());
  TakeClockSample();
}

void SetInjectionStarter(InjectionStarter fn) { g_injection_starter = fn; }

void SetLaunchStackCapture(LaunchStackFn fn) {
  g_launch_stack.store(fn, std::memory_order_relaxed);
}
InjectionStarter GetInjectionStarter() { return g_injection_starter; }

}  // namespace cupti
}  // namespace profagent
