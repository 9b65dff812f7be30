#include "agent/core/capture.h"

#include <mutex>
#include <utility>

#include "agent/core/event.h"

namespace profagent {

namespace {
// The table's key of a stream: the per-thread default stream's handle (cudaStreamPerThread) is
// each thread's own stream, so it is keyed with the thread (before, one thread capturing its
// per-thread stream flagged every other thread's per-thread work captured).
thread_local uint64_t t_key_tag __attribute__((tls_model("initial-exec")));
uint64_t Key(uint64_t stream) {
  if (stream != kPerThreadStreamHandle) return stream;
  // This thread's: an odd address-sized number no stream handle (aligned) can be.
  return reinterpret_cast<uint64_t>(&t_key_tag) + 1;
}

std::atomic<uint64_t> g_capture_streams[kMaxCaptures];  // 0 = free slot
// The stream whose capture a slot's stream joined (0: its own capture began there). Written
// under JoinMu() for joined slots; read with the slot.
std::atomic<uint64_t> g_capture_origin[kMaxCaptures];
std::atomic<CaptureQuery> g_query{nullptr};

bool InTable(uint64_t stream) {
  for (auto& slot : g_capture_streams) {
    if (slot.load(std::memory_order_acquire) == stream) return true;
  }
  return false;
}

// The capture `stream` is part of: the stream it began on, or 0 when none.
uint64_t OriginOf(uint64_t stream) {
  for (int i = 0; i < kMaxCaptures; ++i) {
    if (g_capture_streams[i].load(std::memory_order_acquire) == stream) {
      const uint64_t o = g_capture_origin[i].load(std::memory_order_acquire);
      return o != 0 ? o : stream;
    }
  }
  return 0;
}

// Events recorded on a capturing stream: (event, the capture's origin stream). Rare calls
// (only while a capture is open): a lock.
std::mutex& JoinMu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::pair<uint64_t, uint64_t> g_capture_events[kMaxCaptureEvents];  // under JoinMu()

// Forgets the events and the joined streams of the capture begun on `origin` (it ended).
void ForgetCapture(uint64_t origin) {
  std::lock_guard<std::mutex> lock(JoinMu());
  for (auto& ev : g_capture_events) {
    if (ev.second == origin) ev = {0, 0};
  }
  for (int i = 0; i < kMaxCaptures; ++i) {
    if (g_capture_origin[i].load(std::memory_order_relaxed) != origin) continue;
    g_capture_origin[i].store(0, std::memory_order_relaxed);
    g_capture_streams[i].store(0, std::memory_order_release);
  }
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
  return InTable(Key(stream));
}
}  // namespace internal

void NoteCaptureBegin(uint64_t stream) {
  if (stream == 0) return;
  stream = Key(stream);
  internal::g_open_captures.fetch_add(1, std::memory_order_relaxed);
  if (InTable(stream)) return;
  for (auto& slot : g_capture_streams) {
    uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, stream, std::memory_order_acq_rel)) return;
  }
}

void NoteCaptureEnd(uint64_t stream, bool ended) {
  if (stream == 0 || !ended) return;
  stream = Key(stream);
  for (int i = 0; i < kMaxCaptures; ++i) {
    if (g_capture_origin[i].load(std::memory_order_acquire) != 0) continue;  // a joined one
    uint64_t expected = stream;
    if (g_capture_streams[i].compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      break;
    }
  }
  ForgetCapture(stream);
  // Never below 0 (an end call for a capture begun before the agent, or never begun).
  int open = internal::g_open_captures.load(std::memory_order_relaxed);
  while (open > 0 && !internal::g_open_captures.compare_exchange_weak(
                         open, open - 1, std::memory_order_relaxed)) {
  }
}

void NoteEventRecorded(uint64_t event, uint64_t stream) {
  if (event == 0 || internal::g_open_captures.load(std::memory_order_relaxed) == 0) return;
  const uint64_t origin = stream != 0 ? OriginOf(Key(stream)) : 0;
  std::lock_guard<std::mutex> lock(JoinMu());
  std::pair<uint64_t, uint64_t>* free_slot = nullptr;
  for (auto& ev : g_capture_events) {
    if (ev.first == event) {  // recorded again: where it was recorded last counts
      ev.second = origin;
      if (origin == 0) ev.first = 0;
      return;
    }
    if (ev.first == 0 && free_slot == nullptr) free_slot = &ev;
  }
  if (origin != 0 && free_slot != nullptr) *free_slot = {event, origin};
}

void NoteStreamWaitedEvent(uint64_t stream, uint64_t event) {
  if (stream == 0 || event == 0 || internal::g_open_captures.load(std::memory_order_relaxed) == 0) {
    return;
  }
  stream = Key(stream);
  std::lock_guard<std::mutex> lock(JoinMu());
  uint64_t origin = 0;
  for (const auto& ev : g_capture_events) {
    if (ev.first == event) origin = ev.second;
  }
  if (origin == 0 || InTable(stream) || !InTable(origin)) return;
  for (int i = 0; i < kMaxCaptures; ++i) {
    uint64_t expected = 0;
    if (!g_capture_streams[i].compare_exchange_strong(expected, stream,
                                                      std::memory_order_acq_rel)) {
      continue;
    }
    g_capture_origin[i].store(origin, std::memory_order_release);
    return;
  }
}

void SetCaptureQuery(CaptureQuery query) { g_query.store(query, std::memory_order_release); }

}  // namespace profagent
