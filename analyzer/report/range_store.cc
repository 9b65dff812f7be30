#include "analyzer/report/range_store.h"

#include <unistd.h>

#include <algorithm>

namespace profagent {
namespace analyzer {

namespace {
constexpr size_t kReadChunk = 4096;  // ranges per read from the temporary file
}  // namespace

RangeStore::~RangeStore() {
  if (file_ != nullptr) fclose(file_);
}

void RangeStore::Add(const StoredRange& r) {
  ThreadRanges& t = threads_[r.thread];
  ++count_;
  if (t.buffer.size() == t.buffer.capacity() && !spill_failed_) {
    // Growing this buffer would take the store past its budget: spill everything first.
    const size_t grown = std::max<size_t>(64, 2 * t.buffer.capacity());
    if (reserved_ - t.buffer.capacity() + grown > budget_ && buffered_ > 0) Spill();
    const size_t before = t.buffer.capacity();
    t.buffer.reserve(std::max<size_t>(64, std::min(2 * before, budget_)));
    reserved_ += t.buffer.capacity() - before;
  }
  if (t.any_spilled && r.start <= t.spilled_max_start) {
    // An ancestor of spilled ranges (or a range out of order): it must come before some of
    // them, which are on disk already.
    t.late.push_back(r);
    ++late_total_;
    return;
  }
  t.buffer.push_back(r);
  ++buffered_;
}

void RangeStore::Spill() {
  if (file_ == nullptr) {
    file_ = tmpfile();
    if (file_ == nullptr) {
      spill_failed_ = true;
      return;
    }
  }
  for (auto& kv : threads_) {
    ThreadRanges& t = kv.second;
    if (t.buffer.empty()) continue;
    std::sort(t.buffer.begin(), t.buffer.end(), RangeBefore);
    const size_t n = t.buffer.size();
    if (fwrite(t.buffer.data(), sizeof(StoredRange), n, file_) != n) {
      spill_failed_ = true;  // keep what is buffered in memory from now on
      return;
    }
    t.blocks.push_back(Block{file_bytes_, n});
    file_bytes_ += n * sizeof(StoredRange);
    spilled_ += n;
    uint64_t max_start = 0;
    for (const StoredRange& r : t.buffer) max_start = std::max(max_start, r.start);
    t.spilled_max_start = t.any_spilled ? std::max(t.spilled_max_start, max_start) : max_start;
    t.any_spilled = true;
    buffered_ -= n;
    reserved_ -= t.buffer.capacity();
    std::vector<StoredRange>().swap(t.buffer);
  }
  if (fflush(file_) != 0) spill_failed_ = true;
}

void RangeStore::Finish() {
  if (finished_) return;
  finished_ = true;
  for (auto& kv : threads_) {
    ThreadRanges& t = kv.second;
    std::sort(t.buffer.begin(), t.buffer.end(), RangeBefore);
    std::sort(t.late.begin(), t.late.end(), RangeBefore);
  }
}

void RangeStore::Clear() {
  absl::flat_hash_map<uint32_t, ThreadRanges>().swap(threads_);
  if (file_ != nullptr) fclose(file_);
  file_ = nullptr;
  file_bytes_ = 0;
  buffered_ = 0;
  reserved_ = 0;
}

std::vector<uint32_t> RangeStore::Threads() const {
  std::vector<uint32_t> v;
  v.reserve(threads_.size());
  for (const auto& kv : threads_) v.push_back(kv.first);
  std::sort(v.begin(), v.end());
  return v;
}

bool RangeStore::ReadBlock(const Block& b, uint64_t from, size_t n, StoredRange* out) const {
  if (file_ == nullptr) return false;
  const off_t at = off_t(b.offset + from * sizeof(StoredRange));
  const size_t bytes = n * sizeof(StoredRange);
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = pread(fileno(file_), reinterpret_cast<char*>(out) + done, bytes - done,
                        at + off_t(done));
    if (got <= 0) return false;
    done += size_t(got);
  }
  return true;
}

std::unique_ptr<RangeStore::Cursor> RangeStore::Open(uint32_t thread) const {
  auto c = std::make_unique<Cursor>();
  c->store_ = this;
  auto it = threads_.find(thread);
  c->ranges_ = it == threads_.end() ? nullptr : &it->second;
  return c;
}

const StoredRange* RangeStore::Cursor::HeadOfRuns() {
  const auto* t = static_cast<const ThreadRanges*>(ranges_);
  while (buf_pos_ == buf_.size()) {
    if (block_ >= t->blocks.size()) {
      return tail_pos_ < t->buffer.size() ? &t->buffer[tail_pos_] : nullptr;
    }
    const Block& b = t->blocks[block_];
    const size_t n = size_t(std::min<uint64_t>(kReadChunk, b.count - in_block_));
    buf_.resize(n);
    buf_pos_ = 0;
    if (!store_->ReadBlock(b, in_block_, n, buf_.data())) {
      buf_.clear();  // unreadable: the rest of this run is lost (the file is ours; unlikely)
      ++block_;
      in_block_ = 0;
      continue;
    }
    in_block_ += n;
    if (in_block_ == b.count) {
      ++block_;
      in_block_ = 0;
    }
  }
  return &buf_[buf_pos_];
}

const StoredRange* RangeStore::Cursor::Peek() {
  if (ranges_ == nullptr) return nullptr;
  const auto* t = static_cast<const ThreadRanges*>(ranges_);
  const StoredRange* a = HeadOfRuns();
  const StoredRange* l = late_pos_ < t->late.size() ? &t->late[late_pos_] : nullptr;
  head_is_late_ = l != nullptr && (a == nullptr || RangeBefore(*l, *a));
  return head_is_late_ ? l : a;
}

void RangeStore::Cursor::Advance() {
  if (ranges_ == nullptr) return;
  if (head_is_late_) {
    ++late_pos_;
  } else if (buf_pos_ < buf_.size()) {
    ++buf_pos_;
  } else {
    ++tail_pos_;
  }
  head_is_late_ = false;
}

void RangeStore::Cursor::Rewind() {
  block_ = 0;
  in_block_ = 0;
  buf_.clear();
  buf_pos_ = 0;
  tail_pos_ = 0;
  late_pos_ = 0;
  head_is_late_ = false;
}

}  // namespace analyzer
}  // namespace profagent
