#include "agent/hooks/cuda_runtime/gpu_timing.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sched.h>

#include <mutex>
#include <string>

#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/hooks/cuda_runtime/event_timer.h"
#include "agent/hooks/cuda_runtime/real.h"
#include "agent/hooks/cupti/cupti_tracer.h"

namespace profagent {
namespace rt {
namespace internal {

std::atomic<uint8_t> g_mode{kUndecided};
uint32_t g_stack_every = 0;
uint32_t g_stack_depth = 32;
uint32_t g_launch_api_sample = 1;

namespace {
// 0 undecided, 1 being decided (by one thread), 2 decided.
std::atomic<int> g_state{0};
// Why CUPTI was not used, when the decision fell back from it ("" otherwise). Leaked: read by
// FallBackToHostTiming, which may run during exit.
std::string& CuptiWhy() {
  static auto* s = new std::string();
  return *s;
}

// Whether the application's CUDA runtime calls reach this library's interposers: false when
// the agent was loaded by the driver (CUDA_INJECTION64_PATH) without LD_PRELOAD, where the
// symbol lookup finds the runtime's own functions first.
bool InterposersSeeCalls() {
  Dl_info ours{};
  if (dladdr(reinterpret_cast<const void*>(&InterposersSeeCalls), &ours) == 0) return true;
  // The module the application's lookup finds `name` in is this library (null: not found).
  // The main program's handle searches it, its start-up libraries and RTLD_GLOBAL ones: the
  // application's view (RTLD_DEFAULT from here would search this library's own scope too).
  void* app = dlopen(nullptr, RTLD_NOW);
  if (app == nullptr) return true;
  auto in_agent = [&ours, app](const char* name) {
    void* found = dlsym(app, name);
    Dl_info where{};
    return found != nullptr && dladdr(found, &where) != 0 && where.dli_fbase == ours.dli_fbase;
  };
  // Loaded privately (the driver's dlopen, no LD_PRELOAD): none of this library's symbols is in
  // the global lookup, whatever holds the runtime (a program's link, a ctypes handle of its
  // own). Preloaded: its interposer comes first, before any runtime's.
  const bool seen = in_agent("profagent_init") && in_agent("cudaLaunchKernel");
  dlclose(app);
  return seen;
}

// `from_injection`: inside InitializeInjection (cuInit): no CUDA runtime calls.
void Decide(bool from_injection) {
  HookGuard guard;  // CUDA calls made while deciding are the agent's own
  const Config& cfg = GetConfig();
  g_stack_every = cfg.stack_every;
  g_stack_depth = cfg.stack_depth == 0 ? 1 : (cfg.stack_depth > 128 ? 128 : cfg.stack_depth);
  g_launch_api_sample = cfg.launch_api_sample == 0 ? 1 : cfg.launch_api_sample;
  uint8_t mode = kHost;
  std::string reason;
  // Injected only: CUDA-event and host timing would see no call at all; CUPTI's callbacks see
  // them all, so it is used whatever was asked.
  GpuTimingWanted wanted = cfg.gpu_timing;
  std::string unseen;
  if (from_injection && wanted != GpuTimingWanted::kOff && !InterposersSeeCalls()) {
    unseen =
        "injected through CUDA_INJECTION64_PATH without LD_PRELOAD, the interposers see no "
        "CUDA call";
    if (wanted == GpuTimingWanted::kEvents || wanted == GpuTimingWanted::kHost) {
      wanted = GpuTimingWanted::kCupti;
    }
    // NCCL and MPI calls are seen by interposers only (their kernels are device ops all the
    // same): said, or a report's "no collectives" beside NCCL kernels reads as none made.
    AddNote("warning",
            "injected through CUDA_INJECTION64_PATH without LD_PRELOAD: NCCL and MPI calls are "
            "not recorded (no collectives, waits or stragglers; NCCL kernels are device ops); "
            "preload the agent (LD_PRELOAD) to record them");
  }
  switch (wanted) {
    case GpuTimingWanted::kOff:
      mode = kOff;
      reason = "PROFAGENT_GPU_TIMING=off";
      break;
    case GpuTimingWanted::kHost:
      reason = "PROFAGENT_GPU_TIMING=host";
      break;
    case GpuTimingWanted::kCupti:
    case GpuTimingWanted::kAuto: {
      const void* cudart = ResolveReal("cudaMalloc");
      std::string why;
      if (cupti::StartCupti(cfg.cupti_path, cudart, &why)) {
        mode = kCupti;
        reason = why;
        if (!unseen.empty() && wanted != cfg.gpu_timing) {
          reason += "; " + unseen + ", so CUPTI instead of the PROFAGENT_GPU_TIMING asked";
        }
        break;
      }
      if (!unseen.empty()) {
        reason = why + "; " + unseen + ": no CUDA call or device op is recorded (NVTX only)";
        break;
      }
      if (cfg.gpu_timing == GpuTimingWanted::kCupti) {
        reason = why + "; PROFAGENT_GPU_TIMING=cupti, so host times only";
        break;
      }
      std::string ev;
      CuptiWhy() = why;
      if (StartEventTimer(!from_injection, &ev)) {
        mode = kEvents;
        reason = why + "; using " + ev;
      } else {
        reason = why + "; " + ev + "; host times only";
      }
      break;
    }
    case GpuTimingWanted::kEvents: {
      std::string ev;
      if (StartEventTimer(!from_injection, &ev)) {
        mode = kEvents;
        reason = ev + " (PROFAGENT_GPU_TIMING=events)";
      } else {
        reason = ev + "; host times only";
      }
      break;
    }
  }
  SetGpuTiming(mode, reason);
  g_mode.store(mode, std::memory_order_release);
}
}  // namespace

// Decides unless another thread is deciding; returns false in that case.
bool TryDecide(bool from_injection) {
  int s = 0;
  if (!g_state.compare_exchange_strong(s, 1, std::memory_order_acq_rel)) return s == 2;
  Decide(from_injection);
  g_state.store(2, std::memory_order_release);
  return true;
}

uint8_t DecideMode() {
  // Another thread is deciding: wait for it (a hook needs the mode before it calls the runtime).
  // The deciding thread never waits for a hook's thread, so this cannot deadlock.
  while (!TryDecide(false)) sched_yield();
  return g_mode.load(std::memory_order_acquire);
}

}  // namespace internal

void DecideModeFromInjection() { internal::TryDecide(true); }

void FallBackToHostTiming(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const std::string& cupti = internal::CuptiWhy();
    SetGpuTiming(kHost, cupti.empty() ? why : cupti + "; " + why);
    internal::g_mode.store(kHost, std::memory_order_release);
  });
}

namespace {
struct RegisterStarter {
  RegisterStarter() { cupti::SetInjectionStarter(DecideModeFromInjection); }
} g_register_starter;
}  // namespace

}  // namespace rt
}  // namespace profagent
