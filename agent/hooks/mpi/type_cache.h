// MPI datatype handle -> (name index, element size), filled at first sight of each datatype.
//
// MPI handles differ between implementations (Open MPI: pointers to predefined objects; MPICH:
// integers), so names are not compiled in: the hook asks PMPI_Type_get_name / PMPI_Type_size the
// first time a datatype shows up and caches named (predefined or user-named) types here. Unnamed
// (derived) types are not cached (their handles are freed and reused); they all map to index
// kDerived and their size is asked each time.
//
// Find() is hot-path safe (lock-free scan of at most kMax entries published with release/acquire).
// Add() is slow path (mutex). Names() is a stable array of kMax C strings for RegisterCollTables;
// entries past count() are "".
#ifndef PROFAGENT_AGENT_HOOKS_MPI_TYPE_CACHE_H_
#define PROFAGENT_AGENT_HOOKS_MPI_TYPE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <mutex>

namespace profagent {

class TypeCache {
 public:
  static constexpr int kMax = 64;
  static constexpr int kNameLen = 64;
  static constexpr uint8_t kDerived = 0;  // "derived": unnamed datatypes
  static constexpr uint8_t kUnknown = 1;  // "unknown": not looked at (count 0, table full)

  TypeCache();
  TypeCache(const TypeCache&) = delete;
  TypeCache& operator=(const TypeCache&) = delete;

  // Hot path. Index of `handle`, or -1 when not cached.
  int Find(uint64_t handle) const;

  // Slow path. Caches `handle` as `name` (cut to kNameLen-1 chars) with element `size`. Returns its
  // index (the existing one if already cached), or kUnknown when the table is full.
  int Add(uint64_t handle, const char* name, uint32_t size);

  // Slow path. MPI_Type_free: the handle may come back as another datatype, so its entry no
  // longer matches it (the entry's index keeps its name for the events already recorded).
  void Forget(uint64_t handle);

  uint32_t Size(int index) const { return entries_[index].size; }
  const char* const* Names() const { return names_; }
  int count() const { return count_.load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kForgotten = ~0ull;  // never a (masked) handle
  struct Entry {
    std::atomic<uint64_t> handle{0};
    uint32_t size = 0;
    char name[kNameLen] = {};
  };
  Entry entries_[kMax];
  const char* names_[kMax];
  std::atomic<int> count_{0};
  std::mutex mu_;
};

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_MPI_TYPE_CACHE_H_
