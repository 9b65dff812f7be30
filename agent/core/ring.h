// Single-producer/single-consumer ring of RawEvent slots.
//
// The producer is one application thread (its hooks); the consumer is the writer thread. The
// producer publishes with one release store of `head_`; the consumer frees slots with one
// release store of `tail_`. Neither side locks or allocates. Capacity is a power of two fixed
// at construction (PROFAGENT_RING_SIZE).
//
// When the ring is full the producer either drops the event (counting it) or waits for the
// consumer (policy block). A multi-slot push (event + continuation slots) is all or nothing.
#ifndef PROFAGENT_AGENT_CORE_RING_H_
#define PROFAGENT_AGENT_CORE_RING_H_

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "agent/core/event.h"

namespace profagent {

class Ring {
 public:
  // `slots` must be a power of two >= 2. Allocates (slow path).
  explicit Ring(uint32_t slots);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  uint32_t capacity() const { return mask_ + 1; }

  // Producer side. Returns false when there is no room for 1 + extra slots.
  // `extra` slots are filled from `bytes` (n bytes, zero-padded).
  inline bool TryPush(const RawEvent& e) {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (__builtin_expect(h - cached_tail_ >= capacity(), 0)) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (h - cached_tail_ >= capacity()) return false;
    }
    slots_[h & mask_] = e;
    head_.store(h + 1, std::memory_order_release);
    __builtin_prefetch(&slots_[(h + 1) & mask_], 1);  // as in Commit()
    return true;
  }
  bool TryPushWithBytes(const RawEvent& e, const void* bytes, size_t n, uint16_t extra);

  // Zero-copy variant of TryPush: the next free slot to fill in place, or nullptr when full.
  // The consumer sees the slot only after Commit(); no other push may come in between.
  inline RawEvent* TryReserve() {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (__builtin_expect(h - cached_tail_ >= capacity(), 0)) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (h - cached_tail_ >= capacity()) return nullptr;
    }
    return &slots_[h & mask_];
  }
  inline void Commit() {
    const uint64_t h = head_.load(std::memory_order_relaxed) + 1;
    head_.store(h, std::memory_order_release);
    // Own the next slot's line before the next event is written (the writer last read it).
    __builtin_prefetch(&slots_[h & mask_], 1);
  }

  // Producer side: events pushed or dropped so far (changes with every Emit of the thread).
  uint64_t produced() const {
    return head_.load(std::memory_order_relaxed) + drops_.load(std::memory_order_relaxed);
  }

  // Counted by the producer (relaxed; read by the writer).
  void CountDrop() { drops_.store(drops_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  uint64_t drops() const { return drops_.load(std::memory_order_relaxed); }

  // Consumer side: the slots [tail, head) are readable. Call Consume(n) after reading n.
  uint64_t ReadableBegin() const { return tail_.load(std::memory_order_relaxed); }
  uint64_t ReadableEnd() const { return head_.load(std::memory_order_acquire); }
  const RawEvent& At(uint64_t i) const { return slots_[i & mask_]; }
  void Consume(uint64_t new_tail) { tail_.store(new_tail, std::memory_order_release); }

  // Producer-side reset for reuse by a new thread (the ring must be empty).
  void ResetForReuse() { cached_tail_ = tail_.load(std::memory_order_acquire); }

 private:
  RawEvent* slots_;
  uint32_t mask_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer's last view of tail_
  std::atomic<uint64_t> drops_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_RING_H_
