// CHECK(call) for the test programs: a CUDA runtime call that fails is printed and counted in
// `errors` (thread-safe); the programs print the count and exit 1 when it is not 0.
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_CHECK_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_CHECK_H_

#include <cuda_runtime.h>

#include <cstdio>

static int errors = 0;

#define CHECK(call)                                         \
  do {                                                      \
    cudaError_t e_ = (call);                                \
    if (e_ != cudaSuccess) {                                \
      printf("FAIL %s: %s\n", #call, cudaGetErrorName(e_)); \
      __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);     \
    }                                                       \
  } while (0)

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_TESTDATA_CHECK_H_
