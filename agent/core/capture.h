// Streams being captured into a CUDA graph. Work enqueued on them does not run when enqueued:
// it runs at each launch of the graph, where CUPTI reports it (attributed to the graph launch).
// Every hook that records a launch, copy, set or NCCL call on a stream flags it (kFlagCaptured)
// when the stream is capturing, so the analyzer expects no device activity for it and counts no
// collective.
//
// Which streams: once the runtime interposers saw a capture begin (cudaStreamBeginCapture or
// cudaStreamBeginCaptureToGraph, recording or not) and until every capture has ended,
// Capturing() asks the runtime (SetCaptureQuery: cudaStreamIsCapturing), which also knows the
// streams that joined a capture by waiting on an event of a capturing stream (the fork/join
// pattern of multi-stream capture) and any number of concurrent captures. Without the query
// (e.g. inside CUPTI callbacks, where the agent makes no CUDA call), the streams whose capture
// began, and those that joined one (NoteStreamWaitedEvent), are looked up in a table of
// kMaxCaptures entries (more are not flagged).
//
// Hot path: Capturing() is one relaxed load while no capture is open. Thread-safe.
#ifndef PROFAGENT_AGENT_CORE_CAPTURE_H_
#define PROFAGENT_AGENT_CORE_CAPTURE_H_

#include <atomic>
#include <cstdint>

namespace profagent {

// Asks the CUDA runtime whether `stream` is capturing: 1 yes, 0 no, -1 cannot tell.
using CaptureQuery = int (*)(uint64_t stream);

namespace internal {
extern std::atomic<int> g_open_captures;
// Set while this thread is inside a library call that is being captured (CapturedCall).
extern thread_local bool t_in_captured_call __attribute__((tls_model("initial-exec")));
bool CapturingSlow(uint64_t stream, bool may_query);
}  // namespace internal

constexpr int kMaxCaptures = 64;

// Whether `stream` (a cudaStream_t / CUstream as an integer) is being captured. `may_query`
// false: the table only, no CUDA call (from CUPTI callbacks).
inline bool Capturing(uint64_t stream, bool may_query = true) {
  if (__builtin_expect(internal::g_open_captures.load(std::memory_order_relaxed) == 0, 1))
    return false;
  return internal::CapturingSlow(stream, may_query);
}

// A capture began on `stream` (the call succeeded), or a call that ends it returned (`ended`:
// false when the runtime said the capture goes on, e.g. cudaErrorStreamCaptureWrongThread).
void NoteCaptureBegin(uint64_t stream);
void NoteCaptureEnd(uint64_t stream, bool ended = true);

// Without the runtime query (CUPTI callbacks: injection, a static runtime), the fork/join of a
// multi-stream capture as the table sees it: an event recorded on a capturing stream, then a
// stream that waits on it joins that capture (until the capture ends). Up to kMaxCaptures
// streams in all, and kMaxCaptureEvents events.
constexpr int kMaxCaptureEvents = 256;
void NoteEventRecorded(uint64_t event, uint64_t stream);
void NoteStreamWaitedEvent(uint64_t stream, uint64_t event);

// Marks the calling thread as inside a library call made on a capturing stream (an NCCL call):
// every launch it makes meanwhile, on whatever stream (NCCL's own, or a side stream joined to
// the capture, seen from a CUPTI driver callback where the runtime is not queried), is captured.
class CapturedCall {
 public:
  explicit CapturedCall(bool captured) : prev_(internal::t_in_captured_call) {
    if (captured) internal::t_in_captured_call = true;
  }
  ~CapturedCall() { internal::t_in_captured_call = prev_; }
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;

 private:
  bool prev_;
};

// Installs the runtime query (once, by the CUDA runtime hooks).
void SetCaptureQuery(CaptureQuery query);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_CAPTURE_H_
