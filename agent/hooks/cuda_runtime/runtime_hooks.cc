// Interposers for the CUDA runtime API (libcudart.so.13). Each one forwards to the real
// function with the same arguments and returns its result unchanged; around the call it reads
// the clock, and (when recording) fills a RawEvent and emits it. See ../../core/agent.h for the
// hot-path rules these follow: no lock, no allocation, no logging, HookGuard against re-entry.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <libunwind.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/core/agent.h"
#include "agent/core/capture.h"
#include "agent/core/clock.h"
#include "agent/core/event.h"
#include "agent/hooks/cuda_runtime/alloc_table.h"
#include "agent/hooks/cuda_runtime/event_timer.h"
#include "agent/hooks/cuda_runtime/gpu_timing.h"
#include "agent/hooks/cuda_runtime/own_calls.h"
#include "agent/hooks/cuda_runtime/real.h"
#include "agent/hooks/cupti/cupti_tracer.h"
#include "agent/hooks/cupti/mem_sizes.h"
#include "agent/model/steps.h"

// Internal entry points of libcudart that nvcc-generated code calls (crt/host_runtime.h,
// crt/device_functions.h); declared here so that this file needs only cuda_runtime_api.h.
extern "C" {
void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                            const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                            dim3* bDim, dim3* gDim, int* wSize);
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                    void** args, size_t sharedMem, cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                  size_t sharedMem, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                     void** args);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim,
                                             void** args, size_t sharedMem, cudaStream_t stream);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                 cudaStream_t stream);
cudaError_t cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t stream);
}
// The other per-thread-default-stream entry points (what `nvcc --default-stream per-thread`
// calls): the header declares them only under CUDA_API_PER_THREAD_DEFAULT_STREAM; each has the
// signature of its plain twin.
#define PROFAGENT_DECLARE_PT(fn, suffix) extern "C" decltype(fn) fn##suffix;
PROFAGENT_DECLARE_PT(cudaMemcpy, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy2D, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpyToSymbol, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpyFromSymbol, _ptds)
PROFAGENT_DECLARE_PT(cudaMemset, _ptds)
PROFAGENT_DECLARE_PT(cudaMemset2D, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy3D, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy3DPeer, _ptds)
PROFAGENT_DECLARE_PT(cudaMemset3D, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy3DAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpy3DPeerAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemset3DAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpy2DAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpyToSymbolAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpyFromSymbolAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemset2DAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMallocAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaFreeAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMallocFromPoolAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamSynchronize, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamWaitEvent, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamQuery, _ptsz)
PROFAGENT_DECLARE_PT(cudaEventRecord, _ptsz)
PROFAGENT_DECLARE_PT(cudaEventRecordWithFlags, _ptsz)
PROFAGENT_DECLARE_PT(cudaLaunchHostFunc, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamAddCallback, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamBeginCapture, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamEndCapture, _ptsz)
PROFAGENT_DECLARE_PT(cudaStreamBeginCaptureToGraph, _ptsz)
PROFAGENT_DECLARE_PT(cudaGraphUpload, _ptsz)
PROFAGENT_DECLARE_PT(cudaGraphInstantiateWithParams, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemPrefetchAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpy2DToArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy2DFromArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy2DArrayToArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpy2DToArrayAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpy2DFromArrayAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpy3DBatchAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpyBatchAsync, _ptsz)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the 1D array copies
PROFAGENT_DECLARE_PT(cudaMemcpyToArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpyFromArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpyArrayToArray, _ptds)
PROFAGENT_DECLARE_PT(cudaMemcpyToArrayAsync, _ptsz)
PROFAGENT_DECLARE_PT(cudaMemcpyFromArrayAsync, _ptsz)
#pragma GCC diagnostic pop
#undef PROFAGENT_DECLARE_PT

