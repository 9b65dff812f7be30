#include "agent/hooks/nccl/comm_table.h"

#include <cstdio>

namespace profagent {

namespace {
// Zeroes (or grows) the per-peer counters of `s` for a communicator of `size` ranks.
void ResetPeerSeq(CommSlot* s, int size) {
  const int32_t need = size > 0 ? 2 * size : 0;
  std::atomic<uint32_t>* a = s->peer_seq.load(std::memory_order_relaxed);
  if (a == nullptr || s->peer_slots.load(std::memory_order_relaxed) < need) {
    s->peer_slots.store(0, std::memory_order_release);  // readers see "no counters" meanwhile
    a = need > 0 ? new std::atomic<uint32_t>[need] : nullptr;  // the old array is leaked
    s->peer_seq.store(a, std::memory_order_release);
  }
  for (int32_t i = 0; i < need; ++i) a[i].store(0, std::memory_order_relaxed);
  s->peer_slots.store(need, std::memory_order_release);
}
}  // namespace

size_t CommTable::Home(uint64_t handle) {
  // Fibonacci hashing: handles are pointers (low bits zero) or small tagged integers.
  return static_cast<size_t>((handle * 0x9E3779B97F4A7C15ull) >> 56) & (kSlots - 1);
}

CommSlot* CommTable::Find(uint64_t handle) {
  if (handle == 0 || handle == kTombstone) return nullptr;
  size_t i = Home(handle);
  for (size_t n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    const uint64_t k = slots_[i].key.load(std::memory_order_acquire);
    if (k == handle) return &slots_[i];
    if (k == 0) return nullptr;  // never-used slot ends the probe sequence
  }
  return nullptr;
}

CommSlot* CommTable::Insert(uint64_t handle, int rank, int size, uint64_t uid_hash, int device,
                            InterGroups inter) {
  if (handle == 0 || handle == kTombstone) return nullptr;
  std::lock_guard<std::mutex> l(mu_);
  CommSlot* free_slot = nullptr;
  size_t i = Home(handle);
  for (size_t n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    CommSlot& s = slots_[i];
    const uint64_t k = s.key.load(std::memory_order_relaxed);
    if (k == handle) {  // reused handle: reset in place
      s.coll_seq.store(0, std::memory_order_relaxed);
      s.p2p_seq.store(0, std::memory_order_relaxed);
      s.rank = rank;
      s.size = size;
      s.uid_hash = uid_hash;
      s.splits = 0;
      s.device = device;
      s.inter = inter;
      ResetPeerSeq(&s, size);
      return &s;
    }
    if (k == kTombstone && free_slot == nullptr) free_slot = &s;
    if (k == 0) {
      if (free_slot == nullptr) free_slot = &s;
      break;
    }
  }
  if (free_slot == nullptr) return nullptr;
  free_slot->coll_seq.store(0, std::memory_order_relaxed);
  free_slot->p2p_seq.store(0, std::memory_order_relaxed);
  free_slot->rank = rank;
  free_slot->size = size;
  free_slot->uid_hash = uid_hash;
  free_slot->splits = 0;
  free_slot->device = device;
  free_slot->inter = inter;
  ResetPeerSeq(free_slot, size);
  free_slot->key.store(handle, std::memory_order_release);
  live_.fetch_add(1, std::memory_order_relaxed);
  return free_slot;
}

void CommTable::Remove(uint64_t handle) {
  std::lock_guard<std::mutex> l(mu_);
  CommSlot* s = Find(handle);
  if (s == nullptr) return;
  s->key.store(kTombstone, std::memory_order_release);
  live_.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t Fnv1a64(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t SplitHash(uint64_t parent_hash, int64_t color, uint32_t split_index, uint32_t salt) {
  struct {
    uint64_t parent;
    int64_t color;
    uint32_t index;
    uint32_t salt;
  } key{parent_hash, color, split_index, salt};
  return Fnv1a64(&key, sizeof(key));
}

std::string UidString(const char* prefix, uint64_t hash) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s:%016llx", prefix, static_cast<unsigned long long>(hash));
  return buf;
}

}  // namespace profagent
