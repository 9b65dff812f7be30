#include "agent/core/capture.h"

namespace profagent {

namespace {
std::atomic<uint64_t> g_capture_streams[kMaxCaptures];  // 0 = free slot
}  // namespace

namespace internal {
std::atomic<int> g_open_captures{0};

bool CapturingSlow(uint64_t stream) {
  if (stream == 0) return false;  // the legacy default stream is never captured
  for (auto& slot : g_capture_streams) {
    if (slot.load(std::memory_order_acquire) == stream) return true;
  }
  return false;
}
}  // namespace internal

void NoteCaptureBegin(uint64_t stream) {
  if (stream == 0 || internal::CapturingSlow(stream)) return;
  for (auto& slot : g_capture_streams) {
    uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, stream, std::memory_order_acq_rel)) {
      internal::g_open_captures.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

void NoteCaptureEnd(uint64_t stream) {
  if (stream == 0) return;
  for (auto& slot : g_capture_streams) {
    uint64_t expected = stream;
    if (slot.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      internal::g_open_captures.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
  }
}

}  // namespace profagent