namespace profagent {
namespace rt {

namespace {
struct FindArgs {
  const char* name;
  const void* self_base;
  bool cudart_only;
  void* found;
};

int FindInObject(struct dl_phdr_info* info, size_t, void* data) {
  auto* a = static_cast<FindArgs*>(data);
  const char* path = info->dlpi_name;
  if (!path || !*path) return 0;
  if (a->cudart_only && !strstr(path, "libcudart")) return 0;
  void* h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  void* p = dlsym(h, a->name);
  dlclose(h);
  Dl_info where;
  if (p && dladdr(p, &where) && where.dli_fbase != a->self_base) {
    a->found = p;
    return 1;
  }
  return 0;
}
}  // namespace

void* ResolveReal(const char* name) {
  Dl_info mine, theirs;
  const void* self = dladdr(reinterpret_cast<void*>(&ResolveReal), &mine) ? mine.dli_fbase : nullptr;
  void* p = dlsym(RTLD_NEXT, name);
  if (p) return p;
  // The agent may sit after libcudart in the search order (e.g. dlopen'ed by the driver for
  // CUDA_INJECTION64_PATH): take the global definition unless it is our own.
  void* g = dlsym(RTLD_DEFAULT, name);
  if (g && dladdr(g, &theirs) && theirs.dli_fbase != self) return g;
  // libcudart loaded privately (dlopen RTLD_LOCAL of a library that needs it, as Python
  // extension modules are): not in the global scope. Look through every loaded object,
  // libcudart first.
  FindArgs args{name, self, true, nullptr};
  dl_iterate_phdr(FindInObject, &args);
  if (!args.found) {
    args.cudart_only = false;
    dl_iterate_phdr(FindInObject, &args);
  }
  return args.found;
}

namespace {

thread_local int t_device __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint32_t t_stack_count __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint32_t t_launch_end_gap __attribute__((tls_model("initial-exec"))) = 0;

AllocTable g_allocs;

// profagent.DeviceOpKind / MemKind values.
enum : uint8_t { kDopKernel = 0, kDopMemcpy = 1, kDopMemset = 2, kDopOther = 3 };
enum : uint32_t { kMemDevice = 0, kMemPinned = 1, kMemManaged = 2, kMemAsync = 3 };

constexpr cudaError_t kNoReal = cudaErrorSharedObjectSymbolNotFound;

inline uint64_t U64(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Marks the calling thread as inside an interposed runtime call, so that CUPTI's runtime
// callbacks for the same call (enabled to see calls no interposer sees: a static runtime) leave
// it to this hook. DoLaunch and DoMem also read the call's correlation id; the others only mark.
struct InRuntime {
  InRuntime() { ++cupti::t_state.in_runtime; }
  ~InRuntime() { --cupti::t_state.in_runtime; }
  InRuntime(const InRuntime&) = delete;
  InRuntime& operator=(const InRuntime&) = delete;
};

// The stream a _ptsz/_ptds entry point works on: its 0 is the calling thread's per-thread
// default stream, not the legacy one (CUDA-event timing must record on the same stream).
inline cudaStream_t Pt(cudaStream_t s) { return s == nullptr ? cudaStreamPerThread : s; }

// ---- Host stacks (PROFAGENT_STACKS=N) -------------------------------------------------------
// Emits the caller's stack (a kStack event, before the launch event it belongs to) when this
// launch is sampled. Out of line: the frame buffer stays off the launch hook's stack frame.
// The agent's own frames (this function, the hook) are left out: the stack starts at the
// application's call, and PROFAGENT_STACK_DEPTH counts its frames only.
struct CodeRange {
  uintptr_t lo = 0, hi = 0;
};

int FindOwnRange(struct dl_phdr_info* info, size_t, void* data) {
  auto* r = static_cast<CodeRange*>(data);
  const uintptr_t self = reinterpret_cast<uintptr_t>(&FindOwnRange);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (self < lo || self >= hi) return 0;
  r->lo = lo;
  r->hi = hi;
  return 1;
}

const CodeRange& OwnCode() {
  static const CodeRange range = [] {
    CodeRange r;
    dl_iterate_phdr(FindOwnRange, &r);
    return r;
  }();
  return range;
}

constexpr int kMaxStackFrames = 128;  // PROFAGENT_STACK_DEPTH's maximum
constexpr int kOwnFramesMax = 4;      // frames of the agent above the application's call
constexpr int kCallbackFramesMax = 48;  // CUPTI's and the runtime's frames above the call

bool InOwnCode(void* ip) {
  const CodeRange& own = OwnCode();
  return reinterpret_cast<uintptr_t>(ip) >= own.lo && reinterpret_cast<uintptr_t>(ip) < own.hi;
}

// True for a frame of CUPTI, the CUDA runtime or the driver (a shared library of theirs).
bool InCudaLibrary(void* ip) {
  Dl_info info;
  if (dladdr(ip, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base != nullptr ? base + 1 : info.dli_fname;
  return std::strncmp(base, "libcupti", 8) == 0 || std::strncmp(base, "libcudart", 9) == 0 ||
         std::strncmp(base, "libcuda.", 8) == 0;
}

// Emits the calling thread's stack (1 in PROFAGENT_STACKS per thread), without its first
// frames (up to `max_skip`) for which `skip` holds: those above the application's call.
template <typename Skip>
void TakeStack(uint64_t t, int max_skip, Skip skip) {
  if (++t_stack_count < internal::g_stack_every) return;
  t_stack_count = 0;
  void* ips[kMaxStackFrames + kCallbackFramesMax];
  const int want = std::min<int>(int(internal::g_stack_depth), kMaxStackFrames) + max_skip;
  const int n = unw_backtrace(ips, want);
  int first = 0;
  while (first < n && first < max_skip && skip(ips[first])) ++first;
  // The agent's own frames further down too (an NCCL call's launch passes through the agent's
  // wrapper of ncclGroupEnd): the application's code only.
  int end = first;
  for (int i = first; i < n; ++i) {
    if (!InOwnCode(ips[i])) ips[end++] = ips[i];
  }
  const int kept = std::min<int>(end - first, int(internal::g_stack_depth));
  if (kept <= 0) return;
  RawEvent s;
  std::memset(&s, 0, sizeof(s));
  s.t0 = s.t1 = t;
  s.type = EvType::kStack;
  EmitWithBytes(s, ips + first, size_t(kept) * sizeof(void*));
}

__attribute__((noinline)) void CaptureStack(uint64_t t) { TakeStack(t, kOwnFramesMax, InOwnCode); }

inline void MaybeCaptureStack(uint64_t t) {
  if (__builtin_expect(internal::g_stack_every != 0, 0)) CaptureStack(t);
}

// The stack of a launch recorded from a CUPTI callback (injection, a static cudart, driver
// launches): as CaptureStack, without the frames of the agent, CUPTI, the runtime and the
// driver above the application's call (a static cudart's are the application's own).
__attribute__((noinline)) void CaptureStackInCallback(uint64_t t) {
  if (internal::g_stack_every == 0) return;
  TakeStack(t, kCallbackFramesMax, [](void* ip) { return InOwnCode(ip) || InCudaLibrary(ip); });
}

struct RegisterLaunchStack {
  RegisterLaunchStack() { cupti::SetLaunchStackCapture(CaptureStackInCallback); }
} g_register_launch_stack;

// ---- Launch API durations (PROFAGENT_LAUNCH_API_SAMPLE=N) ------------------------------------
// True when this launch's return time should be read: on average 1 in N launches per thread,
// at random gaps (uniform in 1..2N-1) so that a periodic launch sequence (the same layers every
// step) is not always sampled at the same kernel. `t0` (raw ticks) seeds the gap: its low bits
// are unrelated to the launch pattern. A thread's first launch (the slowest: lazy module
// loading) is not timed, which would bias the estimate of the rest; its second always is, so
// a thread that launches only a few kernels still has a timed one (host timing's kernel time
// is the launch's: with none timed, a short-lived launcher thread had no time at all). Costs
// one decrement when not sampling.
inline bool SampleLaunchEnd(uint64_t t0) {
  if (__builtin_expect(t_launch_end_gap > 1, 1)) {
    --t_launch_end_gap;
    return false;
  }
  const uint32_t n = internal::g_launch_api_sample;
  if (t_launch_end_gap == 0 && n > 1) {  // the thread's first launch: time the next one
    t_launch_end_gap = 1;
    return false;
  }
  uint64_t x = (t0 ^ (uint64_t(t_launch_end_gap) << 32)) + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  t_launch_end_gap = n <= 1 ? 1 : 1 + uint32_t(x % (2ull * n - 1));
  return true;
}

// ---- Launches --------------------------------------------------------------------------------
struct LaunchDesc {
  const void* func;
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
};

template <typename Call>
inline cudaError_t DoLaunch(uint16_t api, EvType type, const LaunchDesc& d, Call&& call) {
  uint8_t mode = Mode();
  int32_t ticket = mode == kEvents ? EventTimerBegin(d.stream) : -1;
  // With CUPTI, its runtime callbacks (inside the real call) see in_runtime and leave the
  // launch to this hook; they hand over CUPTI's correlation id in api_corr.
  const bool cupti = mode == kCupti;
  cupti::ThreadState& ts = cupti::t_state;
  if (cupti) {
    ts.api_corr = 0;
    ++ts.in_runtime;
  }
  uint64_t t0 = Now();
  cudaError_t r = call();
  // CUDA-event timing bounds device times by the call's end: always read it there.
  const bool timed_end = ticket >= 0 || SampleLaunchEnd(t0);
  uint64_t t1 = timed_end ? Now() : t0;
  uint32_t corr = 0;
  if (cupti) {
    --ts.in_runtime;
    corr = ts.api_corr;
  }
  if (corr == 0) corr = NextCorrelationId();
  const uint32_t block = PackBlock(d.block.x, d.block.y, d.block.z);
  if (ticket >= 0) {
    DeviceOpInfo info;
    std::memset(&info, 0, sizeof(info));
    info.func = type == EvType::kLaunch ? d.func : nullptr;
    info.graph = type == EvType::kGraphLaunch ? U64(d.func) : 0;
    info.corr = corr;
    info.grid_x = d.grid.x;
    info.grid_y = uint16_t(d.grid.y);
    info.grid_z = uint16_t(d.grid.z);
    info.block = block;
    info.stream = StreamKey(d.stream);
    info.kind = type == EvType::kLaunch ? kDopKernel : kDopOther;
    info.device = uint8_t(EventTimerDevice(ticket));
    info.call_t0 = t0;
    info.call_t1 = t1;
    EventTimerEnd(ticket, d.stream, info, r == cudaSuccess);
  }
  MaybeCaptureStack(t0);
  // A shape too large for the payload (a rejected launch) goes whole into a continuation slot.
  const LaunchShapeExtra shape{{d.grid.x, d.grid.y, d.grid.z}, {d.block.x, d.block.y, d.block.z}};
  const bool fits = FitsLaunchPayload(shape);
  // Filled in place in the ring (the most frequent event: no copy through the stack).
  RawEvent local;
  RawEvent* slot = fits ? EmitReserve() : nullptr;
  RawEvent& e = slot != nullptr ? *slot : local;
  e.t0 = t0;
  e.t1 = t1;
  e.type = type;
  e.flags = uint8_t((timed_end ? 0 : kFlagNoEnd) | (Capturing(U64(d.stream)) ? kFlagCaptured : 0));
  e.extra = 0;
  e.api = api;
  e.pad = 0;
  e.ret = int32_t(r);
  e.launch.func = d.func;
  e.launch.stream = U64(d.stream);
  e.launch.corr = corr;
  e.launch.grid_x = d.grid.x;
  e.launch.grid_y = uint16_t(d.grid.y);
  e.launch.grid_z = uint16_t(d.grid.z);
  e.launch.block = block;
  e.launch.shmem = uint32_t(d.shmem < 0xffffff ? d.shmem : 0xffffff);
  e.launch.device = 0;
  if (mode == kHost) {  // (the device op of the other modes carries its device)
    const int created = CreatedStreamDevice(d.stream);
    e.launch.device = uint8_t(created >= 0 ? created : t_device);
  }
  if (slot != nullptr) {
    EmitCommit();
  } else if (fits) {
    Emit(local);
  } else {
    EmitWithBytes(local, &shape, sizeof(shape));
  }
  return r;
}

// An intercepted call's event: `type` and `api` over [t0, t1], returning r; the rest zero.
inline RawEvent CallEvent(EvType type, uint16_t api, cudaError_t r, uint64_t t0, uint64_t t1) {
  RawEvent e;
  std::memset(&e, 0, sizeof(e));
  e.t0 = t0;
  e.t1 = t1;
  e.type = type;
  e.api = api;
  e.ret = int32_t(r);
  return e;
}

// ---- Copies and sets ------------------------------------------------------------------------
// Whether a "synchronous" copy or set (cudaMemcpy, cudaMemset, ...) really returns only once the
// device is done, so its device end is at most the call's return (event_interval.h). CUDA's API
// synchronization behavior: device-to-device copies (peer ones too) perform no host-side
// synchronization, and sets are asynchronous to the host unless they write pinned host memory.
// A cudaMemcpyDefault copy may be either: taken as waiting.
inline bool WaitsForDevice(EvType type, uint32_t kind, const void* ptr) {
  if (type == EvType::kMemset) {
    AllocTable::Entry a;
    return g_allocs.Find(U64(ptr), &a) && a.kind == 1;  // MEM_HOST_PINNED
  }
  return kind != cudaMemcpyDeviceToDevice;
}

Real<decltype(&cudaPointerGetAttributes)> r_pointer_attributes("cudaPointerGetAttributes");
Real<decltype(&cudaPeekAtLastError)> r_peek_error("cudaPeekAtLastError");
Real<decltype(&cudaGetLastError)> r_get_error("cudaGetLastError");

// A cudaMemcpyDefault copy's direction, as the runtime infers it from the pointers (unified
// addressing), under CUDA-event timing: a device-to-device copy (simpleP2P's) does not wait for
// the device, so its end is not capped at the call's return (before: read as 0 us), and its
// bucket is memcpy.d2d, not memcpy.other. Managed memory, or a pointer the runtime does not
// know, keeps cudaMemcpyDefault. The application's last error is left as it was: skipped when
// one is pending, cleared when the agent's own query set one.
uint32_t ResolvedCopyKind(uint32_t kind, const void* dst, const void* src) {
  if (kind != cudaMemcpyDefault || Mode() != kEvents) return kind;
  auto attributes = r_pointer_attributes.get();
  auto peek = r_peek_error.get();
  auto get = r_get_error.get();
  if (attributes == nullptr || peek == nullptr || get == nullptr) return kind;
  HookGuard guard;  // the agent's own calls
  if (peek() != cudaSuccess) return kind;
  auto where = [&](const void* p) -> int {  // 0 host, 1 device, -1 unknown or managed
    cudaPointerAttributes a;
    std::memset(&a, 0, sizeof(a));
    if (attributes(&a, p) != cudaSuccess) {
      get();
      return -1;
    }
    if (a.type == cudaMemoryTypeDevice) return 1;
    if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered) return 0;
    return -1;
  };
  const int d = where(dst), s = where(src);
  if (d < 0 || s < 0) return kind;
  if (d == 1) return s == 1 ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return s == 1 ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
}

template <typename Call>
inline cudaError_t DoMem(uint16_t api, EvType type, uint64_t bytes, uint32_t kind, const void* ptr,
                         cudaStream_t stream, bool sync_call, Call&& call) {
  uint8_t mode = Mode();
  // A copy or set of 0 bytes enqueues nothing (no CUPTI record either): nothing to time.
  int32_t ticket = mode == kEvents && bytes != 0 ? EventTimerBegin(stream) : -1;
  if (sync_call && ticket >= 0) sync_call = WaitsForDevice(type, kind, ptr);
  cupti::ThreadState& ts = cupti::t_state;
  ts.api_corr = 0;
  ++ts.in_runtime;
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  --ts.in_runtime;
  uint32_t corr = ts.api_corr;
  if (corr == 0) corr = NextCorrelationId();
  RawEvent e = CallEvent(type, api, r, t0, t1);
  e.mem.bytes = bytes;
  e.mem.stream = U64(stream);
  e.mem.ptr = U64(ptr);
  e.mem.corr = corr;
  e.mem.kind = kind;
  e.mem.device = uint32_t(t_device);
  if (mode == kHost && stream != nullptr) {
    // Host timing: the call is the op, on its stream's device (a copy or set may go to a stream
    // of a device that is not current), as a launch (the other modes' device ops carry theirs).
    const int created = CreatedStreamDevice(stream);
    if (created >= 0) e.mem.device = uint32_t(created);
  }
  if (Capturing(U64(stream))) e.flags |= kFlagCaptured;
  if (ticket >= 0) {
    DeviceOpInfo info;
    std::memset(&info, 0, sizeof(info));
    info.bytes = bytes;
    info.corr = corr;
    info.stream = StreamKey(stream);
    info.kind = type == EvType::kMemcpy ? kDopMemcpy : kDopMemset;
    info.copy_kind = uint8_t(kind);
    info.device = uint8_t(EventTimerDevice(ticket));
    info.sync_call = sync_call;
    info.call_t0 = t0;
    info.call_t1 = t1;
    EventTimerEnd(ticket, stream, info, r == cudaSuccess);
  }
  Emit(e);
  return r;
}

// ---- Allocation ----------------------------------------------------------------------------
// An allocation or free of `a` (bytes, memory kind, device) at `ptr`.
inline void EmitMemEvent(EvType type, uint16_t api, cudaError_t r, uint64_t t0, uint64_t t1,
                         uint64_t ptr, const AllocTable::Entry& a, uint64_t stream) {
  RawEvent e = CallEvent(type, api, r, t0, t1);
  e.mem.bytes = a.size;
  e.mem.ptr = ptr;
  e.mem.kind = a.kind;
  e.mem.stream = stream;
  e.mem.device = a.device;
  Emit(e);
}

// An allocation of memory `kind` on `device` (-1: the current device).
template <typename Call, typename Size>
inline cudaError_t DoAllocSized(uint16_t api, void** out, Size&& size_after, uint32_t kind,
                                Call&& call, int device = -1) {
  InRuntime marked;
  Mode();
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  void* p = (r == cudaSuccess && out) ? *out : nullptr;
  const size_t size = size_t(size_after(r));  // the bytes allocated (or asked for, on failure)
  const uint32_t dev = uint32_t(device >= 0 ? device : t_device);
  if (p) g_allocs.Insert(U64(p), size, kind, dev);
  EmitMemEvent(EvType::kAlloc, api, r, t0, t1, U64(p), {size, kind, dev}, 0);
  return r;
}

template <typename Call>
inline cudaError_t DoAlloc(uint16_t api, void** out, size_t size, uint32_t kind, Call&& call,
                           int device = -1) {
  return DoAllocSized(api, out, [size](cudaError_t) { return size; }, kind, call, device);
}

// ---- Memory pools ----------------------------------------------------------------------------
// The pools the application obtained (cudaMemPoolCreate, cudaDeviceGetDefaultMemPool,
// cudaDeviceGetMemPool), with their location: memory kind (device, or pinned host for a pool in
// host memory) and device. An allocation from a pool is the pool's memory whatever device is
// current.
AllocTable g_pool_locations;

void NotePool(cudaMemPool_t pool, uint32_t kind, int device) {
  if (pool != nullptr && device >= 0) g_pool_locations.Insert(U64(pool), 0, kind, uint32_t(device));
}

// The memory kind and device of a pool at `location` for allocations of `type` (the current
// device unless the location is a device).
inline uint32_t LocationKind(const cudaMemLocation* location, cudaMemAllocationType type) {
  if (type == cudaMemAllocationTypeManaged) return kMemManaged;
  if (location == nullptr) return kMemAsync;
  switch (location->type) {
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent: return kMemPinned;
    default: return kMemAsync;
  }
}
inline int LocationDevice(const cudaMemLocation* location) {
  return location != nullptr && location->type == cudaMemLocationTypeDevice ? location->id
                                                                            : t_device;
}
// A created pool's.
inline uint32_t PoolKind(const cudaMemPoolProps* props) {
  return props == nullptr ? kMemAsync : LocationKind(&props->location, props->allocType);
}
inline int PoolDevice(const cudaMemPoolProps* props) {
  return LocationDevice(props == nullptr ? nullptr : &props->location);
}
// A destroyed pool's handle may be reused for another pool.
inline void ForgetPool(cudaMemPool_t pool) {
  AllocTable::Entry e;
  if (pool != nullptr && g_pool_locations.Live() != 0) g_pool_locations.Take(U64(pool), &e);
}

// Where a stream-ordered allocation takes its memory: from `pool` (cudaMallocFromPoolAsync) when
// the agent saw it obtained, else from the current pool of the stream's device
// (cudaMallocAsync), the current device's for the default streams and streams made unseen.
inline AllocTable::Entry AsyncAllocLocation(cudaStream_t stream, cudaMemPool_t pool) {
  AllocTable::Entry where{0, kMemAsync, uint32_t(t_device)};
  AllocTable::Entry noted;
  if (pool != nullptr && g_pool_locations.Live() != 0 && g_pool_locations.Find(U64(pool), &noted)) {
    if (noted.kind != kMemAsync) where.kind = noted.kind;
    where.device = noted.device;
    return where;
  }
  const int created = CreatedStreamDevice(stream);
  if (created >= 0) where.device = uint32_t(created);
  return where;
}

template <typename Call>
inline cudaError_t DoGeneric(uint16_t api, EvType type, uint64_t a, uint64_t b, Call&& call);

// Stream-ordered allocation and free made on a capturing stream make graph memory nodes:
// nothing is allocated or freed then (the graph does it at its launches, which the agent does
// not see), so they are plain calls, not memory events.
template <typename Call>
inline cudaError_t DoAsyncAlloc(uint16_t api, void** out, size_t size, cudaStream_t stream,
                                cudaMemPool_t pool, Call&& call) {
  if (Capturing(U64(stream))) return DoGeneric(api, EvType::kApi, U64(stream), 0, call);
  const AllocTable::Entry where = AsyncAllocLocation(stream, pool);
  return DoAlloc(api, out, size, where.kind, call, int(where.device));
}

template <typename Call>
inline cudaError_t DoFree(uint16_t api, void* ptr, uint32_t default_kind, cudaStream_t stream,
                          Call&& call) {
  // cudaFree(0), the idiom that creates the context (it may take 100 ms on a GPU), frees nothing:
  // a plain call, as is a free on a capturing stream.
  if (ptr == nullptr || (stream != nullptr && Capturing(U64(stream)))) {
    return DoGeneric(api, EvType::kApi, U64(stream), 0, call);
  }
  InRuntime marked;
  Mode();
  AllocTable::Entry a{0, default_kind, uint32_t(t_device)};
  // Taken before the real free: once the memory is returned, another thread may get the same
  // address from an allocation and insert it again.
  bool known = g_allocs.Take(U64(ptr), &a);
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  if (r != cudaSuccess && known) g_allocs.Insert(U64(ptr), a.size, a.kind, a.device);
  // The allocation's device (another one may be current).
  EmitMemEvent(EvType::kFree, api, r, t0, t1, U64(ptr), a, U64(stream));
  return r;
}

// A cudaDeviceReset of `device` (between t0 and t1) released its device, managed and
// stream-ordered memory: a free each, from the allocations still recorded.
inline void EmitResetFrees(uint16_t api, int device, uint64_t t0, uint64_t t1) {
  g_allocs.TakeEach(
      [device](const AllocTable::Entry& a) {
        return a.device == uint32_t(device) && a.kind != kMemPinned;
      },
      [&](uint64_t ptr, const AllocTable::Entry& a) {
        EmitMemEvent(EvType::kFree, api, cudaSuccess, t0, t1, ptr, a, 0);
      });
}

// ---- Everything else: synchronization, streams, events ----------------------------------------
// Emits a call of the generic kinds (GenericPayload: a, b, and for poll runs c and corr).
inline void EmitGeneric(uint16_t api, EvType type, cudaError_t r, uint64_t t0, uint64_t t1,
                        uint64_t a, uint64_t b, uint64_t c = 0, uint32_t corr = 0) {
  RawEvent e = CallEvent(type, api, r, t0, t1);
  e.gen.a = a;
  e.gen.b = b;
  e.gen.c = c;
  e.gen.corr = corr;
  Emit(e);
}

template <typename Call>
inline cudaError_t DoGeneric(uint16_t api, EvType type, uint64_t a, uint64_t b, Call&& call) {
  InRuntime marked;
  Mode();
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  EmitGeneric(api, type, r, t0, t1, a, b);
  return r;
}

// A call whose record names what it made (a graph, a graph exec): `made(r, &e)` fills the
// payload once the call returned `r` (event.h, kApi graph creation).
template <typename Call, typename Made>
inline cudaError_t DoGenericMade(uint16_t api, Call&& call, Made&& made) {
  InRuntime marked;
  Mode();
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  RawEvent e = CallEvent(EvType::kApi, api, r, t0, t1);
  made(r, &e);
  Emit(e);
  return r;
}

// ---- Polls: cudaEventQuery, cudaStreamQuery --------------------------------------------------
// An engine that spins on a query makes a call every few hundred ns until the work is done, each
// returning cudaErrorNotReady; a record per call would fill the thread's ring and drop the
// launches around the loop. Not-ready polls of one handle with nothing but polls of the thread
// between them (a scheduler that polls each request's event in turn interleaves several handles)
// become one record when the run ends (at the thread's next other poll result or recorded event,
// or its exit): it spans the first call's start to the last one's end and carries the number of
// calls and the ticks spent inside them (event.h, kApi). A poll that returns anything else is a
// record of its own. Runs still open when the agent stops on threads other than the one that
// stops it are counted in a note.
std::atomic<uint64_t> g_polls_pending{0};

struct PollRun {
  uint64_t a, b;  // the record's handles (gen.a/gen.b): what identifies the run
  uint64_t t0, t1, busy;
  uint32_t calls;
  uint16_t api;
};
// A thread's open runs, in the order they started; allocated at its first not-ready poll (a
// pointer keeps the agent's initial-exec TLS small, see tls_model_test.sh).
struct PollRuns {
  static constexpr int kMax = 16;  // handles polled in turn (more: the oldest runs end)
  PollRun run[kMax];
  int open;
  uint64_t mark;  // t_ring->produced() when a run was last extended or started (t_ring is the
                  // thread's for its whole life: a run starts only once it has one)
};
thread_local PollRuns* t_polls __attribute__((tls_model("initial-exec"))) = nullptr;

void FlushPolls() {
  PollRuns* runs = t_polls;
  if (runs == nullptr || runs->open == 0) return;
  const int open = runs->open;
  runs->open = 0;
  for (int i = 0; i < open; ++i) {
    const PollRun& run = runs->run[i];
    g_polls_pending.fetch_sub(run.calls, std::memory_order_relaxed);
    EmitGeneric(run.api, EvType::kApi, cudaErrorNotReady, run.t0, run.t1, run.a, run.b, run.busy,
                run.calls);
  }
}

void FlushPollsAtThreadExit() {
  FlushPolls();
  std::free(t_polls);
  t_polls = nullptr;
}

void PollsAtShutdown() {
  FlushPolls();  // the thread that stops the agent (usually the main thread, in exit())
  if (uint64_t n = g_polls_pending.load(std::memory_order_relaxed)) {
    AddNote("warning", std::to_string(n) +
                           " not-ready cudaEventQuery/cudaStreamQuery polls of threads still "
                           "polling at exit are not in the file");
  }
}

__attribute__((noinline)) PollRuns* NewPollRuns() {
  static const bool once =
      (AtShutdown(PollsAtShutdown), AtThreadExit(FlushPollsAtThreadExit), true);
  (void)once;
  t_polls = static_cast<PollRuns*>(std::calloc(1, sizeof(PollRuns)));
  return t_polls;
}

template <typename Call>
inline cudaError_t DoPoll(uint16_t api, uint64_t a, uint64_t b, Call&& call) {
  InRuntime marked;
  Mode();
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  const Ring* ring = profagent::internal::t_ring;
  // A thread's first event registers it (and its exit hook): never held back.
  PollRuns* runs = r == cudaErrorNotReady && ring != nullptr
                       ? (t_polls != nullptr ? t_polls : NewPollRuns())
                       : nullptr;
  if (runs != nullptr) {
    // Another event of the thread since the last poll: the open runs end before it.
    if (runs->open != 0 && ring->produced() != runs->mark) FlushPolls();
    for (int i = 0; i < runs->open; ++i) {
      PollRun& run = runs->run[i];
      if (run.a == a && run.b == b && run.api == api && run.calls < UINT32_MAX) {
        run.t1 = t1;
        run.busy += t1 - t0;
        ++run.calls;
        g_polls_pending.fetch_add(1, std::memory_order_relaxed);
        return r;
      }
    }
    if (runs->open == PollRuns::kMax) FlushPolls();
    runs->run[runs->open++] = PollRun{a, b, t0, t1, t1 - t0, 1, api};
    runs->mark = ring->produced();
    g_polls_pending.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  FlushPolls();
  EmitGeneric(api, EvType::kApi, r, t0, t1, a, b);
  return r;
}

// Stream/event creation: the handle is known only after the call.
template <typename Call>
inline cudaError_t DoCreate(uint16_t api, EvType type, void** out, uint64_t b, Call&& call) {
  InRuntime marked;
  Mode();
  uint64_t t0 = Now();
  cudaError_t r = call();
  uint64_t t1 = Now();
  RawEvent e = CallEvent(type, api, r, t0, t1);
  e.gen.a = (r == cudaSuccess && out) ? U64(*out) : 0;
  e.gen.b = b;
  if (type == EvType::kStream && e.gen.a != 0) {
    NoteStreamDevice(reinterpret_cast<cudaStream_t>(e.gen.a), t_device);
  }
  Emit(e);
  return r;
}

}  // namespace
}  // namespace rt
}  // namespace profagent

using profagent::EvType;
using profagent::HookGuard;
using profagent::NoteUnrecordedCall;
using profagent::Recording;
using profagent::RegisterApi;
namespace rt = profagent::rt;

// One interposer = the real function and an API id (DEFINE_REAL), and a body run by Intercept.
#define DEFINE_REAL(fn) \
  static rt::Real<decltype(&fn)> real_##fn(#fn); \
  static const uint16_t api_##fn = RegisterApi(#fn);

// Every interposer: forwards to the real function when the agent must not record (re-entry
// from the agent's own calls, not recording), else runs `body(real)`.
namespace profagent {
namespace rt {
// Whether a hook forwards the call unrecorded: re-entered (the agent's own calls, calls a hooked
// function makes), or not `recording` (then counted while the file is being finished).
inline bool Forwards(const HookGuard& guard, bool recording) {
  if (!guard.outermost()) return true;
  if (recording) return false;
  NoteUnrecordedCall();
  return true;
}

template <typename F, typename Body, typename... A>
inline cudaError_t Intercept(Real<F>& r, Body&& body, A... args) {
  F real = r.get();
  if (__builtin_expect(real == nullptr, 0)) return kNoReal;
  HookGuard guard;
  if (Forwards(guard, Recording())) return real(args...);
  return body(real);
}

// The calls a step rule (PROFAGENT_STEP_RULE) counts, graph launches and host synchronizations:
// `body(real)` records the call when recording is on; `step(t0, t1)` reports it to the step
// model in any case, or a schedule or capture range that paused recording would never see the
// step that resumes it.
template <typename F, typename Body, typename Step, typename... A>
inline cudaError_t InterceptStep(Real<F>& r, Body&& body, Step&& step, A... args) {
  F real = r.get();
  if (__builtin_expect(real == nullptr, 0)) return kNoReal;
  HookGuard guard;
  if (Forwards(guard, RecordingMemory())) return real(args...);
  const uint64_t t0 = Now();
  cudaError_t res = Recording() ? body(real) : real(args...);
  step(t0, Now());
  return res;
}

// A graph launch under PROFAGENT_STEP_RULE=graph opens the step its work belongs to: the
// boundary (`step(t0)`) is taken before the call, so a schedule that becomes active at it
// records this launch, and one that ends there does not.
template <typename F, typename Body, typename Step, typename... A>
inline cudaError_t InterceptStepFirst(Real<F>& r, Body&& body, Step&& step, A... args) {
  F real = r.get();
  if (__builtin_expect(real == nullptr, 0)) return kNoReal;
  HookGuard guard;
  if (Forwards(guard, RecordingMemory())) return real(args...);
  step(Now());
  return Recording() ? body(real) : real(args...);
}

// Allocations and frees: recorded whatever the schedule and the capture range say (see
// RecordingMemory), so the memory counter and peak are right and frees find their sizes.
template <typename F, typename Body, typename... A>
inline cudaError_t InterceptMem(Real<F>& r, Body&& body, A... args) {
  F real = r.get();
  if (__builtin_expect(real == nullptr, 0)) return kNoReal;
  HookGuard guard;
  if (Forwards(guard, RecordingMemory())) return real(args...);
  return body(real);
}
}  // namespace rt
}  // namespace profagent

#define EXPORT extern "C" __attribute__((visibility("default")))

// ---- Registration ----------------------------------------------------------------------------
static rt::Real<decltype(&__cudaRegisterFunction)> real___cudaRegisterFunction(
    "__cudaRegisterFunction");

EXPORT void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                   const char* deviceName, int thread_limit, uint3* tid,
                                   uint3* bid, dim3* bDim, dim3* gDim, int* wSize) {
  auto real = real___cudaRegisterFunction.get();
  if (real) real(fatCubinHandle, hostFun, deviceFun, deviceName, thread_limit, tid, bid, bDim,
                 gDim, wSize);
  HookGuard guard;
  if (!guard.outermost() || !deviceFun) return;
  profagent::RegisterFunctionName(hostFun, deviceFun);
  rt::NoteKernelName(hostFun, deviceFun);
}

DEFINE_REAL(__cudaGetKernel)
EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  auto real = real___cudaGetKernel.get();
  if (!real) return rt::kNoReal;
  cudaError_t r = real(kernel, hostFun);
  HookGuard guard;
  if (r == cudaSuccess && kernel && *kernel && guard.outermost()) {
    // Once per launch site (nvcc caches the handle in a function-local static): name the
    // kernel handle after its host stub, whose name __cudaRegisterFunction recorded.
    if (const char* name = rt::LookupKernelName(hostFun)) {
      profagent::RegisterFunctionName(*kernel, name);
      rt::NoteKernelName(*kernel, name);
    }
  }
  return r;
}

// ---- Launches --------------------------------------------------------------------------------
DEFINE_REAL(__cudaLaunchKernel)
EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                      size_t shmem, cudaStream_t stream) {
  return rt::Intercept(real___cudaLaunchKernel, [&](auto real) {
    return rt::DoLaunch(api___cudaLaunchKernel, EvType::kLaunch, {kernel, grid, block, shmem, stream},
                        [&] { return real(kernel, grid, block, args, shmem, stream); });
  }, kernel, grid, block, args, shmem, stream);
}

