// Test programs that inject the agent as the driver does for CUDA_INJECTION64_PATH (which
// gpusim's runtime does not implement): dlopen it privately (none of its interposers in the
// application's symbol lookup), call its InitializeInjection.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_INJECT_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_INJECT_H_

#include <dlfcn.h>

#include <cstdio>

// InitializeInjection's result, or -1 when the agent at `path` cannot be loaded or lacks it.
inline int InjectAgent(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    printf("dlopen: %s\n", dlerror());
    return -1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"));
  return init != nullptr ? init() : -1;
}

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_INJECT_H_
