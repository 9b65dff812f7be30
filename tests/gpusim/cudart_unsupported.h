// Support for the generated stubs (cudart_stubs.cc) of the CUDA runtime functions gpusim does
// not simulate. Kept free of CUDA headers: the stubs' parameterless definitions would clash
// with the real prototypes.
#ifndef PROFAGENT_TESTS_GPUSIM_CUDART_UNSUPPORTED_H_
#define PROFAGENT_TESTS_GPUSIM_CUDART_UNSUPPORTED_H_

#include <atomic>

namespace gpusim {

struct UnsupportedOnce {
  std::atomic<bool> reported{false};
};

// Prints "gpusim: <name> is not supported" on stderr the first time per function, records
// cudaErrorNotSupported as the thread's last error and returns it (801). Thread-safe.
int ReportUnsupported(const char* name, UnsupportedOnce* once);

}  // namespace gpusim

#endif  // PROFAGENT_TESTS_GPUSIM_CUDART_UNSUPPORTED_H_