DEFINE_REAL(__cudaLaunchKernel_ptsz)
EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                           void** args, size_t shmem, cudaStream_t stream) {
  return rt::Intercept(real___cudaLaunchKernel_ptsz, [&](auto real) {
    return rt::DoLaunch(api___cudaLaunchKernel_ptsz, EvType::kLaunch,
                        {kernel, grid, block, shmem, rt::Pt(stream)},
                        [&] { return real(kernel, grid, block, args, shmem, stream); });
  }, kernel, grid, block, args, shmem, stream);
}

DEFINE_REAL(cudaLaunchKernel)
EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                    size_t shmem, cudaStream_t stream) {
  return rt::Intercept(real_cudaLaunchKernel, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchKernel, EvType::kLaunch, {func, grid, block, shmem, stream},
                        [&] { return real(func, grid, block, args, shmem, stream); });
  }, func, grid, block, args, shmem, stream);
}

DEFINE_REAL(cudaLaunchKernel_ptsz)
EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                         size_t shmem, cudaStream_t stream) {
  return rt::Intercept(real_cudaLaunchKernel_ptsz, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchKernel_ptsz, EvType::kLaunch,
                        {func, grid, block, shmem, rt::Pt(stream)},
                        [&] { return real(func, grid, block, args, shmem, stream); });
  }, func, grid, block, args, shmem, stream);
}

