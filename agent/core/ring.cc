#include "agent/core/ring.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace profagent {

Ring::Ring(uint32_t slots) : mask_(slots - 1) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, sizeof(RawEvent) * size_t(slots)) != 0) p = nullptr;
  slots_ = static_cast<RawEvent*>(p);
  if (slots_ == nullptr) mask_ = 0;  // degenerate: every push fails (counted as drops)
}

Ring::~Ring() { free(slots_); }

void (*Ring::high_water_hook_)() = nullptr;

bool Ring::Room(uint64_t h, uint64_t need) {
  if (slots_ == nullptr) return false;
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  const uint64_t cap = capacity();
  if (h + need - tail > cap) return false;
  const uint64_t used = h + need - tail;
  const uint64_t half = cap / 2;
  if (cap < 4) {
    check_at_ = tail + cap;
  } else if (used < half) {
    check_at_ = tail + half - 1;  // the push that reaches half takes this path
  } else {
    check_at_ = std::min(tail + cap, h + need + cap / 4 - 1);
    if (high_water_hook_ != nullptr) high_water_hook_();
  }
  return true;
}

bool Ring::TryPushWithBytes(const RawEvent& e, const void* bytes, size_t n, uint16_t extra) {
  const uint64_t need = 1 + uint64_t(extra);
  const uint64_t h = head_.load(std::memory_order_relaxed);
  if (h + need > check_at_ && !Room(h, need)) return false;
  slots_[h & mask_] = e;
  const char* src = static_cast<const char*>(bytes);
  for (uint64_t i = 0; i < extra; ++i) {
    char* dst = reinterpret_cast<char*>(&slots_[(h + 1 + i) & mask_]);
    size_t off = size_t(i) * sizeof(RawEvent);
    size_t len = off < n ? (n - off < sizeof(RawEvent) ? n - off : sizeof(RawEvent)) : 0;
    if (len > 0) memcpy(dst, src + off, len);
    if (len < sizeof(RawEvent)) memset(dst + len, 0, sizeof(RawEvent) - len);
  }
  head_.store(h + need, std::memory_order_release);
  return true;
}

}  // namespace profagent
