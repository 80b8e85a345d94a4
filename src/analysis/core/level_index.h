// The level of memory after every entry of a device's trace, indexed for
// min and max over any range of entries: a memory line at any window and any
// width without walking the trace again (memsnap serve redraws on every
// zoom). The levels are the replay's delta (include/memsnap/replay.h), the
// same numbers as replay-to-time's. 8 bytes per entry, and 1/32 of that for
// the blocks.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

class LevelIndex {
 public:
  LevelIndex() = default;
  LevelIndex(const Snapshot& snapshot, const DeviceTrace& trace);

  // Positions are counts of entries applied: 0 (before the first) to count().
  [[nodiscard]] uint64_t count() const { return levels_.empty() ? 0 : levels_.size() - 1; }
  // The delta after `position` entries.
  [[nodiscard]] int64_t at(uint64_t position) const { return levels_[position]; }
  // The lowest and highest delta at positions from..to, both included
  // (from <= to <= count()).
  [[nodiscard]] std::pair<int64_t, int64_t> range(uint64_t from, uint64_t to) const;

 private:
  static constexpr uint64_t kBlock = 64;  // positions per block, blocks per super-block
  std::vector<int64_t> levels_;           // count() + 1
  std::vector<int64_t> block_min_, block_max_;
  std::vector<int64_t> super_min_, super_max_;
};

}  // namespace memsnap
