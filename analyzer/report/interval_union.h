// IntervalUnion: the union of [start, end) intervals (device ops) that arrive nearly, but not
// exactly, in start order. Ops of several streams are joined in the order their records came
// (CUPTI hands them over as they complete), so an op can arrive after a later-starting one; a
// running "end so far" would then count overlapping time twice and report gaps that are not
// there.
//
// Merged intervals stay open while an op that starts inside them may still come: until they end
// more than the horizon before the latest start seen (the horizon grows with the longest op, so
// a long kernel reported after the short ones that ran beside it still merges). Then they are
// final: handed to `done(start, end, tag)` in start order, `tag` being that of the earliest op in
// them. An op arriving after the time it covers was made final only adds what lies beyond it.
// Memory: the open intervals.
//
// Thread compatibility: not thread-safe; one per analysis thread.
#ifndef PROFAGENT_ANALYZER_REPORT_INTERVAL_UNION_H_
#define PROFAGENT_ANALYZER_REPORT_INTERVAL_UNION_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <deque>

namespace profagent {
namespace analyzer {

template <typename Tag>
class IntervalUnion {
 public:
  // `min_horizon_ns`: how far before the latest start an interval must end to be final, at
  // least (twice the longest op seen, if more).
  explicit IntervalUnion(uint64_t min_horizon_ns) : min_horizon_(min_horizon_ns) {}

  template <typename Done>
  void Add(uint64_t start, uint64_t end, const Tag& tag, Done&& done) {
    if (end <= start) return;
    longest_ = std::max(longest_, end - start);
    latest_start_ = std::max(latest_start_, start);
    start = std::max(start, final_end_);
    if (end > start) Merge(start, end, tag);
    const uint64_t horizon = std::max(min_horizon_, 2 * longest_);
    while (!open_.empty() && open_.front().end + horizon < latest_start_) {
      Finish(done);
    }
  }

  // Everything still open is final.
  template <typename Done>
  void Flush(Done&& done) {
    while (!open_.empty()) Finish(done);
  }

 private:
  struct Open {
    uint64_t start, end;
    Tag tag;
  };

  void Merge(uint64_t start, uint64_t end, const Tag& tag) {
    // Fast paths: in start order (the common case), after or over the last open interval.
    if (open_.empty() || start > open_.back().end) {
      if (open_.empty() || start >= open_.back().start) {
        open_.push_back(Open{start, end, tag});
        return;
      }
    } else if (start >= open_.back().start) {
      open_.back().end = std::max(open_.back().end, end);
      return;
    }
    // Out of order: merge with every open interval it overlaps or touches.
    auto it = std::upper_bound(open_.begin(), open_.end(), start,
                               [](uint64_t t, const Open& o) { return t < o.start; });
    Tag first = tag;  // the earliest op's
    if (it != open_.begin() && std::prev(it)->end >= start) {
      --it;
      start = it->start;
      first = it->tag;
    }
    auto last = it;
    while (last != open_.end() && last->start <= end) {
      end = std::max(end, last->end);
      ++last;
    }
    it = open_.erase(it, last);
    open_.insert(it, Open{start, end, first});
  }

  template <typename Done>
  void Finish(Done& done) {
    const Open& o = open_.front();
    done(o.start, o.end, o.tag);
    final_end_ = std::max(final_end_, o.end);
    open_.pop_front();
  }

  uint64_t min_horizon_;
  uint64_t longest_ = 0;
  uint64_t latest_start_ = 0;
  uint64_t final_end_ = 0;  // time before this is final
  std::deque<Open> open_;  // by start, disjoint, not touching
};

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_INTERVAL_UNION_H_
