#include "agent/core/capture.h"

namespace profagent {

namespace {
std::atomic<uint64_t> g_capture_streams[kMaxCaptures];  // 0 = free slot
std::atomic<CaptureQuery> g_query{nullptr};

bool InTable(uint64_t stream) {
  for (auto& slot : g_capture_streams) {
    if (slot.load(std::memory_order_acquire) == stream) return true;
  }
  return false;
}
}  // namespace

namespace internal {
std::atomic<int> g_open_captures{0};  // captures begun and not ended
thread_local bool t_in_captured_call __attribute__((tls_model("initial-exec"))) = false;

bool CapturingSlow(uint64_t stream, bool may_query) {
  if (t_in_captured_call) return true;
  if (stream == 0) return false;  // the legacy default stream is never captured
  if (may_query) {
    if (CaptureQuery q = g_query.load(std::memory_order_acquire)) {
      const int r = q(stream);
      if (r >= 0) return r == 1;
    }
  }
  return InTable(stream);
}
}  // namespace internal

void NoteCaptureBegin(uint64_t stream) {
  if (stream == 0) return;
  internal::g_open_captures.fetch_add(1, std::memory_order_relaxed);
  if (InTable(stream)) return;
  for (auto& slot : g_capture_streams) {
    uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, stream, std::memory_order_acq_rel)) return;
  }
}

void NoteCaptureEnd(uint64_t stream, bool ended) {
  if (stream == 0 || !ended) return;
  for (auto& slot : g_capture_streams) {
    uint64_t expected = stream;
    if (slot.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) break;
  }
  // Never below 0 (an end call for a capture begun before the agent, or never begun).
  int open = internal::g_open_captures.load(std::memory_order_relaxed);
  while (open > 0 && !internal::g_open_captures.compare_exchange_weak(
                         open, open - 1, std::memory_order_relaxed)) {
  }
}

void SetCaptureQuery(CaptureQuery query) { g_query.store(query, std::memory_order_release); }

}  // namespace profagent
