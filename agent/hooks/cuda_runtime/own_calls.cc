#include "agent/hooks/cuda_runtime/own_calls.h"

#include "agent/core/agent.h"
#include "agent/core/capture.h"
#include "agent/hooks/cuda_runtime/real.h"
#include "agent/hooks/cupti/mem_sizes.h"

namespace profagent {
namespace rt {
namespace {

Real<decltype(&cudaPeekAtLastError)> r_peek_error("cudaPeekAtLastError");
Real<decltype(&cudaGetLastError)> r_get_error("cudaGetLastError");
Real<decltype(&cudaGetErrorName)> r_error_name("cudaGetErrorName");
Real<decltype(&cudaStreamIsCapturing)> r_is_capturing("cudaStreamIsCapturing");
Real<decltype(&cudaArrayGetInfo)> r_array_info("cudaArrayGetInfo");

struct InstallQuery {
  InstallQuery() { SetCaptureQuery(&QueryStreamCapture); }
} g_install_query;

}  // namespace

bool NoPendingError() {
  auto peek = r_peek_error.get();
  return peek != nullptr && peek() == cudaSuccess;
}

cudaError_t PendingError() {
  auto peek = r_peek_error.get();
  return peek ? peek() : cudaSuccess;
}

void ClearOwnError() {
  if (auto get = r_get_error.get()) get();
}

std::string ErrorName(cudaError_t e) {
  auto name = r_error_name.get();
  const char* s = name ? name(e) : nullptr;
  return s ? s : "cudaError " + std::to_string(int(e));
}

int QueryStreamCapture(uint64_t stream) {
  // The legacy stream: never captured, and asking about it during another stream's capture is
  // an error (cudaErrorStreamCaptureImplicit).
  if (stream == 0 || stream == reinterpret_cast<uint64_t>(cudaStreamLegacy)) return 0;
  auto is_capturing = r_is_capturing.get();
  if (is_capturing == nullptr || !NoPendingError()) return -1;
  HookGuard guard;  // the agent's own call (CUPTI callbacks ignore it)
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (is_capturing(reinterpret_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    ClearOwnError();
    return -1;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : 1;
}

uint32_t ArrayElementBytes(cudaArray_const_t array) {
  auto info = r_array_info.get();
  if (array == nullptr || info == nullptr || !NoPendingError()) return 0;
  HookGuard guard;  // the agent's own call (CUPTI callbacks ignore it)
  cudaChannelFormatDesc desc{};
  cudaExtent extent{};
  unsigned int flags = 0;
  if (info(&desc, &extent, &flags, const_cast<cudaArray_t>(array)) != cudaSuccess) {
    ClearOwnError();
    return 0;
  }
  return FormatBytes(&desc);
}

}  // namespace rt
}  // namespace profagent
