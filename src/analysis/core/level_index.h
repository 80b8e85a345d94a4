// The level of memory after every entry of a device's trace, indexed for
// min and max over any range of entries: a memory line at any window and any
// width without walking the trace again (memsnap serve redraws on every
// zoom). The levels are the replay's delta (include/memsnap/replay.h), the
// same numbers as replay-to-time's. 8 bytes per entry, and 1/32 of that for
// the blocks.
//
// The same replay gives every allocation's span (AllocationSpans): the
// positions it was live at, kept largest first, so that serve's allocation
// view finds the largest allocations live in any window by one scan.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

class AllocationSpans;

class LevelIndex {
 public:
  LevelIndex() = default;
  // Fills `spans` from the same replay.
  LevelIndex(const Snapshot& snapshot, const DeviceTrace& trace, AllocationSpans& spans);

  // Positions are counts of entries applied: 0 (before the first) to count().
  [[nodiscard]] uint64_t count() const { return levels_.empty() ? 0 : levels_.size() - 1; }
  // The delta after `position` entries.
  [[nodiscard]] int64_t at(uint64_t position) const { return levels_[position]; }
  // The lowest and highest delta at positions from..to, both included
  // (from <= to <= count()).
  [[nodiscard]] std::pair<int64_t, int64_t> range(uint64_t from, uint64_t to) const;
  // The first position in from..to (both included) where the delta is that
  // range's highest.
  [[nodiscard]] uint64_t peak_position(uint64_t from, uint64_t to) const;

 private:
  static constexpr uint64_t kBlock = 64;  // positions per block, blocks per super-block
  std::vector<int64_t> levels_;           // count() + 1
  std::vector<int64_t> block_min_, block_max_;
  std::vector<int64_t> super_min_, super_max_;
};

// An allocation as the positions it was live at: from `begin` (after its
// alloc entry) to before `end` (after the entry that ended it: its
// free_completed, or an alloc at its address that replaced it), or to the
// end of the trace (end = count() + 1). Its alloc entry is begin - 1.
struct AllocationSpan {
  uint64_t begin = 0;
  uint64_t end = 0;
  [[nodiscard]] uint64_t entry() const { return begin - 1; }
  [[nodiscard]] bool live_at(uint64_t position) const {
    return begin <= position && position < end;
  }
};

// Every allocation of a device's trace, largest first (then by entry).
// 16 bytes per allocation; sizes are read from the trace's columns.
class AllocationSpans {
 public:
  [[nodiscard]] const std::vector<AllocationSpan>& by_size() const { return spans_; }
  [[nodiscard]] uint64_t size_of(const AllocationSpan& span) const {
    return events_->size[trace_begin_ + span.entry()];
  }
  // The span of the allocation made by trace entry `entry` of `size` bytes;
  // nullptr when that entry made none.
  [[nodiscard]] const AllocationSpan* find(uint64_t entry, uint64_t size) const;

 private:
  friend class LevelIndex;
  std::vector<AllocationSpan> spans_;
  const EventColumns* events_ = nullptr;  // the snapshot's, which outlives the analysis
  uint64_t trace_begin_ = 0;              // the trace's first model index
};

}  // namespace memsnap
