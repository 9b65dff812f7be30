#include "agent/hooks/cuda_runtime/gpu_timing.h"

#include <cuda_runtime_api.h>

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
std::once_flag g_once;
// Why CUPTI was not used, when the decision fell back from it ("" otherwise). Leaked: read by
// FallBackToHostTiming, which may run during exit.
std::string& CuptiWhy() {
  static auto* s = new std::string();
  return *s;
}

bool g_from_injection = false;  // deciding inside InitializeInjection (cuInit): no runtime calls

void Decide() {
  HookGuard guard;  // CUDA calls made while deciding are the agent's own
  const Config& cfg = GetConfig();
  g_stack_every = cfg.stack_every;
  g_stack_depth = cfg.stack_depth == 0 ? 1 : (cfg.stack_depth > 64 ? 64 : cfg.stack_depth);
  g_launch_api_sample = cfg.launch_api_sample == 0 ? 1 : cfg.launch_api_sample;
  uint8_t mode = kHost;
  std::string reason;
  switch (cfg.gpu_timing) {
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
        break;
      }
      if (cfg.gpu_timing == GpuTimingWanted::kCupti) {
        reason = why + "; PROFAGENT_GPU_TIMING=cupti, so host times only";
        break;
      }
      std::string ev;
      CuptiWhy() = why;
      if (StartEventTimer(!g_from_injection, &ev)) {
        mode = kEvents;
        reason = why + "; using " + ev;
      } else {
        reason = why + "; " + ev + "; host times only";
      }
      break;
    }
    case GpuTimingWanted::kEvents: {
      std::string ev;
      if (StartEventTimer(!g_from_injection, &ev)) {
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

uint8_t DecideMode() {
  std::call_once(g_once, Decide);
  return g_mode.load(std::memory_order_acquire);
}

}  // namespace internal

void DecideModeFromInjection() {
  internal::g_from_injection = true;  // read by Decide, under the once flag
  internal::DecideMode();
  internal::g_from_injection = false;
}

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
