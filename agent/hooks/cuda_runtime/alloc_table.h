// Lock-free pointer -> (size, memory kind) table for device/host allocations, so that a kFree
// event can carry the size of what it frees (the analyzer draws a memory counter from it).
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

  constexpr AllocTable() = default;

  // Remembers `ptr` (non-zero) with `size` (< 2^60) and `kind` (0..15). Thread-safe.
  bool Insert(uint64_t ptr, uint64_t size, uint32_t kind);
  // Removes `ptr`; returns false when it was not recorded. Thread-safe.
  bool Take(uint64_t ptr, uint64_t* size, uint32_t* kind);
  // Number of live entries (approximate under concurrency).
  size_t Live() const { return live_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTomb = 1;  // never a valid allocation address
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> val{0};  // size << 4 | kind
  };
  static size_t Hash(uint64_t p) { return size_t((p >> 4) * 0x9E3779B97F4A7C15ull >> 48); }
  Slot slots_[kSlots];
  std::atomic<size_t> live_{0};
};

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_ALLOC_TABLE_H_
