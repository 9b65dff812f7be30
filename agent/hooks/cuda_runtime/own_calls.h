// The agent's own calls into the CUDA runtime (event pools, capture queries), made so that the
// application never sees their effects: the runtime's per-thread "last error" belongs to the
// application, so the agent calls the runtime only when none is pending (NoPendingError) and
// clears what its own failing call left (ClearOwnError). The application then reads exactly the
// errors of its own calls (cudaGetLastError / cudaPeekAtLastError).
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_OWN_CALLS_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_OWN_CALLS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace profagent {
namespace rt {

bool NoPendingError();
// The application's pending error (cudaPeekAtLastError), cudaSuccess without a runtime.
cudaError_t PendingError();
void ClearOwnError();
std::string ErrorName(cudaError_t e);

// capture.h's CaptureQuery: cudaStreamIsCapturing(stream), 1 capturing (active or invalidated,
// not yet ended), 0 not, -1 cannot tell (no runtime, an application error pending, or the
// query failed). Never asks about the legacy default stream. Installed at load.
int QueryStreamCapture(uint64_t stream);

// The bytes of one element of a CUDA array (its channel format's bits / 8), asked of the runtime
// (cudaArrayGetInfo); 0 when it cannot tell (no runtime, an application error pending, a handle
// the runtime rejects).
uint32_t ArrayElementBytes(cudaArray_const_t array);

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_OWN_CALLS_H_
