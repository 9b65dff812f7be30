// CUDA_INJECTION64_PATH entry point: the CUDA driver dlopens the agent and calls
// InitializeInjection() once per process when CUDA initializes (inside cuInit). The agent core
// initializes from its own constructor (which ran at dlopen); here the GPU timing mode is
// decided, which enables CUPTI, unless another thread is deciding it already (then it returns at
// once: waiting inside cuInit could deadlock with that thread's CUPTI start). Calling it twice
// (or being both preloaded and injected) initializes once.
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>

#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/hooks/cupti/cupti_tracer.h"

extern "C" int profagent_init();  // agent/core: idempotent

namespace {
// Preloaded (LD_PRELOAD), the agent also asks the driver to call InitializeInjection when CUDA
// initializes, by pointing CUDA_INJECTION64_PATH at itself when it is unset: a program whose
// CUDA runtime is linked statically makes no call the interposers can see, but the driver
// initializes for it too, and CUPTI's callbacks then record its launches. A process that never
// initializes CUDA is unaffected; another tool's CUDA_INJECTION64_PATH is left alone.
__attribute__((constructor)) void InstallCudaInjectionEnv() {
  // A disabled agent (bad configuration, PROFAGENT_ENABLE=0, a rank outside PROFAGENT_RANKS)
  // asks for nothing: CUPTI's subscriber slot stays the application's.
  if (profagent_init() == 0) return;
  if (getenv("CUDA_INJECTION64_PATH") != nullptr) return;
  const std::string self = profagent::AgentLibraryPath();
  if (!self.empty()) setenv("CUDA_INJECTION64_PATH", self.c_str(), 0);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<int> calls{0};
  if (calls.fetch_add(1) != 0) return 1;
  if (profagent_init() == 0) return 1;  // disabled: CUPTI is left alone
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