DEFINE_REAL(cudaLaunchCooperativeKernel)
EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block,
                                               void** args, size_t shmem, cudaStream_t stream) {
  return rt::Intercept(real_cudaLaunchCooperativeKernel, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchCooperativeKernel, EvType::kLaunch,
                        {func, grid, block, shmem, stream},
                        [&] { return real(func, grid, block, args, shmem, stream); });
  }, func, grid, block, args, shmem, stream);
}

DEFINE_REAL(cudaLaunchCooperativeKernel_ptsz)
EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block,
                                                    void** args, size_t shmem,
                                                    cudaStream_t stream) {
  return rt::Intercept(real_cudaLaunchCooperativeKernel_ptsz, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchCooperativeKernel_ptsz, EvType::kLaunch,
                        {func, grid, block, shmem, rt::Pt(stream)},
                        [&] { return real(func, grid, block, args, shmem, stream); });
  }, func, grid, block, args, shmem, stream);
}

// `pt`: a _ptsz entry point, whose stream 0 is the per-thread default stream.
static rt::LaunchDesc ExDesc(const cudaLaunchConfig_t* c, const void* func, bool pt) {
  if (!c) return {func, dim3(), dim3(), 0, nullptr};
  return {func, c->gridDim, c->blockDim, c->dynamicSmemBytes, pt ? rt::Pt(c->stream) : c->stream};
}

DEFINE_REAL(cudaLaunchKernelExC)
EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                       void** args) {
  return rt::Intercept(real_cudaLaunchKernelExC, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchKernelExC, EvType::kLaunch, ExDesc(config, func, false),
                        [&] { return real(config, func, args); });
  }, config, func, args);
}

DEFINE_REAL(cudaLaunchKernelExC_ptsz)
EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                            void** args) {
  return rt::Intercept(real_cudaLaunchKernelExC_ptsz, [&](auto real) {
    return rt::DoLaunch(api_cudaLaunchKernelExC_ptsz, EvType::kLaunch, ExDesc(config, func, true),
                        [&] { return real(config, func, args); });
  }, config, func, args);
}

// `on` is the stream the graph runs on (`stream`, or the per-thread default for a _ptsz 0).
static cudaError_t GraphLaunch(uint16_t api, cudaGraphExec_t exec, cudaStream_t stream,
                               cudaStream_t on,
                               cudaError_t (*real)(cudaGraphExec_t, cudaStream_t)) {
  return rt::DoLaunch(api, EvType::kGraphLaunch, {exec, dim3(), dim3(), 0, on},
                      [&] { return real(exec, stream); });
}

DEFINE_REAL(cudaGraphLaunch)
EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return rt::InterceptStepFirst(
      real_cudaGraphLaunch,
      [&](auto real) { return GraphLaunch(api_cudaGraphLaunch, exec, stream, stream, real); },
      [&](uint64_t t) { profagent::model::OnGraphLaunch(t, t, rt::U64(stream)); }, exec, stream);
}

DEFINE_REAL(cudaGraphLaunch_ptsz)
EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  return rt::InterceptStepFirst(
      real_cudaGraphLaunch_ptsz,
      [&](auto real) {
        return GraphLaunch(api_cudaGraphLaunch_ptsz, exec, stream, rt::Pt(stream), real);
      },
      [&](uint64_t t) { profagent::model::OnGraphLaunch(t, t, rt::U64(rt::Pt(stream))); }, exec,
      stream);
}

// ---- Copies and sets ---------------------------------------------------------------------------
DEFINE_REAL(cudaMemcpy)
EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return rt::Intercept(
      real_cudaMemcpy,
      [&](auto real) {
        return rt::DoMem(api_cudaMemcpy, EvType::kMemcpy, count,
                         rt::ResolvedCopyKind(kind, dst, src), dst, nullptr, true,
                         [&] { return real(dst, src, count, kind); });
      },
      dst, src, count, kind);
}

DEFINE_REAL(cudaMemcpyAsync)
EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  return rt::Intercept(
      real_cudaMemcpyAsync,
      [&](auto real) {
        return rt::DoMem(api_cudaMemcpyAsync, EvType::kMemcpy, count,
                         rt::ResolvedCopyKind(kind, dst, src), dst, stream, false,
                         [&] { return real(dst, src, count, kind, stream); });
      },
      dst, src, count, kind, stream);
}

DEFINE_REAL(cudaMemcpyAsync_ptsz)
EXPORT cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                        cudaMemcpyKind kind, cudaStream_t stream) {
  return rt::Intercept(
      real_cudaMemcpyAsync_ptsz,
      [&](auto real) {
        return rt::DoMem(api_cudaMemcpyAsync_ptsz, EvType::kMemcpy, count,
                         rt::ResolvedCopyKind(kind, dst, src), dst, rt::Pt(stream), false,
                         [&] { return real(dst, src, count, kind, stream); });
      },
      dst, src, count, kind, stream);
}

DEFINE_REAL(cudaMemcpyPeer)
EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_dev, const void* src, int src_dev,
                                  size_t count) {
  return rt::Intercept(real_cudaMemcpyPeer, [&](auto real) {
    return rt::DoMem(api_cudaMemcpyPeer, EvType::kMemcpy, count, cudaMemcpyDeviceToDevice, dst,
                     nullptr, true, [&] { return real(dst, dst_dev, src, src_dev, count); });
  }, dst, dst_dev, src, src_dev, count);
}

DEFINE_REAL(cudaMemcpyPeerAsync)
EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_dev, const void* src, int src_dev,
                                       size_t count, cudaStream_t stream) {
  return rt::Intercept(real_cudaMemcpyPeerAsync, [&](auto real) {
    return rt::DoMem(api_cudaMemcpyPeerAsync, EvType::kMemcpy, count, cudaMemcpyDeviceToDevice, dst,
                     stream, false, [&] { return real(dst, dst_dev, src, src_dev, count, stream); });
  }, dst, dst_dev, src, src_dev, count, stream);
}

DEFINE_REAL(cudaMemcpy2D)
EXPORT cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                                size_t width, size_t height, cudaMemcpyKind kind) {
  return rt::Intercept(
      real_cudaMemcpy2D,
      [&](auto real) {
        return rt::DoMem(api_cudaMemcpy2D, EvType::kMemcpy, uint64_t(width) * height,
                         rt::ResolvedCopyKind(kind, dst, src), dst, nullptr, true,
                         [&] { return real(dst, dpitch, src, spitch, width, height, kind); });
      },
      dst, dpitch, src, spitch, width, height, kind);
}

DEFINE_REAL(cudaMemcpy2DAsync)
EXPORT cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                     size_t width, size_t height, cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  return rt::Intercept(
      real_cudaMemcpy2DAsync,
      [&](auto real) {
        return rt::DoMem(api_cudaMemcpy2DAsync, EvType::kMemcpy, uint64_t(width) * height,
                         rt::ResolvedCopyKind(kind, dst, src), dst, stream, false, [&] {
                           return real(dst, dpitch, src, spitch, width, height, kind, stream);
                         });
      },
      dst, dpitch, src, spitch, width, height, kind, stream);
}

DEFINE_REAL(cudaMemset)
EXPORT cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  return rt::Intercept(real_cudaMemset, [&](auto real) {
    return rt::DoMem(api_cudaMemset, EvType::kMemset, count, 0, ptr, nullptr, true,
                     [&] { return real(ptr, value, count); });
  }, ptr, value, count);
}

DEFINE_REAL(cudaMemsetAsync)
EXPORT cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  return rt::Intercept(real_cudaMemsetAsync, [&](auto real) {
    return rt::DoMem(api_cudaMemsetAsync, EvType::kMemset, count, 0, ptr, stream, false,
                     [&] { return real(ptr, value, count, stream); });
  }, ptr, value, count, stream);
}

DEFINE_REAL(cudaMemsetAsync_ptsz)
EXPORT cudaError_t cudaMemsetAsync_ptsz(void* ptr, int value, size_t count, cudaStream_t stream) {
  return rt::Intercept(real_cudaMemsetAsync_ptsz, [&](auto real) {
    return rt::DoMem(api_cudaMemsetAsync_ptsz, EvType::kMemset, count, 0, ptr, rt::Pt(stream), false,
                     [&] { return real(ptr, value, count, stream); });
  }, ptr, value, count, stream);
}

DEFINE_REAL(cudaMemset2D)
EXPORT cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
  return rt::Intercept(real_cudaMemset2D, [&](auto real) {
    return rt::DoMem(api_cudaMemset2D, EvType::kMemset, uint64_t(width) * height, 0, ptr, nullptr, true,
                     [&] { return real(ptr, pitch, value, width, height); });
  }, ptr, pitch, value, width, height);
}

DEFINE_REAL(cudaMemset2DAsync)
EXPORT cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width,
                                     size_t height, cudaStream_t stream) {
  return rt::Intercept(real_cudaMemset2DAsync, [&](auto real) {
    return rt::DoMem(api_cudaMemset2DAsync, EvType::kMemset, uint64_t(width) * height, 0, ptr,
                     stream, false, [&] { return real(ptr, pitch, value, width, height, stream); });
  }, ptr, pitch, value, width, height, stream);
}

// ---- Allocation ------------------------------------------------------------------------------
DEFINE_REAL(cudaMalloc)
EXPORT cudaError_t cudaMalloc(void** ptr, size_t size) {
  return rt::InterceptMem(real_cudaMalloc, [&](auto real) {
    return rt::DoAlloc(api_cudaMalloc, ptr, size, rt::kMemDevice, [&] { return real(ptr, size); });
  }, ptr, size);
}

DEFINE_REAL(cudaMallocAsync)
EXPORT cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  return rt::InterceptMem(real_cudaMallocAsync, [&](auto real) {
    return rt::DoAsyncAlloc(api_cudaMallocAsync, ptr, size, stream, nullptr,
                            [&] { return real(ptr, size, stream); });
  }, ptr, size, stream);
}

