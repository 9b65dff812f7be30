// Single-producer/single-consumer ring of RawEvent slots.
//
// The producer is one application thread (its hooks); the consumer is the writer thread. The
// producer publishes with one release store of `head_`; the consumer frees slots with one
// release store of `tail_`. Neither side locks or allocates. Capacity is a power of two fixed
// at construction (PROFAGENT_RING_SIZE).
//
// When the ring is full the producer either drops the event (counting it) or waits for the
// consumer (policy block). A multi-slot push (event + continuation slots) is all or nothing.
// The consumer drains on a timer; a producer that fills half the ring calls the high-water hook
// (set once by the agent: wake the writer now) and again after every further quarter, so a
// burst is drained early instead of overflowing a ring the writer could have kept up with.
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
  // False when the slots could not be allocated: every push fails (a drop), none ever fits.
  bool usable() const { return slots_ != nullptr; }

  // Producer side. Returns false when there is no room for 1 + extra slots.
  // `extra` slots are filled from `bytes` (n bytes, zero-padded).
  inline bool TryPush(const RawEvent& e) {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (__builtin_expect(h + 1 > check_at_, 0) && !Room(h, 1)) return false;
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
    if (__builtin_expect(h + 1 > check_at_, 0) && !Room(h, 1)) return nullptr;
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

  // Reset for reuse by a new thread: the ring must be empty and no consumer reading it. It
  // starts over at slot 0, so a ring reused by short-lived threads keeps writing the pages it
  // already touched (carrying on from its old position would make every slot resident in time).
  void ResetForReuse() {
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    check_at_ = 0;
  }

  // Called by a producer whose ring is at least half full (at most once per quarter of the
  // capacity pushed). Set once, before any producer runs; must not push to a ring.
  static void SetHighWaterHook(void (*hook)()) { high_water_hook_ = hook; }

 private:
  // Slow path of a push of `need` slots at head `h`: reads the consumer's tail; false when the
  // slots do not fit. Otherwise sets the next check point, calling the hook at high water.
  bool Room(uint64_t h, uint64_t need);

  static void (*high_water_hook_)();

  RawEvent* slots_;
  uint32_t mask_;
  alignas(64) std::atomic<uint64_t> head_{0};
  // Producer only: pushes that end at or before check_at_ fit without reading tail_ (it is
  // never beyond the last seen tail + capacity).
  uint64_t check_at_ = 0;
  std::atomic<uint64_t> drops_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_RING_H_
