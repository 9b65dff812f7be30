// Test-only: NVTX's static injection hook. A program that links the NVTX surface statically
// defines this (non-weak) pointer so that its NVTX calls reach InitializeInjectionNvtx2 without
// NVTX_INJECTION64_PATH. Kept in its own file: nvToolsExt.h declares the weak default.
#include <cstdint>

#include "agent/hooks/nvtx/nvtx_hooks.h"

extern "C" {
__attribute__((visibility("default"))) int (*InitializeInjectionNvtx2_fnptr)(
    const void* (*)(uint32_t)) = &InitializeInjectionNvtx2;
}
