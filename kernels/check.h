// Error checks of the demo workload: every CUDA, NCCL and MPI return code goes through one of
// these macros, which print the failing call with its file and line to stderr and end the
// process with exit code 1 (a demo program has no way to recover from a device error).
//
// Thread safety: safe from any thread (they only format to stderr and exit).
#ifndef PROFAGENT_KERNELS_CHECK_H_
#define PROFAGENT_KERNELS_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime_api.h>

#define LLM_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    const cudaError_t llm_err_ = (expr);                                                  \
    if (llm_err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "inference: CUDA error %d (%s) at %s:%d: %s\n",                \
                   static_cast<int>(llm_err_), cudaGetErrorString(llm_err_), __FILE__,    \
                   __LINE__, #expr);                                                      \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// NCCL result codes are printed as numbers: ncclGetErrorString is outside the API subset the
// CPU simulator implements.
#define LLM_NCCL_CHECK(expr)                                                              \
  do {                                                                                    \
    const int llm_res_ = static_cast<int>(expr);                                          \
    if (llm_res_ != 0) {                                                                  \
      std::fprintf(stderr, "inference: NCCL error %d at %s:%d: %s\n", llm_res_, __FILE__, \
                   __LINE__, #expr);                                                      \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#define LLM_MPI_CHECK(expr)                                                               \
  do {                                                                                    \
    const int llm_rc_ = (expr);                                                           \
    if (llm_rc_ != 0) {                                                                   \
      std::fprintf(stderr, "inference: MPI error %d at %s:%d: %s\n", llm_rc_, __FILE__,   \
                   __LINE__, #expr);                                                      \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#define LLM_CHECK(cond, msg)                                                              \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "inference: %s\n", (msg));                                     \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#endif  // PROFAGENT_KERNELS_CHECK_H_
