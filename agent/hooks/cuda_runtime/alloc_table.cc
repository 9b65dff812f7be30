#include "agent/hooks/cuda_runtime/alloc_table.h"

namespace profagent {
namespace rt {

static_assert(AllocTable::kSlots == (size_t(1) << 16), "Hash() yields 16 bits");

bool AllocTable::Insert(uint64_t ptr, uint64_t size, uint32_t kind, uint32_t device) {
  if (ptr <= kTomb) return false;
  size_t h = Hash(ptr);
  for (int i = 0; i < kMaxProbe; ++i) {
    Slot& s = slots_[(h + i) & (kSlots - 1)];
    uint64_t k = s.key.load(std::memory_order_relaxed);
    if ((k == kEmpty || k == kTomb) &&
        s.key.compare_exchange_strong(k, ptr, std::memory_order_acq_rel)) {
      s.val.store(Pack(size, kind, device), std::memory_order_release);
      live_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

bool AllocTable::Take(uint64_t ptr, Entry* out) {
  if (ptr <= kTomb) return false;
  size_t h = Hash(ptr);
  for (int i = 0; i < kMaxProbe; ++i) {
    Slot& s = slots_[(h + i) & (kSlots - 1)];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == kEmpty) return false;
    if (k == ptr) {
      uint64_t v = s.val.load(std::memory_order_acquire);
      if (!s.key.compare_exchange_strong(k, kTomb, std::memory_order_acq_rel)) return false;
      live_.fetch_sub(1, std::memory_order_relaxed);
      *out = Unpack(v);
      return true;
    }
  }
  return false;
}

bool AllocTable::Find(uint64_t ptr, Entry* out) const {
  if (ptr <= kTomb) return false;
  size_t h = Hash(ptr);
  for (int i = 0; i < kMaxProbe; ++i) {
    const Slot& s = slots_[(h + i) & (kSlots - 1)];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == kEmpty) return false;
    if (k == ptr) {
      *out = Unpack(s.val.load(std::memory_order_acquire));
      return true;
    }
  }
  return false;
}

}  // namespace rt
}  // namespace profagent
