// CUDA_INJECTION64_PATH entry point: the CUDA driver dlopens the agent and calls
// InitializeInjection() once per process when CUDA initializes. The agent core initializes from
// its own constructor (which ran at dlopen); here the GPU timing mode is decided, which enables
// CUPTI. Calling it twice (or being both preloaded and injected) initializes once.
#include <atomic>
#include <string>

#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/hooks/cupti/cupti_tracer.h"

extern "C" int profagent_init();  // agent/core: idempotent

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<int> calls{0};
  if (calls.fetch_add(1) != 0) return 1;
  profagent_init();
  profagent::HookGuard guard;
  if (auto starter = profagent::cupti::GetInjectionStarter()) {
    starter();
    return 1;
  }
  // The CUDA-runtime surface is not linked in: CUPTI alone.
  std::string reason;
  bool ok = profagent::cupti::StartCupti(profagent::GetConfig().cupti_path, nullptr, &reason);
  profagent::SetGpuTiming(ok ? 1 : 3, reason);
  return 1;
}