DEFINE_REAL(cudaMallocHost)
EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return rt::InterceptMem(real_cudaMallocHost, [&](auto real) {
    return rt::DoAlloc(api_cudaMallocHost, ptr, size, rt::kMemPinned,
                       [&] { return real(ptr, size); });
  }, ptr, size);
}

DEFINE_REAL(cudaHostAlloc)
EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  return rt::InterceptMem(real_cudaHostAlloc, [&](auto real) {
    return rt::DoAlloc(api_cudaHostAlloc, ptr, size, rt::kMemPinned,
                       [&] { return real(ptr, size, flags); });
  }, ptr, size, flags);
}

DEFINE_REAL(cudaMallocManaged)
EXPORT cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  return rt::InterceptMem(real_cudaMallocManaged, [&](auto real) {
    return rt::DoAlloc(api_cudaMallocManaged, ptr, size, rt::kMemManaged,
                       [&] { return real(ptr, size, flags); });
  }, ptr, size, flags);
}

DEFINE_REAL(cudaFree)
EXPORT cudaError_t cudaFree(void* ptr) {
  return rt::InterceptMem(real_cudaFree, [&](auto real) {
    return rt::DoFree(api_cudaFree, ptr, rt::kMemDevice, nullptr, [&] { return real(ptr); });
  }, ptr);
}

DEFINE_REAL(cudaFreeAsync)
EXPORT cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  return rt::InterceptMem(real_cudaFreeAsync, [&](auto real) {
    return rt::DoFree(api_cudaFreeAsync, ptr, rt::kMemAsync, stream,
                      [&] { return real(ptr, stream); });
  }, ptr, stream);
}

DEFINE_REAL(cudaFreeHost)
EXPORT cudaError_t cudaFreeHost(void* ptr) {
  return rt::InterceptMem(real_cudaFreeHost, [&](auto real) {
    return rt::DoFree(api_cudaFreeHost, ptr, rt::kMemPinned, nullptr, [&] { return real(ptr); });
  }, ptr);
}

// ---- Synchronization ---------------------------------------------------------------------------
DEFINE_REAL(cudaDeviceSynchronize)
EXPORT cudaError_t cudaDeviceSynchronize(void) {
  return rt::InterceptStep(
      real_cudaDeviceSynchronize,
      [&](auto real) {
        return rt::DoGeneric(api_cudaDeviceSynchronize, EvType::kSync, ~0ull, 0,
                             [&] { return real(); });
      },
      [&](uint64_t t0, uint64_t t1) { profagent::model::OnHostSync(t0, t1, ~0ull); });
}

DEFINE_REAL(cudaStreamSynchronize)
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return rt::InterceptStep(
      real_cudaStreamSynchronize,
      [&](auto real) {
        return rt::DoGeneric(api_cudaStreamSynchronize, EvType::kSync, rt::U64(stream), 0,
                             [&] { return real(stream); });
      },
      [&](uint64_t t0, uint64_t t1) { profagent::model::OnHostSync(t0, t1, rt::U64(stream)); },
      stream);
}

DEFINE_REAL(cudaEventSynchronize)
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return rt::Intercept(real_cudaEventSynchronize, [&](auto real) {
    return rt::DoGeneric(api_cudaEventSynchronize, EvType::kSync, 0, rt::U64(event),
                         [&] { return real(event); });
  }, event);
}

DEFINE_REAL(cudaStreamWaitEvent)
EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                       unsigned int flags) {
  return rt::Intercept(real_cudaStreamWaitEvent, [&](auto real) {
    return rt::DoGeneric(api_cudaStreamWaitEvent, EvType::kSync, rt::U64(stream), rt::U64(event),
                         [&] { return real(stream, event, flags); });
  }, stream, event, flags);
}

// ---- Stream and event lifetime -------------------------------------------------------------
DEFINE_REAL(cudaStreamCreate)
EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return rt::Intercept(real_cudaStreamCreate, [&](auto real) {
    return rt::DoCreate(api_cudaStreamCreate, EvType::kStream, reinterpret_cast<void**>(stream), 0,
                        [&] { return real(stream); });
  }, stream);
}

DEFINE_REAL(cudaStreamCreateWithFlags)
EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return rt::Intercept(real_cudaStreamCreateWithFlags, [&](auto real) {
    return rt::DoCreate(api_cudaStreamCreateWithFlags, EvType::kStream, reinterpret_cast<void**>(stream), flags,
                        [&] { return real(stream, flags); });
  }, stream, flags);
}

DEFINE_REAL(cudaStreamCreateWithPriority)
EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags,
                                                int priority) {
  return rt::Intercept(real_cudaStreamCreateWithPriority, [&](auto real) {
    return rt::DoCreate(api_cudaStreamCreateWithPriority, EvType::kStream, reinterpret_cast<void**>(stream), flags,
                        [&] { return real(stream, flags, priority); });
  }, stream, flags, priority);
}

DEFINE_REAL(cudaStreamDestroy)
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  rt::ForgetStream(stream);  // its handle may come back as another device's stream
  return rt::Intercept(real_cudaStreamDestroy, [&](auto real) {
    return rt::DoGeneric(api_cudaStreamDestroy, EvType::kStream, rt::U64(stream), 0,
                         [&] { return real(stream); });
  }, stream);
}

DEFINE_REAL(cudaEventCreate)
EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return rt::Intercept(real_cudaEventCreate, [&](auto real) {
    return rt::DoCreate(api_cudaEventCreate, EvType::kEvent, reinterpret_cast<void**>(event), 0,
                        [&] { return real(event); });
  }, event);
}

DEFINE_REAL(cudaEventCreateWithFlags)
EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return rt::Intercept(real_cudaEventCreateWithFlags, [&](auto real) {
    return rt::DoCreate(api_cudaEventCreateWithFlags, EvType::kEvent, reinterpret_cast<void**>(event), flags,
                        [&] { return real(event, flags); });
  }, event, flags);
}

DEFINE_REAL(cudaEventRecord)
EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return rt::Intercept(
      real_cudaEventRecord,
      [&](auto real) {
        if (rt::Mode() == rt::kEvents) rt::EventTimerPrepare();  // not inside the window it starts
        return rt::DoGeneric(api_cudaEventRecord, EvType::kEvent, rt::U64(event), rt::U64(stream),
                             [&] { return real(event, stream); });
      },
      event, stream);
}

DEFINE_REAL(cudaEventDestroy)
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return rt::Intercept(real_cudaEventDestroy, [&](auto real) {
    return rt::DoGeneric(api_cudaEventDestroy, EvType::kEvent, rt::U64(event), 0,
                         [&] { return real(event); });
  }, event);
}

// ---- The remaining entry points, one line each ----------------------------------------------
// Per-thread-default-stream variants (`nvcc --default-stream per-thread`), symbol copies, pool
// and pitched allocations, host registration, polls, host functions, capture. Each macro makes
// one interposer: PROFAGENT_ARGS wraps a parameter or argument list.
#define PROFAGENT_ARGS(...) __VA_ARGS__

// A copy (type kMemcpy) or set (kMemset) of `bytes` to `dst` on `stream`; `sync` = the call
// returns once the operation is complete.
#define PROFAGENT_MEM_HOOK(fn, params, args, type, bytes, kind, dst, stream, sync)              \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::Intercept(real_##fn, [&](auto real) {                                         \
      return rt::DoMem(api_##fn, type, uint64_t(bytes), uint32_t(kind), dst, stream, sync,   \
                       [&] { return real(PROFAGENT_ARGS args); });                           \
    }, PROFAGENT_ARGS args);                                                                 \
  }

// Any other call: an event of `type` (kSync, kEvent, kApi) with handles a and b.
#define PROFAGENT_GENERIC_HOOK(fn, params, args, type, a, b)                                  \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::Intercept(real_##fn, [&](auto real) {                                         \
      return rt::DoGeneric(api_##fn, type, rt::U64(a), rt::U64(b),                           \
                           [&] { return real(PROFAGENT_ARGS args); });                       \
    }, PROFAGENT_ARGS args);                                                                 \
  }

#define PROFAGENT_ALLOC_HOOK(fn, params, args, out, size, kind)                               \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::InterceptMem(real_##fn, [&](auto real) {                                      \
      return rt::DoAlloc(api_##fn, out, size, kind, [&] { return real(PROFAGENT_ARGS args); }); \
    }, PROFAGENT_ARGS args);                                                                 \
  }

#define PROFAGENT_FREE_HOOK(fn, params, args, ptr, kind, stream)                              \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::InterceptMem(real_##fn, [&](auto real) {                                      \
      return rt::DoFree(api_##fn, ptr, kind, stream, [&] { return real(PROFAGENT_ARGS args); }); \
    }, PROFAGENT_ARGS args);                                                                 \
  }

// A host synchronization of `stream` (also a step boundary under PROFAGENT_STEP_RULE=sync).
#define PROFAGENT_STREAM_SYNC_HOOK(fn, stream_expr)                                            \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(cudaStream_t stream) {                                               \
    return rt::InterceptStep(                                                                \
        real_##fn,                                                                           \
        [&](auto real) {                                                                     \
          return rt::DoGeneric(api_##fn, EvType::kSync, rt::U64(stream_expr), 0,             \
                               [&] { return real(stream); });                                \
        },                                                                                   \
        [&](uint64_t t0, uint64_t t1) {                                                      \
          profagent::model::OnHostSync(t0, t1, rt::U64(stream_expr));                        \
        },                                                                                   \
        stream);                                                                             \
  }

// Synchronous copies and sets on the per-thread default stream.
PROFAGENT_MEM_HOOK(cudaMemcpy_ptds, (void* dst, const void* src, size_t n, cudaMemcpyKind k),
                   (dst, src, n, k), EvType::kMemcpy, n, rt::ResolvedCopyKind(k, dst, src), dst,
                   cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2D_ptds,
                   (void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h,
                    cudaMemcpyKind k),
                   (dst, dp, src, sp, w, h, k), EvType::kMemcpy, uint64_t(w) * h,
                   rt::ResolvedCopyKind(k, dst, src), dst, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemset_ptds, (void* p, int v, size_t n), (p, v, n), EvType::kMemset, n, 0,
                   p, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemset2D_ptds, (void* p, size_t pitch, int v, size_t w, size_t h),
                   (p, pitch, v, w, h), EvType::kMemset, uint64_t(w) * h, 0, p,
                   cudaStreamPerThread, true)
// Asynchronous 2D copies and sets on a stream whose 0 is the per-thread default stream.
PROFAGENT_MEM_HOOK(cudaMemcpy2DAsync_ptsz,
                   (void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h,
                    cudaMemcpyKind k, cudaStream_t s),
                   (dst, dp, src, sp, w, h, k, s), EvType::kMemcpy, uint64_t(w) * h,
                   rt::ResolvedCopyKind(k, dst, src), dst, rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemset2DAsync_ptsz,
                   (void* p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s),
                   (p, pitch, v, w, h, s), EvType::kMemset, uint64_t(w) * h, 0, p, rt::Pt(s),
                   false)
// 3D copies and sets: bytes = the extent's width x height x depth; the width is in bytes for
// linear memory, in elements when a CUDA array takes part (the array's element size, asked of the
// runtime; 1 if it cannot tell).
namespace profagent {
namespace rt {
inline uint64_t ExtentBytes(const cudaExtent& e) { return uint64_t(e.width) * e.height * e.depth; }
template <typename Parms>
inline uint64_t Bytes3D(const Parms* p) {
  if (p == nullptr) return 0;
  cudaArray_const_t array = p->srcArray != nullptr ? p->srcArray : p->dstArray;
  const uint32_t element = array != nullptr ? ArrayElementBytes(array) : 1;
  return ExtentBytes(p->extent) * (element != 0 ? element : 1);
}
inline uint32_t Kind3D(const cudaMemcpy3DParms* p) { return p ? uint32_t(p->kind) : 0; }
inline void* Dst3D(const cudaMemcpy3DParms* p) { return p ? p->dstPtr.ptr : nullptr; }
inline void* Dst3D(const cudaMemcpy3DPeerParms* p) { return p ? p->dstPtr.ptr : nullptr; }
}  // namespace rt
}  // namespace profagent
PROFAGENT_MEM_HOOK(cudaMemcpy3D, (const cudaMemcpy3DParms* p), (p), EvType::kMemcpy,
                   rt::Bytes3D(p), rt::Kind3D(p), rt::Dst3D(p), nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpy3D_ptds, (const cudaMemcpy3DParms* p), (p), EvType::kMemcpy,
                   rt::Bytes3D(p), rt::Kind3D(p), rt::Dst3D(p), cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpy3DAsync, (const cudaMemcpy3DParms* p, cudaStream_t s), (p, s),
                   EvType::kMemcpy, rt::Bytes3D(p), rt::Kind3D(p), rt::Dst3D(p), s, false)
