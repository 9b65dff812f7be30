// Bounded lock-free multi-producer multi-consumer queue (Vyukov's sequence-numbered ring).
// Fixed capacity N (power of two), no allocation, never blocks: Push fails when full, Pop when
// empty. Hot-path safe. Call Init() once before use (not thread-safe itself).
#ifndef PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_MPMC_QUEUE_H_
#define PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_MPMC_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace profagent {
namespace rt {

template <typename T, size_t N>
class MpmcQueue {
  static_assert((N & (N - 1)) == 0, "N must be a power of two");

 public:
  void Init() {
    for (size_t i = 0; i < N; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    enq_.store(0, std::memory_order_relaxed);
    deq_.store(0, std::memory_order_relaxed);
  }

  // Elements queued, approximately (racing pushes and pops may be half counted).
  size_t ApproxSize() const {
    const size_t e = enq_.load(std::memory_order_relaxed), d = deq_.load(std::memory_order_relaxed);
    return e > d ? e - d : 0;
  }

  bool Push(const T& v) {
    size_t pos = enq_.load(std::memory_order_relaxed);
    Cell* c;
    for (;;) {
      c = &cells_[pos & (N - 1)];
      size_t seq = c->seq.load(std::memory_order_acquire);
      intptr_t dif = intptr_t(seq) - intptr_t(pos);
      if (dif == 0) {
        if (enq_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (dif < 0) {
        return false;
      } else {
        pos = enq_.load(std::memory_order_relaxed);
      }
    }
    c->data = v;
    c->seq.store(pos + 1, std::memory_order_release);
    return true;
  }

  bool Pop(T* v) {
    size_t pos = deq_.load(std::memory_order_relaxed);
    Cell* c;
    for (;;) {
      c = &cells_[pos & (N - 1)];
      size_t seq = c->seq.load(std::memory_order_acquire);
      intptr_t dif = intptr_t(seq) - intptr_t(pos + 1);
      if (dif == 0) {
        if (deq_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (dif < 0) {
        return false;
      } else {
        pos = deq_.load(std::memory_order_relaxed);
      }
    }
    *v = c->data;
    c->seq.store(pos + N, std::memory_order_release);
    return true;
  }

 private:
  struct Cell {
    std::atomic<size_t> seq{0};
    T data{};
  };
  Cell cells_[N];
  alignas(64) std::atomic<size_t> enq_{0};
  alignas(64) std::atomic<size_t> deq_{0};
};

}  // namespace rt
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUDA_RUNTIME_MPMC_QUEUE_H_
