// Pending non-blocking MPI calls, keyed by their MPI_Request value, until MPI_Wait*/Test* reports
// their completion.
//
// A fixed-size, lock-free open-addressing table: Put() at MPI_I* return, Take() when a wait or
// test completes the request, Drain() at MPI_Finalize for requests never seen completing. Both Put
// and Take probe at most kProbe slots from the handle's home slot, so a lookup costs a bounded
// number of atomic loads whatever holes earlier removals left. Safe from any thread, inside hooks
// (no lock, no allocation); a given request value is put and taken by one thread at a time (MPI
// hands out each live request value once).
//
// Handle values 0 and 1 are reserved (empty / busy) and never stored; MPI request handles are
// pointers (Open MPI) or tagged integers (MPICH), never 0 or 1.
#ifndef PROFAGENT_AGENT_HOOKS_MPI_REQUEST_TABLE_H_
#define PROFAGENT_AGENT_HOOKS_MPI_REQUEST_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace profagent {

enum class PutResult {
  kStored,    // stored
  kReplaced,  // the same handle was still stored (its completion was never seen): the old
              // value is returned in *evicted and replaced
  kFull,      // no free slot in the probe window: not stored
};

template <typename V, size_t kSlots = 1024, size_t kProbe = 32>
class RequestTable {
  static_assert((kSlots & (kSlots - 1)) == 0, "kSlots must be a power of two");
  static_assert(kProbe <= kSlots, "probe window larger than the table");

 public:
  PutResult Put(uint64_t handle, const V& value, V* evicted) {
    if (handle <= kBusy) return PutResult::kFull;
    const size_t home = Home(handle);
    if (live_.load(std::memory_order_relaxed) != 0) {
      if (Slot* s = Hold(handle)) {
        *evicted = s->value;
        s->value = value;
        s->key.store(handle, std::memory_order_release);
        return PutResult::kReplaced;
      }
    }
    for (size_t n = 0; n < kProbe; ++n) {
      Slot& s = slots_[(home + n) & (kSlots - 1)];
      uint64_t k = kEmpty;
      if (s.key.load(std::memory_order_relaxed) == kEmpty &&
          s.key.compare_exchange_strong(k, kBusy, std::memory_order_acquire)) {
        s.value = value;
        live_.fetch_add(1, std::memory_order_relaxed);
        s.key.store(handle, std::memory_order_release);
        return PutResult::kStored;
      }
    }
    return PutResult::kFull;
  }

  // Removes `handle` and copies its value to *out. False when not stored.
  bool Take(uint64_t handle, V* out) {
    Slot* s = Hold(handle);
    if (s == nullptr) return false;
    *out = s->value;
    live_.fetch_sub(1, std::memory_order_relaxed);
    s->key.store(kEmpty, std::memory_order_release);
    return true;
  }

  // Calls fn(&value) on the entry of `handle` while holding it. False when not stored.
  template <typename Fn>
  bool Update(uint64_t handle, Fn fn) {
    Slot* s = Hold(handle);
    if (s == nullptr) return false;
    fn(&s->value);
    s->key.store(handle, std::memory_order_release);
    return true;
  }

  // Takes every stored entry, calling fn(handle, value) for each. Returns how many.
  template <typename Fn>
  size_t Drain(Fn fn) {
    size_t n = 0;
    for (Slot& s : slots_) {
      uint64_t k = s.key.load(std::memory_order_acquire);
      if (k <= kBusy) continue;
      if (!s.key.compare_exchange_strong(k, kBusy, std::memory_order_acquire)) continue;
      V v = s.value;
      live_.fetch_sub(1, std::memory_order_relaxed);
      s.key.store(kEmpty, std::memory_order_release);
      fn(k, v);
      ++n;
    }
    return n;
  }

  // Entries stored (relaxed; a hint for skipping work when nothing is pending).
  size_t size() const { return live_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kBusy = 1;

  struct Slot {
    std::atomic<uint64_t> key{kEmpty};
    V value{};
  };

  // The slot of `handle`, marked busy (the caller stores its key back, or kEmpty); nullptr
  // when not stored.
  Slot* Hold(uint64_t handle) {
    if (handle <= kBusy) return nullptr;
    const size_t home = Home(handle);
    for (size_t n = 0; n < kProbe; ++n) {
      Slot& s = slots_[(home + n) & (kSlots - 1)];
      uint64_t k = handle;
      if (s.key.load(std::memory_order_relaxed) == handle &&
          s.key.compare_exchange_strong(k, kBusy, std::memory_order_acquire)) {
        return &s;
      }
    }
    return nullptr;
  }

  static size_t Home(uint64_t handle) {
    return static_cast<size_t>((handle * 0x9E3779B97F4A7C15ull) >> 40) & (kSlots - 1);
  }

  Slot slots_[kSlots];
  std::atomic<size_t> live_{0};
};

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_MPI_REQUEST_TABLE_H_