PROFAGENT_MEM_HOOK(cudaMemcpy3DAsync_ptsz, (const cudaMemcpy3DParms* p, cudaStream_t s), (p, s),
                   EvType::kMemcpy, rt::Bytes3D(p), rt::Kind3D(p), rt::Dst3D(p), rt::Pt(s),
                   false)
PROFAGENT_MEM_HOOK(cudaMemcpy3DPeer, (const cudaMemcpy3DPeerParms* p), (p), EvType::kMemcpy,
                   rt::Bytes3D(p), cudaMemcpyDeviceToDevice, rt::Dst3D(p), nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpy3DPeer_ptds, (const cudaMemcpy3DPeerParms* p), (p), EvType::kMemcpy,
                   rt::Bytes3D(p), cudaMemcpyDeviceToDevice, rt::Dst3D(p), cudaStreamPerThread,
                   true)
PROFAGENT_MEM_HOOK(cudaMemcpy3DPeerAsync, (const cudaMemcpy3DPeerParms* p, cudaStream_t s),
                   (p, s), EvType::kMemcpy, rt::Bytes3D(p), cudaMemcpyDeviceToDevice,
                   rt::Dst3D(p), s, false)
PROFAGENT_MEM_HOOK(cudaMemcpy3DPeerAsync_ptsz, (const cudaMemcpy3DPeerParms* p, cudaStream_t s),
                   (p, s), EvType::kMemcpy, rt::Bytes3D(p), cudaMemcpyDeviceToDevice,
                   rt::Dst3D(p), rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemset3D, (cudaPitchedPtr p, int v, cudaExtent e), (p, v, e),
                   EvType::kMemset, rt::ExtentBytes(e), 0, p.ptr, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemset3D_ptds, (cudaPitchedPtr p, int v, cudaExtent e), (p, v, e),
                   EvType::kMemset, rt::ExtentBytes(e), 0, p.ptr, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemset3DAsync, (cudaPitchedPtr p, int v, cudaExtent e, cudaStream_t s),
                   (p, v, e, s), EvType::kMemset, rt::ExtentBytes(e), 0, p.ptr, s, false)
PROFAGENT_MEM_HOOK(cudaMemset3DAsync_ptsz,
                   (cudaPitchedPtr p, int v, cudaExtent e, cudaStream_t s), (p, v, e, s),
                   EvType::kMemset, rt::ExtentBytes(e), 0, p.ptr, rt::Pt(s), false)
// Copies to and from __device__ variables (the symbol is its host shadow's address).
PROFAGENT_MEM_HOOK(cudaMemcpyToSymbol,
                   (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k),
                   (sym, src, n, off, k), EvType::kMemcpy, n, k, sym, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpyToSymbol_ptds,
                   (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k),
                   (sym, src, n, off, k), EvType::kMemcpy, n, k, sym, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpyFromSymbol,
                   (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k),
                   (dst, sym, n, off, k), EvType::kMemcpy, n, k, dst, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpyFromSymbol_ptds,
                   (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k),
                   (dst, sym, n, off, k), EvType::kMemcpy, n, k, dst, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpyToSymbolAsync,
                   (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k,
                    cudaStream_t s),
                   (sym, src, n, off, k, s), EvType::kMemcpy, n, k, sym, s, false)
PROFAGENT_MEM_HOOK(cudaMemcpyToSymbolAsync_ptsz,
                   (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k,
                    cudaStream_t s),
                   (sym, src, n, off, k, s), EvType::kMemcpy, n, k, sym, rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemcpyFromSymbolAsync,
                   (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k,
                    cudaStream_t s),
                   (dst, sym, n, off, k, s), EvType::kMemcpy, n, k, dst, s, false)
PROFAGENT_MEM_HOOK(cudaMemcpyFromSymbolAsync_ptsz,
                   (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k,
                    cudaStream_t s),
                   (dst, sym, n, off, k, s), EvType::kMemcpy, n, k, dst, rt::Pt(s), false)

// ---- CUDA arrays -------------------------------------------------------------------------------
// Copies to, from and between arrays (texture/surface memory): bytes = width (bytes) x height, or
// the count of the 1D forms; the array handle stands for the device address.
PROFAGENT_MEM_HOOK(cudaMemcpy2DToArray,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t sp, size_t w,
                    size_t h, cudaMemcpyKind k),
                   (dst, wo, ho, src, sp, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2DToArray_ptds,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t sp, size_t w,
                    size_t h, cudaMemcpyKind k),
                   (dst, wo, ho, src, sp, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2DToArrayAsync,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t sp, size_t w,
                    size_t h, cudaMemcpyKind k, cudaStream_t s),
                   (dst, wo, ho, src, sp, w, h, k, s), EvType::kMemcpy, uint64_t(w) * h, k, dst, s,
                   false)
PROFAGENT_MEM_HOOK(cudaMemcpy2DToArrayAsync_ptsz,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t sp, size_t w,
                    size_t h, cudaMemcpyKind k, cudaStream_t s),
                   (dst, wo, ho, src, sp, w, h, k, s), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemcpy2DFromArray,
                   (void* dst, size_t dp, cudaArray_const_t src, size_t wo, size_t ho, size_t w,
                    size_t h, cudaMemcpyKind k),
                   (dst, dp, src, wo, ho, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2DFromArray_ptds,
                   (void* dst, size_t dp, cudaArray_const_t src, size_t wo, size_t ho, size_t w,
                    size_t h, cudaMemcpyKind k),
                   (dst, dp, src, wo, ho, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2DFromArrayAsync,
                   (void* dst, size_t dp, cudaArray_const_t src, size_t wo, size_t ho, size_t w,
                    size_t h, cudaMemcpyKind k, cudaStream_t s),
                   (dst, dp, src, wo, ho, w, h, k, s), EvType::kMemcpy, uint64_t(w) * h, k, dst, s,
                   false)
PROFAGENT_MEM_HOOK(cudaMemcpy2DFromArrayAsync_ptsz,
                   (void* dst, size_t dp, cudaArray_const_t src, size_t wo, size_t ho, size_t w,
                    size_t h, cudaMemcpyKind k, cudaStream_t s),
                   (dst, dp, src, wo, ho, w, h, k, s), EvType::kMemcpy, uint64_t(w) * h, k, dst,
                   rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemcpy2DArrayToArray,
                   (cudaArray_t dst, size_t dwo, size_t dho, cudaArray_const_t src, size_t swo,
                    size_t sho, size_t w, size_t h, cudaMemcpyKind k),
                   (dst, dwo, dho, src, swo, sho, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k,
                   dst, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpy2DArrayToArray_ptds,
                   (cudaArray_t dst, size_t dwo, size_t dho, cudaArray_const_t src, size_t swo,
                    size_t sho, size_t w, size_t h, cudaMemcpyKind k),
                   (dst, dwo, dho, src, swo, sho, w, h, k), EvType::kMemcpy, uint64_t(w) * h, k,
                   dst, cudaStreamPerThread, true)
// The 1D forms (deprecated since CUDA 10.1, still exported).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PROFAGENT_MEM_HOOK(cudaMemcpyToArray,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t n,
                    cudaMemcpyKind k),
                   (dst, wo, ho, src, n, k), EvType::kMemcpy, n, k, dst, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpyToArray_ptds,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t n,
                    cudaMemcpyKind k),
                   (dst, wo, ho, src, n, k), EvType::kMemcpy, n, k, dst, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpyToArrayAsync,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t n,
                    cudaMemcpyKind k, cudaStream_t s),
                   (dst, wo, ho, src, n, k, s), EvType::kMemcpy, n, k, dst, s, false)
PROFAGENT_MEM_HOOK(cudaMemcpyToArrayAsync_ptsz,
                   (cudaArray_t dst, size_t wo, size_t ho, const void* src, size_t n,
                    cudaMemcpyKind k, cudaStream_t s),
                   (dst, wo, ho, src, n, k, s), EvType::kMemcpy, n, k, dst, rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemcpyFromArray,
                   (void* dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n,
                    cudaMemcpyKind k),
                   (dst, src, wo, ho, n, k), EvType::kMemcpy, n, k, dst, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpyFromArray_ptds,
                   (void* dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n,
                    cudaMemcpyKind k),
                   (dst, src, wo, ho, n, k), EvType::kMemcpy, n, k, dst, cudaStreamPerThread, true)
PROFAGENT_MEM_HOOK(cudaMemcpyFromArrayAsync,
                   (void* dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n,
                    cudaMemcpyKind k, cudaStream_t s),
                   (dst, src, wo, ho, n, k, s), EvType::kMemcpy, n, k, dst, s, false)
PROFAGENT_MEM_HOOK(cudaMemcpyFromArrayAsync_ptsz,
                   (void* dst, cudaArray_const_t src, size_t wo, size_t ho, size_t n,
                    cudaMemcpyKind k, cudaStream_t s),
                   (dst, src, wo, ho, n, k, s), EvType::kMemcpy, n, k, dst, rt::Pt(s), false)
PROFAGENT_MEM_HOOK(cudaMemcpyArrayToArray,
                   (cudaArray_t dst, size_t dwo, size_t dho, cudaArray_const_t src, size_t swo,
                    size_t sho, size_t n, cudaMemcpyKind k),
                   (dst, dwo, dho, src, swo, sho, n, k), EvType::kMemcpy, n, k, dst, nullptr, true)
PROFAGENT_MEM_HOOK(cudaMemcpyArrayToArray_ptds,
                   (cudaArray_t dst, size_t dwo, size_t dho, cudaArray_const_t src, size_t swo,
                    size_t sho, size_t n, cudaMemcpyKind k),
                   (dst, dwo, dho, src, swo, sho, n, k), EvType::kMemcpy, n, k, dst,
                   cudaStreamPerThread, true)
#pragma GCC diagnostic pop

// Array allocations: device memory of elements x the channel format's size (mem_sizes.h).
PROFAGENT_ALLOC_HOOK(cudaMallocArray,
                     (cudaArray_t* a, const cudaChannelFormatDesc* desc, size_t w, size_t h,
                      unsigned int flags),
                     (a, desc, w, h, flags), reinterpret_cast<void**>(a),
                     profagent::ArrayBytes(desc, cudaExtent{w, h, 0}, 1, flags), rt::kMemDevice)
PROFAGENT_ALLOC_HOOK(cudaMalloc3DArray,
                     (cudaArray_t* a, const cudaChannelFormatDesc* desc, cudaExtent e,
                      unsigned int flags),
                     (a, desc, e, flags), reinterpret_cast<void**>(a),
                     profagent::ArrayBytes(desc, e, 1, flags), rt::kMemDevice)
PROFAGENT_ALLOC_HOOK(cudaMallocMipmappedArray,
                     (cudaMipmappedArray_t* a, const cudaChannelFormatDesc* desc, cudaExtent e,
                      unsigned int levels, unsigned int flags),
                     (a, desc, e, levels, flags), reinterpret_cast<void**>(a),
                     profagent::ArrayBytes(desc, e, levels, flags), rt::kMemDevice)
PROFAGENT_FREE_HOOK(cudaFreeArray, (cudaArray_t a), (a), a, rt::kMemDevice, nullptr)
PROFAGENT_FREE_HOOK(cudaFreeMipmappedArray, (cudaMipmappedArray_t a), (a), a, rt::kMemDevice,
                    nullptr)

// ---- Batch copies (CUDA 12.8) ------------------------------------------------------------------
// One call, several copies: one event with their total bytes, kind cudaMemcpyDefault (the runtime
// works out each copy's direction). Under CUPTI each copy has a device record of its own, all with
// the call's correlation id; CUDA-event timing times the batch as one op.
//
// CUDA 13 dropped the `failIdx` argument CUDA 12.8/12.9 had before the stream (2D) or the flags
// (3D). A program built for libcudart.so.12 calls with it: these interposers take the longer
// argument list and forward every argument as received, so each runtime reads its own (a CUDA 13
// caller leaves the last one undefined, which its runtime never reads); the stream recorded is
// the one where the runtime forwarded to finds it.
namespace profagent {
namespace rt {
// Whether `fn` is libcudart.so.12's (the 12.8 argument lists). Once per interposer.
inline bool Cudart12(std::atomic<int>* cache, void* fn) {
  int v = cache->load(std::memory_order_relaxed);
  if (v == 0) {
    Dl_info info;
    v = dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libcudart.so.12") ? 2 : 1;
    cache->store(v, std::memory_order_relaxed);
  }
  return v == 2;
}
inline const void* Batch3DDst(const cudaMemcpy3DBatchOp* ops, size_t count) {
  if (ops == nullptr || count == 0) return nullptr;
  return ops[0].dst.type == cudaMemcpyOperandTypeArray
             ? static_cast<const void*>(ops[0].dst.op.array.array)
             : ops[0].dst.op.ptr.ptr;
}
}  // namespace rt
}  // namespace profagent

