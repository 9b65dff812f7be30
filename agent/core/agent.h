// The agent's core API: what hooks (agent/hooks/*) call.
//
// Two kinds of functions live here:
//  * Hot path (may run inside any intercepted call, on any thread): Now(), Emit(),
//    EmitWithBytes(), HookGuard. No lock, no allocation, no syscall, no logging (except the
//    first call on a new thread, which registers its ring out of line).
//  * Slow path (registration, once per name/communicator/thread): InternString(), RegisterApi(),
//    RegisterFunctionName(), SetRankInfo(), ... These take a mutex and may allocate. Never call
//    them per launch.
//
// Nothing here throws. If the agent is disabled (bad config, unwritable output, PROFAGENT_ENABLE=0)
// every function is a cheap no-op and hooks only forward to the real implementation.
#ifndef PROFAGENT_AGENT_CORE_AGENT_H_
#define PROFAGENT_AGENT_CORE_AGENT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <atomic>

#include "agent/core/clock.h"
#include "agent/core/event.h"
#include "agent/core/ring.h"

namespace profagent {

// Hot-path state, defined in agent/core (or by a test double of the core). Hooks use the inline
// functions below, not these.
namespace internal {
// Bit kRecEnabled: the agent initialized and was not disabled; bit kRecActive: the schedule is
// active; bit kRecRange: inside the capture range (PROFAGENT_CAPTURE=cudaProfilerApi: between
// cudaProfilerStart and cudaProfilerStop; always set otherwise). Recording = all three set.
enum : uint8_t { kRecEnabled = 1, kRecActive = 2, kRecRange = 4, kRecAll = 7 };
extern std::atomic<uint8_t> g_recording;
// The calling thread's ring; nullptr until its first Emit (EmitSlow registers the thread).
extern __thread Ring* t_ring __attribute__((tls_model("initial-exec")));
// This thread's block of agent correlation ids [t_corr_next, t_corr_end).
extern __thread uint32_t t_corr_next __attribute__((tls_model("initial-exec")));
extern __thread uint32_t t_corr_end __attribute__((tls_model("initial-exec")));
bool EmitSlow(const RawEvent& e);
uint32_t NextCorrelationIdSlow();
}  // namespace internal

// ---- State -------------------------------------------------------------------------------
// True once the agent initialized successfully and recording is on (also false while the
// schedule says "not active", see config.h). One relaxed load.
inline bool Recording() {
  return internal::g_recording.load(std::memory_order_relaxed) == internal::kRecAll;
}

namespace internal {
extern std::atomic<uint64_t> g_paused_at;  // Now() when the schedule or capture range last paused
// The file is being finished (exit, exec or a signal began it): calls are no longer recorded.
extern std::atomic<bool> g_finishing;
extern std::atomic<uint64_t> g_unrecorded_calls;
}  // namespace internal

// A hook forwards a call without recording it (Recording() false). While the file is being
// finished the call is lost work, counted for the footer (Footer.unrecorded_calls): threads
// still working while the process exits. Cold path: one relaxed load otherwise.
inline void NoteUnrecordedCall() {
  if (__builtin_expect(internal::g_finishing.load(std::memory_order_relaxed), 0)) {
    internal::g_unrecorded_calls.fetch_add(1, std::memory_order_relaxed);
  }
}

// True when recording is on now or was on at some time since `t0` (Now() ticks): a range that
// began while paused and ended after recording resumed, or began while recording and ended
// after a pause, overlaps what was recorded and is recorded whole.
inline bool RecordingSince(uint64_t t0) {
  return Recording() || internal::g_paused_at.load(std::memory_order_relaxed) > t0;
}

// True once the agent initialized successfully, whatever the schedule and the capture range:
// allocations and frees are recorded outside them too, so that the memory counter and the
// peak stay right and a free finds its allocation's size.
inline bool RecordingMemory() {
  return (internal::g_recording.load(std::memory_order_relaxed) & internal::kRecEnabled) != 0;
}

// Re-entrancy guard: the agent's own CUDA/MPI calls (and calls a hooked function makes into
// another hooked function) must not record themselves. Usage in a hook:
//   HookGuard g; if (!g.outermost()) return real(args...);
class HookGuard {
 public:
  HookGuard() : outermost_(depth_++ == 0) {}
  ~HookGuard() { --depth_; }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;
  bool outermost() const { return outermost_; }
  static bool Active() { return depth_ > 0; }

