// Communicator bookkeeping shared by the NCCL and MPI hooks: per-communicator sequence numbers
// and the identity the analyzer uses to match one communicator across ranks.
//
// A CommTable maps a communicator handle (ncclComm_t or MPI_Comm as an integer) to a CommSlot.
// Find() is hot-path safe (lock-free: bounded linear probe over atomics, no allocation); Insert()
// and Remove() are slow-path (a mutex serializes writers) and are called once per communicator
// creation/destruction. Sequence counters are atomics, so collectives issued on one communicator
// from several threads still get distinct numbers (the order between threads is the order of the
// fetch_add, which is the best a host-side observer can know).
//
// Handle reuse: when a communicator is destroyed and the library hands the same handle value to
// a new one, Insert() resets the slot (new counters, new unique id), so sequence numbers restart
// at 0 exactly as they do on the other ranks.
#ifndef PROFAGENT_AGENT_HOOKS_NCCL_COMM_TABLE_H_
#define PROFAGENT_AGENT_HOOKS_NCCL_COMM_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace profagent {

// An MPI intercommunicator's two groups, recorded as one communicator of both (see AddComm in
// mpi_hooks.cc): ranks of the remote group are `remote_base` + their rank there, this rank's
// group starts at `local_base`. remote_size 0: an intracommunicator (and every NCCL one).
struct InterGroups {
  int32_t local_base = 0;
  int32_t remote_base = 0;
  int32_t remote_size = 0;
};

struct CommSlot {
  std::atomic<uint64_t> key{0};        // handle; 0 = never used, kTombstone = removed
  std::atomic<uint32_t> coll_seq{0};   // next sequence number of a collective
  std::atomic<uint32_t> p2p_seq{0};    // point-to-point calls of this rank, any peer
  // Per-peer transfer counters, 2 * size entries (sends to peer p at [2p], receives from p at
  // [2p + 1]), allocated by Insert(); nullptr when size is unknown. Sized for the communicator:
  // a later Insert() with a larger size allocates a new array and leaks the old one (a reader
  // may still hold it; communicator churn is rare), see NextSendSeq/NextRecvSeq.
  std::atomic<std::atomic<uint32_t>*> peer_seq{nullptr};
  std::atomic<int32_t> peer_slots{0};
  // MPI: communicators created so far with this one as parent (collectively over all of its
  // members, so the count is equal on every member; see mpi_hooks.cc AddComm).
  std::atomic<uint32_t> created{0};
  // Written by Insert() before `key` is published (release), read-only afterwards except
  // `splits`, which only slow-path code (under the table's mutex) touches.
  int32_t rank = -1;
  int32_t size = 0;
  uint64_t uid_hash = 0;               // equal on every member of the communicator
  uint32_t splits = 0;                 // ncclCommSplit/MPI splits seen with this as parent
  int32_t device = -1;                 // CUDA device of an NCCL communicator, -1 = unknown
  InterGroups inter;
};

class CommTable {
 public:
  static constexpr size_t kSlots = 256;  // power of two
  static constexpr uint64_t kTombstone = ~0ull;

  CommTable() = default;
  CommTable(const CommTable&) = delete;
  CommTable& operator=(const CommTable&) = delete;

  // Hot path. The slot of `handle`, or nullptr if unknown (or handle is 0 / kTombstone).
  CommSlot* Find(uint64_t handle);

  // Slow path. Inserts `handle` (or resets its slot if present) with fresh counters. Returns
  // nullptr when the table is full (the caller records the calls without a sequence number).
  CommSlot* Insert(uint64_t handle, int rank, int size, uint64_t uid_hash, int device = -1,
                   InterGroups inter = InterGroups{});

  // Slow path. Forgets `handle` (its slot becomes a tombstone). No-op when unknown.
  void Remove(uint64_t handle);

  // Slow path: runs `fn(slot)` under the table's mutex (for `splits` and similar fields).
  template <typename Fn>
  auto WithLock(CommSlot* slot, Fn fn) -> decltype(fn(slot)) {
    std::lock_guard<std::mutex> l(mu_);
    return fn(slot);
  }

  // Number of live entries (approximate while writers run).
  size_t size() const { return live_.load(std::memory_order_relaxed); }

 private:
  static size_t Home(uint64_t handle);
  CommSlot slots_[kSlots];
  std::atomic<size_t> live_{0};
  std::mutex mu_;
};

// The sequence number of a call that has none (the analyzer matches no other call to it).
constexpr uint32_t kNoSeq = 0xffffffffu;

// Post-increment of the collective counter: the sequence number of this call.
inline uint32_t NextCollSeq(CommSlot* s) {
  return s ? s->coll_seq.fetch_add(1, std::memory_order_relaxed) : kNoSeq;
}
inline uint32_t NextP2pSeq(CommSlot* s) {
  return s ? s->p2p_seq.fetch_add(1, std::memory_order_relaxed) : kNoSeq;
}

// The n-th transfer of the ordered pair (this rank -> peer) for a send, (peer -> this rank) for
// a receive: equal on both sides of a matched send/receive (MPI and NCCL both match in order
// between a pair of ranks on one communicator). 0xffffffff when the peer is outside the
// communicator (MPI_ANY_SOURCE, MPI_PROC_NULL) or the slot is unknown.
inline uint32_t NextPeerSeq(CommSlot* s, int peer, bool recv) {
  if (s == nullptr || peer < 0 || peer >= s->peer_slots.load(std::memory_order_acquire) / 2)
    return kNoSeq;
  std::atomic<uint32_t>* a = s->peer_seq.load(std::memory_order_acquire);
  return a[2 * peer + (recv ? 1 : 0)].fetch_add(1, std::memory_order_relaxed);
}

// Gives back number `seq`, taken by a call that turned out to transfer nothing (it failed, or
// was cancelled), when it is still the latest one taken: the next call gets it. False when a
// later number was taken since (the gap stays).
inline bool ReturnCollSeq(CommSlot* s, uint32_t seq) {
  uint32_t next = seq + 1;
  return s != nullptr && seq != kNoSeq && s->coll_seq.compare_exchange_strong(next, seq);
}
inline bool ReturnPeerSeq(CommSlot* s, int peer, bool recv, uint32_t seq) {
  if (s == nullptr || seq == kNoSeq || peer < 0 ||
      peer >= s->peer_slots.load(std::memory_order_acquire) / 2)
    return false;
  std::atomic<uint32_t>* a = s->peer_seq.load(std::memory_order_acquire);
  uint32_t next = seq + 1;
  return a[2 * peer + (recv ? 1 : 0)].compare_exchange_strong(next, seq);
}

// 64-bit FNV-1a, used for unique-id hashes (stable across processes and builds).
uint64_t Fnv1a64(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);

// Combines a parent communicator's hash with the arguments of a split so that every member of
// the new communicator computes the same value (color, n-th split of this parent, a salt).
uint64_t SplitHash(uint64_t parent_hash, int64_t color, uint32_t split_index, uint32_t salt);

// "<prefix>:<16 hex digits>" (slow path; allocates).
std::string UidString(const char* prefix, uint64_t hash);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_NCCL_COMM_TABLE_H_
