// Test programs that reach the driver API as PyTorch, vLLM and JAX-style code do: through
// cudaGetDriverEntryPoint, no link to libcuda. Include after check.h (uses its `errors`).
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_DRIVER_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_DRIVER_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

// The driver function `name` (cuda.h's type F), or nullptr.
template <typename F>
F Driver(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPoint(name, &f, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) f = nullptr;
  return reinterpret_cast<F>(f);
}

// A driver call that must succeed: a failure is printed and counted in `errors`.
#define CU(call)                                            \
  do {                                                      \
    CUresult r_ = (call);                                   \
    if (r_ != CUDA_SUCCESS) {                               \
      printf("FAIL %s: %d\n", #call, static_cast<int>(r_)); \
      ++errors;                                             \
    }                                                       \
  } while (0)

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_DRIVER_H_
