// The rest of libcupti.so.13's exports: every function NVIDIA's library exports that gpusim does
// not implement (listed in cupti_sim_unsupported.inc) exists, ignores its arguments, prints
// `gpusim-cupti: <fn> is not supported` once on stderr and returns an error code: the event and
// metric API returns CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED (38, what current GPUs return),
// everything else CUPTI_ERROR_NOT_SUPPORTED (27).
//
// Deliberately does not include cupti.h: the stubs take no parameters, which is harmless for C
// callers on x86-64 (the caller owns its arguments) and avoids restating ~150 prototypes.
// Thread safe; never touches its arguments, so any arguments are safe.
#include <stdio.h>

#include <atomic>

namespace {

constexpr int kNotSupported = 27;            // CUPTI_ERROR_NOT_SUPPORTED
constexpr int kLegacyNotSupported = 38;      // CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED

int Unsupported(std::atomic<bool>* reported, const char* name, int code) {
  if (!reported->exchange(true, std::memory_order_relaxed)) {
    fprintf(stderr, "gpusim-cupti: %s is not supported\n", name);
  }
  return code;
}

}  // namespace

#define GPUSIM_CUPTI_STUB(name, code)                      \
  extern "C" int name(void) {                              \
    static std::atomic<bool> reported{false};              \
    return Unsupported(&reported, #name, code);            \
  }
#define GPUSIM_CUPTI_UNSUPPORTED(name) GPUSIM_CUPTI_STUB(name, kNotSupported)
#define GPUSIM_CUPTI_LEGACY(name) GPUSIM_CUPTI_STUB(name, kLegacyNotSupported)
#include "tests/gpusim/cupti_sim_unsupported.inc"
#undef GPUSIM_CUPTI_LEGACY
#undef GPUSIM_CUPTI_UNSUPPORTED
#undef GPUSIM_CUPTI_STUB

// NVTX injection entry points (NVTX_INJECTION64_PATH=libcupti.so): gpusim's CUPTI has no NVTX
// domain, so initialization reports failure (0) and NVTX stays a no-op.
extern "C" int InitializeInjectionNvtx(void*) { return 0; }
extern "C" int InitializeInjectionNvtx2(void*) { return 0; }
extern "C" int InitializeInjectionNvtxExtension(void*) { return 0; }
