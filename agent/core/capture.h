// Streams being captured into a CUDA graph (cudaStreamBeginCapture..EndCapture seen by the
// runtime interposers, whether or not recording is on). Work enqueued on them does not run when
// enqueued: it runs at each launch of the graph, where CUPTI reports it (attributed to the graph
// launch). Every hook that records a launch, copy, set or NCCL call on a stream flags it
// (kFlagCaptured) when the stream is capturing, so the analyzer expects no device activity for
// it and counts no collective.
//
// Hot path: Capturing() is one relaxed load while no capture is open. Up to kMaxCaptures
// concurrent captures are tracked (more are not flagged). Thread-safe; no CUDA call.
#ifndef PROFAGENT_AGENT_CORE_CAPTURE_H_
#define PROFAGENT_AGENT_CORE_CAPTURE_H_

#include <atomic>
#include <cstdint>

namespace profagent {

namespace internal {
extern std::atomic<int> g_open_captures;
bool CapturingSlow(uint64_t stream);
}  // namespace internal

constexpr int kMaxCaptures = 64;

// Whether `stream` (a cudaStream_t / CUstream as an integer) is being captured.
inline bool Capturing(uint64_t stream) {
  if (__builtin_expect(internal::g_open_captures.load(std::memory_order_relaxed) == 0, 1))
    return false;
  return internal::CapturingSlow(stream);
}

void NoteCaptureBegin(uint64_t stream);
void NoteCaptureEnd(uint64_t stream);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_CAPTURE_H_