// The interposers' (longer) argument lists.
using BatchCopyFn = cudaError_t (*)(void* const*, const void* const*, const size_t*, size_t,
                                    cudaMemcpyAttributes*, size_t*, size_t, void*, void*);
using Batch3DCopyFn = cudaError_t (*)(size_t, cudaMemcpy3DBatchOp*, void*, void*, void*);

#define PROFAGENT_BATCH_HOOK(fn, c_name, stream_of)                                              \
  static rt::Real<BatchCopyFn> real_##fn(#fn);                                                   \
  static const uint16_t api_##fn = RegisterApi(#fn);                                             \
  static std::atomic<int> abi_##fn{0};                                                           \
  extern "C" __attribute__((visibility("default"))) cudaError_t c_name(                          \
      void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,             \
      cudaMemcpyAttributes* attrs, size_t* idxs, size_t num_attrs, void* a7,                     \
      void* a8) __asm__(#fn);                                                                    \
  cudaError_t c_name(void* const* dsts, const void* const* srcs, const size_t* sizes,            \
                     size_t count, cudaMemcpyAttributes* attrs, size_t* idxs, size_t num_attrs,  \
                     void* a7, void* a8) {                                                       \
    return rt::Intercept(                                                                        \
        real_##fn,                                                                               \
        [&](auto real) {                                                                         \
          const bool v12 = rt::Cudart12(&abi_##fn, reinterpret_cast<void*>(real));               \
          return rt::DoMem(                                                                      \
              api_##fn, EvType::kMemcpy, profagent::BatchBytes(sizes, count), cudaMemcpyDefault, \
              dsts != nullptr && count > 0 ? dsts[0] : nullptr,                                  \
              stream_of(static_cast<cudaStream_t>(v12 ? a8 : a7)), false,                        \
              [&] { return real(dsts, srcs, sizes, count, attrs, idxs, num_attrs, a7, a8); });   \
        },                                                                                       \
        dsts, srcs, sizes, count, attrs, idxs, num_attrs, a7, a8);                               \
  }

#define PROFAGENT_BATCH3D_HOOK(fn, c_name, stream_of)                                        \
  static rt::Real<Batch3DCopyFn> real_##fn(#fn);                                             \
  static const uint16_t api_##fn = RegisterApi(#fn);                                         \
  static std::atomic<int> abi_##fn{0};                                                       \
  extern "C" __attribute__((visibility("default"))) cudaError_t c_name(                      \
      size_t count, cudaMemcpy3DBatchOp* ops, void* a2, void* a3, void* a4) __asm__(#fn);    \
  cudaError_t c_name(size_t count, cudaMemcpy3DBatchOp* ops, void* a2, void* a3, void* a4) { \
    return rt::Intercept(                                                                    \
        real_##fn,                                                                           \
        [&](auto real) {                                                                     \
          const bool v12 = rt::Cudart12(&abi_##fn, reinterpret_cast<void*>(real));           \
          return rt::DoMem(api_##fn, EvType::kMemcpy,                                        \
                           profagent::Batch3DBytes(ops, count, rt::ArrayElementBytes),       \
                           cudaMemcpyDefault, rt::Batch3DDst(ops, count),                    \
                           stream_of(static_cast<cudaStream_t>(v12 ? a4 : a3)), false,       \
                           [&] { return real(count, ops, a2, a3, a4); });                    \
        },                                                                                   \
        count, ops, a2, a3, a4);                                                             \
  }

#define PROFAGENT_SAME_STREAM(s) (s)
PROFAGENT_BATCH_HOOK(cudaMemcpyBatchAsync, profagent_cudaMemcpyBatchAsync, PROFAGENT_SAME_STREAM)
PROFAGENT_BATCH_HOOK(cudaMemcpyBatchAsync_ptsz, profagent_cudaMemcpyBatchAsync_ptsz, rt::Pt)
PROFAGENT_BATCH3D_HOOK(cudaMemcpy3DBatchAsync, profagent_cudaMemcpy3DBatchAsync,
                       PROFAGENT_SAME_STREAM)
PROFAGENT_BATCH3D_HOOK(cudaMemcpy3DBatchAsync_ptsz, profagent_cudaMemcpy3DBatchAsync_ptsz, rt::Pt)
#undef PROFAGENT_SAME_STREAM

// Allocation: stream-ordered (per-thread default stream, pools), pitched, registered host memory.
#define PROFAGENT_ASYNC_ALLOC_HOOK(fn, params, args, out, size, stream, pool)                  \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::InterceptMem(real_##fn, [&](auto real) {                                      \
      return rt::DoAsyncAlloc(api_##fn, out, size, stream, pool,                             \
                              [&] { return real(PROFAGENT_ARGS args); });                    \
    }, PROFAGENT_ARGS args);                                                                 \
  }
PROFAGENT_ASYNC_ALLOC_HOOK(cudaMallocAsync_ptsz, (void** p, size_t n, cudaStream_t s), (p, n, s),
                           p, n, s, nullptr)
PROFAGENT_ASYNC_ALLOC_HOOK(cudaMallocFromPoolAsync,
                           (void** p, size_t n, cudaMemPool_t pool, cudaStream_t s),
                           (p, n, pool, s), p, n, s, pool)
PROFAGENT_ASYNC_ALLOC_HOOK(cudaMallocFromPoolAsync_ptsz,
                           (void** p, size_t n, cudaMemPool_t pool, cudaStream_t s),
                           (p, n, pool, s), p, n, s, pool)
#undef PROFAGENT_ASYNC_ALLOC_HOOK

// Pools: not recorded as calls; their locations are noted (AsyncAllocLocation) whatever the
// schedule, so that a pool obtained while recording was paused is still known.
#define PROFAGENT_POOL_HOOK(fn, params, args, pool, kind, device)                              \
  static rt::Real<decltype(&fn)> real_##fn(#fn);                                             \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    auto real = real_##fn.get();                                                             \
    if (real == nullptr) return rt::kNoReal;                                                 \
    const cudaError_t r = real(PROFAGENT_ARGS args);                                         \
    if (r == cudaSuccess && (pool) != nullptr) rt::NotePool(*(pool), kind, device);           \
    return r;                                                                                \
  }
PROFAGENT_POOL_HOOK(cudaDeviceGetDefaultMemPool, (cudaMemPool_t* pool, int device),
                    (pool, device), pool, rt::kMemAsync, device)
PROFAGENT_POOL_HOOK(cudaDeviceGetMemPool, (cudaMemPool_t* pool, int device), (pool, device),
                    pool, rt::kMemAsync, device)
PROFAGENT_POOL_HOOK(cudaMemPoolCreate, (cudaMemPool_t* pool, const cudaMemPoolProps* props),
                    (pool, props), pool, rt::PoolKind(props), rt::PoolDevice(props))
// CUDA 13's pools of a location (a device, the host, a host NUMA node) and allocation type.
PROFAGENT_POOL_HOOK(cudaMemGetDefaultMemPool,
                    (cudaMemPool_t * pool, cudaMemLocation* location, cudaMemAllocationType type),
                    (pool, location, type), pool, rt::LocationKind(location, type),
                    rt::LocationDevice(location))
PROFAGENT_POOL_HOOK(cudaMemGetMemPool,
                    (cudaMemPool_t * pool, cudaMemLocation* location, cudaMemAllocationType type),
                    (pool, location, type), pool, rt::LocationKind(location, type),
                    rt::LocationDevice(location))
#undef PROFAGENT_POOL_HOOK
static rt::Real<decltype(&cudaMemPoolDestroy)> real_cudaMemPoolDestroy("cudaMemPoolDestroy");
EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  auto real = real_cudaMemPoolDestroy.get();
  if (real == nullptr) return rt::kNoReal;
  const cudaError_t r = real(pool);
  if (r == cudaSuccess) rt::ForgetPool(pool);
  return r;
}
PROFAGENT_FREE_HOOK(cudaFreeAsync_ptsz, (void* p, cudaStream_t s), (p, s), p, rt::kMemAsync,
                    rt::Pt(s))
// Registered host memory counts as pinned host memory (not in the device memory counter).
PROFAGENT_ALLOC_HOOK(cudaHostRegister, (void* p, size_t n, unsigned int flags), (p, n, flags),
                     &p, n, rt::kMemPinned)
PROFAGENT_FREE_HOOK(cudaHostUnregister, (void* p), (p), p, rt::kMemPinned, nullptr)

DEFINE_REAL(cudaMallocPitch)
EXPORT cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  return rt::InterceptMem(real_cudaMallocPitch, [&](auto real) {
    return rt::DoAllocSized(
        api_cudaMallocPitch, p,
        [&](cudaError_t r) {  // the pitch the runtime chose, times the rows
          return (r == cudaSuccess && pitch != nullptr ? uint64_t(*pitch) : uint64_t(width)) *
                 height;
        },
        rt::kMemDevice, [&] { return real(p, pitch, width, height); });
  }, p, pitch, width, height);
}

// A pitched 3D allocation: the pitch the runtime chose, times height x depth rows.
DEFINE_REAL(cudaMalloc3D)
EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* p, cudaExtent extent) {
  void* ptr = nullptr;
  return rt::InterceptMem(real_cudaMalloc3D, [&](auto real) {
    return rt::DoAllocSized(
        api_cudaMalloc3D, &ptr,
        [&](cudaError_t r) {
          const uint64_t rows = uint64_t(extent.height) * extent.depth;
          return (r == cudaSuccess && p != nullptr ? uint64_t(p->pitch) : uint64_t(extent.width)) *
                 rows;
        },
        rt::kMemDevice, [&] {
          cudaError_t r = real(p, extent);
          if (r == cudaSuccess && p != nullptr) ptr = p->ptr;
          return r;
        });
  }, p, extent);
}

// Synchronization on the per-thread default stream, event records.
PROFAGENT_STREAM_SYNC_HOOK(cudaStreamSynchronize_ptsz, rt::Pt(stream))
PROFAGENT_GENERIC_HOOK(cudaStreamWaitEvent_ptsz,
                       (cudaStream_t s, cudaEvent_t ev, unsigned int flags), (s, ev, flags),
                       EvType::kSync, rt::Pt(s), ev)
PROFAGENT_GENERIC_HOOK(cudaEventRecord_ptsz, (cudaEvent_t ev, cudaStream_t s), (ev, s),
                       EvType::kEvent, ev, rt::Pt(s))
PROFAGENT_GENERIC_HOOK(cudaEventRecordWithFlags,
                       (cudaEvent_t ev, cudaStream_t s, unsigned int flags), (ev, s, flags),
                       EvType::kEvent, ev, s)
PROFAGENT_GENERIC_HOOK(cudaEventRecordWithFlags_ptsz,
                       (cudaEvent_t ev, cudaStream_t s, unsigned int flags), (ev, s, flags),
                       EvType::kEvent, ev, rt::Pt(s))
// Polls: host API time (an engine spinning on cudaEventQuery shows here), runs coalesced.
#define PROFAGENT_POLL_HOOK(fn, params, args, a, b)                                          \
  DEFINE_REAL(fn)                                                                            \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                             \
    return rt::Intercept(real_##fn, [&](auto real) {                                         \
      return rt::DoPoll(api_##fn, rt::U64(a), rt::U64(b),                                    \
                        [&] { return real(PROFAGENT_ARGS args); });                          \
    }, PROFAGENT_ARGS args);                                                                 \
  }
PROFAGENT_POLL_HOOK(cudaStreamQuery, (cudaStream_t s), (s), s, 0)
PROFAGENT_POLL_HOOK(cudaStreamQuery_ptsz, (cudaStream_t s), (s), rt::Pt(s), 0)
PROFAGENT_POLL_HOOK(cudaEventQuery, (cudaEvent_t ev), (ev), 0, ev)
// Host functions enqueued on a stream.
PROFAGENT_GENERIC_HOOK(cudaLaunchHostFunc, (cudaStream_t s, cudaHostFn_t fn, void* data),
                       (s, fn, data), EvType::kApi, s, 0)
