// A minimal NVTX v3 tool for demo_gpusim_test: loaded by the NVTX header code of the program
// under test through NVTX_INJECTION64_PATH, it records every nvtxRangePushA / nvtxRangePop of
// the default domain to the file named by DEMO_NVTX_OUT, one line per call:
//     push <depth> <message>
//     pop <depth>
// (depth = nesting level on the calling thread before the push / after the pop). Test support
// only: it takes a lock and writes on every call, which a real profiler hook must not do.
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <nvtx3/nvToolsExt.h>

namespace {

std::mutex g_mu;
FILE* g_out = nullptr;
thread_local int t_depth = 0;

int NVTX_API RangePushA(const char* message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) std::fprintf(g_out, "push %d %s\n", t_depth, message ? message : "");
  return t_depth++;
}

int NVTX_API RangePop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (t_depth > 0) --t_depth;
  if (g_out != nullptr) {
    std::fprintf(g_out, "pop %d\n", t_depth);
    std::fflush(g_out);
  }
  return t_depth;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const char* path = std::getenv("DEMO_NVTX_OUT");
  if (path == nullptr) return 0;
  g_out = std::fopen(path, "w");
  if (g_out == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) return 0;
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&RangePushA);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&RangePop);
  return 1;
}
