// Lock-free pointer -> (size, memory kind, device) table for device/host allocations, so that a
// kFree event can carry the size of what it frees (the analyzer draws a memory counter from it);
// also stream handle -> device (event_timer.cc).
//
// Open addressing with linear probing over a fixed array (no allocation ever); deletions leave
// tombstones. Hot-path safe: Insert and Take are a handful of relaxed/acquire atomics and
// never block. Correctness relies on the causal order of the application: a pointer is inserted
// before the allocating call returns it, and taken before the freeing call hands the memory back
// (so a concurrent re-allocation of the same address cannot race with its removal).
// When a probe sequence exceeds kMaxProbe the entry is not stored (Insert returns false; the
// writer/analyzer can still match kAlloc/kFree by pointer).
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_ALLOC_TABLE_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_ALLOC_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace profagent {
namespace rt {

class AllocTable {
 public:
  static constexpr size_t kSlots = 1 << 16;  // 1 MiB
  static constexpr int kMaxProbe = 256;

  struct Entry {
    uint64_t size;
    uint32_t kind;
    uint32_t device;
  };

  constexpr AllocTable() = default;

  // Remembers `ptr` (non-zero) with `size` (< 2^52), `kind` (0..15) and `device` (0..255).
  // Thread-safe.
  bool Insert(uint64_t ptr, uint64_t size, uint32_t kind, uint32_t device = 0);
  // Removes `ptr`; returns false when it was not recorded. Thread-safe.
  bool Take(uint64_t ptr, Entry* out);
  // Looks `ptr` up without removing it. Thread-safe.
  bool Find(uint64_t ptr, Entry* out) const;
  bool Take(uint64_t ptr, uint64_t* size, uint32_t* kind) {
    Entry e;
    if (!Take(ptr, &e)) return false;
    *size = e.size;
    *kind = e.kind;
    return true;
  }
  // Removes every entry for which pred(const Entry&) holds, calling taken(ptr, entry) for each;
  // returns how many. Visits the whole table: for rare events (a device reset), not hot paths.
  template <typename Pred, typename Taken>
  size_t TakeEach(Pred&& pred, Taken&& taken) {
    size_t n = 0;
    for (Slot& s : slots_) {
      uint64_t k = s.key.load(std::memory_order_acquire);
      if (k == kEmpty || k == kTomb) continue;
      const Entry e = Unpack(s.val.load(std::memory_order_acquire));
      if (!pred(e) || !s.key.compare_exchange_strong(k, kTomb, std::memory_order_acq_rel)) {
        continue;
      }
      live_.fetch_sub(1, std::memory_order_relaxed);
      taken(k, e);
      ++n;
    }
    return n;
  }
  // Number of live entries (approximate under concurrency).
  size_t Live() const { return live_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTomb = 1;  // never a valid allocation address
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> val{0};  // size << 12 | device << 4 | kind
  };
  static size_t Hash(uint64_t p) { return size_t((p >> 4) * 0x9E3779B97F4A7C15ull >> 48); }
  static uint64_t Pack(uint64_t size, uint32_t kind, uint32_t device) {
    return size << 12 | uint64_t(device & 255) << 4 | (kind & 15);
  }
  static Entry Unpack(uint64_t v) {
    return Entry{v >> 12, uint32_t(v & 15), uint32_t(v >> 4 & 255)};
  }
  Slot slots_[kSlots];
  std::atomic<size_t> live_{0};
};

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_ALLOC_TABLE_H_
