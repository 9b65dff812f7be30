// RangeStore: the NVTX ranges (and engine-mapped API calls) of one rank file, collected in the
// order the file holds them and handed back per thread in start order, with memory bounded by a
// budget instead of by the file's size.
//
// The agent writes a push/pop range when it ends, so a thread's ranges arrive in post-order:
// children before their parent, siblings in time order. Ranges are buffered per thread; when
// the store holds `budget` buffered ranges it sorts each thread's buffer and appends it to a
// temporary file as one run (tmpfile(): gone when the store is). Every later range of that
// thread either starts after everything already spilled (it goes to the next run, so the runs
// concatenated stay in start order), or is "late": an ancestor of spilled ranges (at most the
// nesting depth per spill) or a range out of order (cross-thread start/end ranges), kept in
// memory. Reading merges a thread's runs with its late ranges.
//
// Memory: buffers of at most `budget` ranges in all (capacity, not just size), plus the late
// ones, plus one read buffer per open cursor. A file with fewer ranges never touches the disk.
//
// Order: by start, longer first (end descending); the same as sorting the thread's ranges.
// Thread safety: one store per thread of the analysis; not shared.
#ifndef PROFAGENT_ANALYZER_REPORT_RANGE_STORE_H_
#define PROFAGENT_ANALYZER_REPORT_RANGE_STORE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace profagent {
namespace analyzer {

// 24 bytes per range kept or spilled. String ids are below 2^30, so the flags fit beside them.
struct StoredRange {
  uint64_t start, end;
  uint32_t thread;
  uint32_t name : 30;
  uint32_t frame : 1;  // a step or run range: never an engine bucket
  uint32_t api : 1;    // a host API call mapped by an engine `api` rule (not NVTX)
};
static_assert(sizeof(StoredRange) == 24, "StoredRange is kept or spilled per range");

inline bool RangeBefore(const StoredRange& a, const StoredRange& b) {
  if (a.start != b.start) return a.start < b.start;
  return a.end > b.end;
}

class RangeStore {
 public:
  // `budget`: buffered ranges before spilling (the default, 2^20, is 24 MB).
  explicit RangeStore(size_t budget = size_t(1) << 20) : budget_(budget) {}
  ~RangeStore();
  RangeStore(const RangeStore&) = delete;
  RangeStore& operator=(const RangeStore&) = delete;

  // Adds a range (file order). After an I/O error the store keeps everything in memory.
  void Add(const StoredRange& r);
  // Ends adding: sorts what is buffered. Call once, before reading.
  void Finish();
  // Frees everything (memory and the temporary file). Open cursors must be gone.
  void Clear();

  // The threads that have ranges, ascending.
  std::vector<uint32_t> Threads() const;
  size_t size() const { return count_; }
  uint64_t spilled() const { return spilled_; }  // ranges written to the temporary file
  size_t late() const { return late_total_; }    // ranges kept in memory as "late"

  // Reads one thread's ranges in order. Several cursors may be open at once, on any threads.
  class Cursor {
   public:
    // The next range, or nullptr at the end. The pointer is valid until the next call.
    const StoredRange* Peek();
    // Moves past the range Peek() returned.
    void Advance();
    // Back to the thread's first range.
    void Rewind();

   private:
    friend class RangeStore;
    const StoredRange* HeadOfRuns();
    const RangeStore* store_ = nullptr;
    const void* ranges_ = nullptr;  // the thread's ThreadRanges, nullptr = none
    size_t block_ = 0;              // next spilled block to read from
    uint64_t in_block_ = 0;         // ranges of that block already read
    std::vector<StoredRange> buf_;  // ranges read from the file
    size_t buf_pos_ = 0;
    size_t tail_pos_ = 0;           // position in the in-memory last run
    size_t late_pos_ = 0;
    bool head_is_late_ = false;     // what Peek() returned last
  };
  // A cursor at the thread's first range (an empty one for a thread without ranges).
  std::unique_ptr<Cursor> Open(uint32_t thread) const;

 private:
  struct Block {
    uint64_t offset;  // bytes into the temporary file
    uint64_t count;
  };
  struct ThreadRanges {
    std::vector<StoredRange> buffer;  // not yet spilled (sorted after Finish)
    std::vector<StoredRange> late;    // sorted after Finish
    std::vector<Block> blocks;        // spilled runs, in order
    uint64_t spilled_max_start = 0;
    bool any_spilled = false;
  };
  void Spill();
  bool ReadBlock(const Block& b, uint64_t from, size_t n, StoredRange* out) const;

  size_t budget_;
  size_t buffered_ = 0;
  size_t reserved_ = 0;  // capacity of the buffers, in ranges (what the budget bounds)
  size_t count_ = 0;
  size_t late_total_ = 0;
  uint64_t spilled_ = 0;
  bool finished_ = false;
  bool spill_failed_ = false;
  FILE* file_ = nullptr;
  uint64_t file_bytes_ = 0;
  absl::flat_hash_map<uint32_t, ThreadRanges> threads_;
};

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_RANGE_STORE_H_