 private:
  static thread_local int depth_ __attribute__((tls_model("initial-exec")));
  bool outermost_;
};

// ---- Hot path ----------------------------------------------------------------------------
// Copies `e` into the calling thread's ring. Returns false when the event was dropped (ring
// full under policy "drop", or agent disabled); the drop is counted and reported in the file.
inline bool Emit(const RawEvent& e) {
  Ring* r = internal::t_ring;
  if (__builtin_expect(r != nullptr, 1) && __builtin_expect(r->TryPush(e), 1)) return true;
  return internal::EmitSlow(e);  // first event of the thread, ring full, or agent off
}

// As Emit, but when the ring is full it waits for the writer instead of dropping (while the
// writer runs). For threads that are not the application's and whose records come in bursts,
// such as CUPTI's buffer-completion thread (thousands of device records per buffer).
bool EmitWait(const RawEvent& e);
// EmitWait with `n` bytes of `data` in continuation slots (e.extra is set here), as EmitWithBytes.
bool EmitWaitWithBytes(const RawEvent& e, const void* data, size_t n);

// Records lost before they reached the agent (CUPTI's count of activity records it dropped for
// lack of buffer space). Written as a Drops record (thread 0) and counted in the footer's total,
// so the report says how many are missing. Thread-safe; not for the application's hot path.
void CountUpstreamDrops(uint64_t n);

// Emit without a copy, for the hottest hooks: fill the slot EmitReserve() returns, then call
// EmitCommit(). nullptr (first event of a thread, ring full, agent off): fill a local RawEvent
// and Emit() it instead, which handles all of those.
inline RawEvent* EmitReserve() {
  Ring* r = internal::t_ring;
  return __builtin_expect(r != nullptr, 1) ? r->TryReserve() : nullptr;
}
inline void EmitCommit() { internal::t_ring->Commit(); }

// As Emit, followed by `n` bytes of `data` in continuation slots (e.extra is set here). Used for
// NVTX messages and stack frames. `n` is capped at kMaxExtraBytes (the rest is cut).
bool EmitWithBytes(const RawEvent& e, const void* data, size_t n);
constexpr size_t kMaxExtraBytes = 16384;

// The correlation id of the last kernel launch the CUPTI driver-API callback saw on this thread
// (e.g. the cuLaunchKernelEx inside ncclAllReduce), 0 if none. Written by the CUPTI hook with
// SetLastDriverLaunchCorrelation, read by the NCCL hook right after the real call returns.
uint32_t LastDriverLaunchCorrelation();
void SetLastDriverLaunchCorrelation(uint32_t corr);

// The driver launches (cuLaunchKernel*) the CUPTI hook saw on this thread since the last
// SetLastDriverLaunchCorrelation(0), with their streams (the last 16 are kept): an NCCL group
// over several streams launches one kernel per stream inside ncclGroupEnd, and each member call
// is matched to its stream's. DriverLaunchOnStream returns 0 when none was seen on `stream`.
// Thread-local, no lock: usable in hooks.
void NoteDriverLaunch(uint64_t stream, uint32_t corr);
uint32_t DriverLaunchOnStream(uint64_t stream);

// Next agent-assigned correlation id of this thread (used when no CUPTI id is available). Never 0.
inline uint32_t NextCorrelationId() {
  if (__builtin_expect(internal::t_corr_next != internal::t_corr_end, 1)) {
    return internal::t_corr_next++;
  }
  return internal::NextCorrelationIdSlow();
}

// ---- Slow path ---------------------------------------------------------------------------
// Returns a stable non-zero id for `s`; the writer emits a StringDef for each new id before
// any record that uses it. Thread-safe; locks and may allocate.
uint32_t InternString(const std::string& s);

// As InternString, for text that is mostly unique and unbounded in number (NVTX messages: a
// step's `kv=` list differs every step): the agent keeps it only until the writer has put it
// in the file, and remembers a bounded number of recent ones (a message repeated within them
// keeps its id; one repeated later gets a new id whose string has the same text).
uint32_t InternMessage(const char* text, size_t len);

// Interns a kernel name as every record shows it: demangled when `name` is a mangled C++ name
// (CUPTI records and registrations carry mangled names), else as is. Returns 0 for "".
// Thread-safe; locks and may allocate: slow path only.
uint32_t InternKernelName(const std::string& name);

// Demangles a C++ symbol name; returns `name` unchanged when it is not one. Slow path.
std::string Demangle(const std::string& name);

// Registers an API name ("cudaMemcpyAsync") and returns its small id (RawEvent.api). Call at
// load time (static initializers) or under a once-guard. Thread-safe.
uint16_t RegisterApi(const char* name);

// The calling thread's small index (EventBatch.thread), 0 while it has recorded nothing.
uint32_t CurrentThreadIndex();
// Registers the calling thread (its ring; the writer thread and the agent's signal handlers
// start with the process's first) unless the agent is disabled or closing; its index, or 0.
uint32_t RegisterCurrentThread();
const char* ApiName(uint16_t id);

// Remembers the (mangled) device-function name of a host stub; the writer demangles it and
// resolves kLaunch events' `func` through this table. Thread-safe.
void RegisterFunctionName(const void* func, const char* mangled_name);
// Resolver used when `func` was never registered (e.g. cudaFuncGetName through the runtime).
// Called on the writer thread only. Returns nullptr when unknown.
using FuncNameResolver = const char* (*)(const void* func);
void SetFuncNameResolver(FuncNameResolver r);

// Rank facts. `source` e.g. "MPI", "NCCL", "env:OMPI_COMM_WORLD_RANK". Higher `priority`
// wins (env 1, NCCL 2, MPI 3). May rename the output file (pid<P>.pb -> rank<R>.pb).
void SetRankInfo(int rank, int local_rank, int world_size, const char* source, int priority);

// GPU timing mode in force and why; written to the header (or a ProcessInfo) and logged once.
// `mode` is a profagent.GpuTimingMode value.
void SetGpuTiming(int mode, const std::string& reason);

// A communicator became known. `id` must be unique in the process (e.g. the handle value).
void RegisterComm(uint64_t id, int lib, uint64_t handle, int rank, int size,
                  const std::string& unique_id, int device, uint64_t parent);

// A measured offset of this process's CLOCK_MONOTONIC to rank 0's (rank0 = local + offset).
void RecordClockOffset(int64_t offset_ns, uint64_t error_ns, const char* method, uint32_t rounds);

// Device description (name, memory, SMs) for the header's DeviceInfo records.
void RecordDeviceInfo(uint32_t device, const std::string& name, uint64_t total_mem,
                      uint32_t sm_count, const std::string& uuid);

// A note for the file and, at level "warning"/"error", one line on stderr ("profagent: ...").
void AddNote(const char* level, const std::string& text);

// The application named OS thread `tid` (nvtxNameOsThread): its ThreadInfo carries this name
// (written again if the thread was already announced) instead of its pthread name.
void NameOsThread(uint32_t tid, const std::string& name);

// Streams the application named (nvtxNameCudaStream*, nvtxNameCuStream*). The CUDA hooks say
// where a stream's device ops are: its device and how they name it (DeviceOp.stream).
enum class StreamPlace {
  kUnknown,    // the stream cannot be placed: its name is dropped
  kDeviceId,   // `device_stream` is the id its device ops carry (CUPTI's stream id)
  kFileIndex,  // its device ops carry the file's stream index of the handle (CUDA events)
};
using StreamLocator = StreamPlace (*)(uint64_t handle, uint32_t* device, uint32_t* device_stream);
void SetStreamLocator(StreamLocator locate);
// A StreamInfo record: `handle` (cudaStreamPerThread: the calling thread's) is called `name`;
// a later name for the same stream replaces it. Slow path (locks, may allocate).
void NameStream(uint64_t handle, const std::string& name);

// The real path of the loaded agent library (libprofagent.so), "" when the agent is linked
// into the executable itself (tests) or the path cannot be found. For the injection variables
// the agent points at itself (NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH). Slow path.
std::string AgentLibraryPath();

// Writes one line "profagent: <text>" to stderr if the log level allows (0 quiet, 1 warn,
// 2 info, 3 debug). Slow path only.
void Log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Name tables for CollPayload.dtype / CollPayload.redop of library `lib` (profagent.CollLibrary).
// The arrays must outlive the process (static tables). Collective.op is derived from the API
// name (RawEvent.api) with its "nccl"/"MPI_" prefix removed. Slow path.
void RegisterCollTables(int lib, const char* const* dtypes, int ndtypes,
                        const char* const* redops, int nredops);

// The profiling schedule (config.h, PROFAGENT_SCHEDULE) is applied by agent/model, which calls
// this at step boundaries; while inactive, Recording() is false and hooks only forward.
void SetScheduleActive(bool active);

// The capture range (PROFAGENT_CAPTURE=cudaProfilerApi): the cudaProfilerStart/Stop hooks call
// this; while outside, Recording() is false (allocations and frees are still recorded). A no-op
// when the range is not configured.
void SetCaptureRangeActive(bool inside);
// Whether the capture range was open from `t0` (a Now() time) until now: all that time (`whole`)
// or some of it. True when no capture range is configured. Steps are recorded only when inside
// it from start to end, runs when they overlap it.
bool InCaptureRange(uint64_t t0, bool whole);

// Asks the writer to drain every ring and write, and waits up to `timeout_ms`. Slow path.
void Flush(int timeout_ms);

// Registers a function run at shutdown before the final drain (e.g. CUPTI flush), in
// registration order. Slow path.
void AtShutdown(void (*fn)());
// A fatal signal's end of the file runs no shutdown hook (they may wait on locks the interrupted
// thread holds); a timing module that holds device records (CUPTI's buffers) can still have them
// delivered from a thread of its own: `request` asks for that without blocking, `done` says
// whether it has happened. The writer waits a bounded time for it, draining meanwhile.
void SetSignalFlush(void (*request)(), bool (*done)());
// Also at a fatal signal, on the writer thread after that flush and before the last drain:
// `flush` writes what is still open (NVTX ranges: a server's run, so the report knows its label).
// It must not wait on a lock an interrupted thread may hold (try_lock, or skip).
void SetSignalRangeFlush(void (*flush)());
// Libraries that install crash handlers only over the default disposition (Open MPI's stack
// trace handler in MPI_Init) would see the agent's instead and skip theirs: around such an
// initialization the agent's handlers step aside, then come back over what is still default.
void YieldSignalHandlers();
void RetakeSignalHandlers();
// Finishes the file now, as at exit (the shutdown hooks, the last drain, the footer with
// `reason`, which must outlive the process): before a call that ends the process without
// returning through exit (MPI_Abort). Later calls of the process are not recorded.
void FinishProfileNow(const char* reason);

// Starts `fn` on a detached thread; false when the system refuses a thread (RLIMIT_NPROC, a
// cgroup's pids.max): the caller degrades, never throws into the application.
bool StartDetachedThread(void (*fn)());

// Registers a function run on a recording thread as it exits, before its ring is released, so
// that what the thread still holds (e.g. a run of polls) is emitted as its own events. Runs only
// on threads that emitted at least one event. At most 8 functions; false when full. Slow path.
bool AtThreadExit(void (*fn)());

// [Added by the CUDA-runtime/CUPTI owner; to be implemented by the core.] A paired reading of
// CUPTI's timestamp clock and host CLOCK_MONOTONIC (both ns), written as a ClockSync record
// (device_ns, monotonic_ns, uncertainty_ns). Used when CUPTI cannot timestamp with the agent's
// clock (no cuptiActivityRegisterTimestampCallback); the hooks then map device times themselves
// and record the samples so the mapping can be checked. Slow path. The CUPTI hook calls it
// through a weak reference, so linking works before the core implements it.
void RecordDeviceClockSync(uint64_t device_ns, uint64_t monotonic_ns, uint64_t uncertainty_ns);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_AGENT_H_