PROFAGENT_GENERIC_HOOK(cudaLaunchHostFunc_ptsz, (cudaStream_t s, cudaHostFn_t fn, void* data),
                       (s, fn, data), EvType::kApi, rt::Pt(s), 0)
PROFAGENT_GENERIC_HOOK(cudaStreamAddCallback,
                       (cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned int flags),
                       (s, cb, data, flags), EvType::kApi, s, 0)
PROFAGENT_GENERIC_HOOK(cudaStreamAddCallback_ptsz,
                       (cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned int flags),
                       (s, cb, data, flags), EvType::kApi, rt::Pt(s), 0)
// The capture range (PROFAGENT_CAPTURE=cudaProfilerApi, like nsys --capture-range): recording
// starts at cudaProfilerStart and pauses at cudaProfilerStop, as many times as the application
// calls them. The calls are recorded (Start after the range opens, Stop before it closes), so
// the trace shows where the range begins and ends. Whatever the runtime returns (an error
// without a GPU), the range follows the application's intent.
DEFINE_REAL(cudaProfilerStart)
EXPORT cudaError_t cudaProfilerStart(void) {
  {
    HookGuard guard;
    if (guard.outermost()) profagent::SetCaptureRangeActive(true);
  }
  return rt::Intercept(real_cudaProfilerStart, [&](auto real) {
    return rt::DoGeneric(api_cudaProfilerStart, EvType::kApi, 0, 0, [&] { return real(); });
  });
}

DEFINE_REAL(cudaProfilerStop)
EXPORT cudaError_t cudaProfilerStop(void) {
  cudaError_t r = rt::Intercept(real_cudaProfilerStop, [&](auto real) {
    return rt::DoGeneric(api_cudaProfilerStop, EvType::kApi, 0, 0, [&] { return real(); });
  });
  HookGuard guard;
  if (guard.outermost()) profagent::SetCaptureRangeActive(false);
  return r;
}

// Stream capture and graph set-up (host time; a graph's kernels are recorded at its launch).
// The capture state is tracked whether or not recording is on (agent/core/capture.h).
// Stream capture: the record names the stream and, for cudaStreamEndCapture, the graph it made
// (`made`: evaluated after a successful call), so that the analyzer can find the captured work
// at the graph's launches.
#define PROFAGENT_CAPTURE_HOOK(fn, params, args, stream_expr, begin, made)                    \
  DEFINE_REAL(fn)                                                                             \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                              \
    cudaError_t r = rt::Intercept(                                                            \
        real_##fn,                                                                            \
        [&](auto real) {                                                                      \
          return rt::DoGenericMade(                                                           \
              api_##fn, [&] { return real(PROFAGENT_ARGS args); },                            \
              [&](cudaError_t rc, profagent::RawEvent* e) {                                   \
                e->gen.a = rt::U64(stream_expr);                                              \
                e->gen.b = rc == cudaSuccess ? uint64_t(made) : 0;                            \
              });                                                                             \
        },                                                                                    \
        PROFAGENT_ARGS args);                                                                 \
    HookGuard guard;                                                                          \
    if (guard.outermost()) profagent::cupti::NoteCaptureCall(rt::U64(stream_expr), begin, r); \
    return r;                                                                                 \
  }
PROFAGENT_CAPTURE_HOOK(cudaStreamBeginCapture, (cudaStream_t s, cudaStreamCaptureMode mode),
                       (s, mode), s, true, 0)
PROFAGENT_CAPTURE_HOOK(cudaStreamBeginCapture_ptsz, (cudaStream_t s, cudaStreamCaptureMode mode),
                       (s, mode), rt::Pt(s), true, 0)
PROFAGENT_CAPTURE_HOOK(cudaStreamBeginCaptureToGraph,
                       (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t* deps,
                        const cudaGraphEdgeData* edges, size_t n, cudaStreamCaptureMode mode),
                       (s, g, deps, edges, n, mode), s, true, 0)
PROFAGENT_CAPTURE_HOOK(cudaStreamBeginCaptureToGraph_ptsz,
                       (cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t* deps,
                        const cudaGraphEdgeData* edges, size_t n, cudaStreamCaptureMode mode),
                       (s, g, deps, edges, n, mode), rt::Pt(s), true, 0)
PROFAGENT_CAPTURE_HOOK(cudaStreamEndCapture, (cudaStream_t s, cudaGraph_t* g), (s, g), s, false,
                       g != nullptr ? rt::U64(*g) : 0)
PROFAGENT_CAPTURE_HOOK(cudaStreamEndCapture_ptsz, (cudaStream_t s, cudaGraph_t* g), (s, g),
                       rt::Pt(s), false, g != nullptr ? rt::U64(*g) : 0)
// Graph making, instantiation and upkeep between launches (a llama.cpp-style loop re-captures
// and updates its exec every token): host time the report must show. The record names the exec
// or graph made or worked on and, for an instantiation, an update or a clone, the graph it
// follows (Event.source_graph, event.h), so captured NCCL calls stay tied to the exec that runs
// them.
#define PROFAGENT_GRAPH_HOOK(fn, params, args, made_expr, source_expr, with_source) \
  DEFINE_REAL(fn)                                                                   \
  EXPORT cudaError_t fn(PROFAGENT_ARGS params) {                                    \
    return rt::Intercept(                                                           \
        real_##fn,                                                                  \
        [&](auto real) {                                                            \
          return rt::DoGenericMade(                                                 \
              api_##fn, [&] { return real(PROFAGENT_ARGS args); },                  \
              [&](cudaError_t rc, profagent::RawEvent* ev) {                        \
                (void)rc;                                                           \
                ev->gen.b = rt::U64(made_expr);                                     \
                if (with_source) {                                                  \
                  ev->gen.c = rt::U64(source_expr);                                 \
                  ev->flags |= profagent::kFlagHasPayload;                          \
                }                                                                   \
              });                                                                   \
        },                                                                          \
        PROFAGENT_ARGS args);                                                       \
  }
#define PROFAGENT_INSTANTIATE_HOOK(fn, params, args) \
  PROFAGENT_GRAPH_HOOK(fn, params, args, rc == cudaSuccess && e != nullptr ? *e : nullptr, g, true)
PROFAGENT_INSTANTIATE_HOOK(cudaGraphInstantiate,
                           (cudaGraphExec_t* e, cudaGraph_t g, unsigned long long flags),
                           (e, g, flags))
PROFAGENT_INSTANTIATE_HOOK(cudaGraphInstantiateWithFlags,
                           (cudaGraphExec_t* e, cudaGraph_t g, unsigned long long flags),
                           (e, g, flags))
PROFAGENT_INSTANTIATE_HOOK(cudaGraphInstantiateWithParams,
                           (cudaGraphExec_t* e, cudaGraph_t g, cudaGraphInstantiateParams* prm),
                           (e, g, prm))
PROFAGENT_INSTANTIATE_HOOK(cudaGraphInstantiateWithParams_ptsz,
                           (cudaGraphExec_t* e, cudaGraph_t g, cudaGraphInstantiateParams* prm),
                           (e, g, prm))
#undef PROFAGENT_INSTANTIATE_HOOK
PROFAGENT_GRAPH_HOOK(cudaGraphExecUpdate,
                     (cudaGraphExec_t e, cudaGraph_t g, cudaGraphExecUpdateResultInfo* info),
                     (e, g, info), e, g, true)
PROFAGENT_GRAPH_HOOK(cudaGraphClone, (cudaGraph_t * clone, cudaGraph_t g), (clone, g),
                     rc == cudaSuccess && clone != nullptr ? *clone : nullptr, g, true)
PROFAGENT_GRAPH_HOOK(cudaGraphCreate, (cudaGraph_t * g, unsigned int flags), (g, flags),
                     rc == cudaSuccess && g != nullptr ? *g : nullptr, nullptr, false)
PROFAGENT_GRAPH_HOOK(cudaGraphExecDestroy, (cudaGraphExec_t e), (e), e, nullptr, false)
PROFAGENT_GRAPH_HOOK(cudaGraphDestroy, (cudaGraph_t g), (g), g, nullptr, false)
PROFAGENT_GRAPH_HOOK(cudaGraphExecKernelNodeSetParams,
                     (cudaGraphExec_t e, cudaGraphNode_t n, const cudaKernelNodeParams* prm),
                     (e, n, prm), e, nullptr, false)
PROFAGENT_GRAPH_HOOK(cudaGraphExecNodeSetParams,
                     (cudaGraphExec_t e, cudaGraphNode_t n, cudaGraphNodeParams* prm), (e, n, prm),
                     e, nullptr, false)
#undef PROFAGENT_GRAPH_HOOK
PROFAGENT_GENERIC_HOOK(cudaGraphUpload, (cudaGraphExec_t e, cudaStream_t s), (e, s),
                       EvType::kApi, s, e)
PROFAGENT_GENERIC_HOOK(cudaGraphUpload_ptsz, (cudaGraphExec_t e, cudaStream_t s), (e, s),
                       EvType::kApi, rt::Pt(s), e)
// Unified-memory prefetch (migrations are not device ops of this profile).
PROFAGENT_GENERIC_HOOK(cudaMemPrefetchAsync,
                       (const void* p, size_t n, cudaMemLocation loc, unsigned int flags,
                        cudaStream_t s),
                       (p, n, loc, flags, s), EvType::kApi, s, p)
PROFAGENT_GENERIC_HOOK(cudaMemPrefetchAsync_ptsz,
                       (const void* p, size_t n, cudaMemLocation loc, unsigned int flags,
                        cudaStream_t s),
                       (p, n, loc, flags, s), EvType::kApi, rt::Pt(s), p)

// ---- Device selection (tracked for per-device event pools; not recorded) -------------------------
DEFINE_REAL(cudaSetDevice)
EXPORT cudaError_t cudaSetDevice(int device) {
  auto real = real_cudaSetDevice.get();
  if (!real) return rt::kNoReal;
  cudaError_t r = real(device);
  if (r == cudaSuccess) rt::t_device = device;
  return r;
}

// cudaDeviceReset destroys the current device's streams, events and memory. Events mode: the
// device's operations in flight are resolved first and its event pool is made again on next use.
// The device memory the reset releases (device, managed, stream-ordered; not pinned host memory)
// is recorded as freed by it.
DEFINE_REAL(cudaDeviceReset)
EXPORT cudaError_t cudaDeviceReset(void) {
  return rt::InterceptMem(real_cudaDeviceReset, [&](auto real) {
    const int device = rt::t_device;
    const bool events = rt::Mode() == rt::kEvents;
    if (events) rt::EventTimerBeforeReset(device);
    const uint64_t t0 = profagent::Now();
    cudaError_t r = rt::DoGeneric(api_cudaDeviceReset, EvType::kApi, 0, 0, [&] { return real(); });
    const uint64_t t1 = profagent::Now();
    if (events) rt::EventTimerAfterReset(device);
    if (r == cudaSuccess) rt::EmitResetFrees(api_cudaDeviceReset, device, t0, t1);
    return r;
  });
}

// ---- Kernel names for handles the registry does not know ---------------------------------------
namespace profagent {
namespace rt {
namespace {
const char* ResolveFuncName(const void* func) {
  // Writer thread only. Looked up once: a runtime without cudaFuncGetName is not asked again.
  static bool looked_up = false;
  static decltype(&cudaFuncGetName) get_name = nullptr;
  if (!looked_up) {
    looked_up = true;
    get_name = reinterpret_cast<decltype(&cudaFuncGetName)>(ResolveReal("cudaFuncGetName"));
  }
  const char* name = nullptr;
  HookGuard guard;
  if (get_name && get_name(&name, func) == cudaSuccess) return name;
  return nullptr;
}
// Where the device ops of a stream the application named (NVTX) are: the stream's device (of its
// creation, else the current one) and, under CUPTI timing, CUPTI's id of it.
StreamPlace LocateStream(uint64_t handle, uint32_t* device, uint32_t* device_stream) {
  HookGuard guard;
  const uint8_t mode = Mode();
  const int created = CreatedStreamDevice(reinterpret_cast<cudaStream_t>(handle));
  *device = uint32_t(created >= 0 ? created : t_device);
  if (mode != kCupti) return StreamPlace::kFileIndex;
  return cupti::StreamId(handle, device_stream) ? StreamPlace::kDeviceId : StreamPlace::kUnknown;
}
struct InstallResolver {
  InstallResolver() {
    SetFuncNameResolver(ResolveFuncName);
    SetStreamLocator(LocateStream);
  }
} g_install_resolver;
}  // namespace
}  // namespace rt
}  // namespace profagent
