#include "analysis/core/level_index.h"

#include <algorithm>
#include <limits>

#include "memsnap/replay.h"

namespace memsnap {
namespace {

// Min and max of each run of `width` values (the last may be shorter).
void reduce(const std::vector<int64_t>& low, const std::vector<int64_t>& high, uint64_t width,
            std::vector<int64_t>& out_low, std::vector<int64_t>& out_high) {
  const uint64_t count = (low.size() + width - 1) / width;
  out_low.assign(count, std::numeric_limits<int64_t>::max());
  out_high.assign(count, std::numeric_limits<int64_t>::min());
  for (uint64_t i = 0; i < low.size(); ++i) {
    out_low[i / width] = std::min(out_low[i / width], low[i]);
    out_high[i / width] = std::max(out_high[i / width], high[i]);
  }
}

}  // namespace

LevelIndex::LevelIndex(const Snapshot& snapshot, const DeviceTrace& trace) {
  levels_.reserve(trace.count() + 1);
  levels_.push_back(0);
  Replay replay(snapshot);
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    replay.apply(i);
    levels_.push_back(replay.delta());
  }
  reduce(levels_, levels_, kBlock, block_min_, block_max_);
  reduce(block_min_, block_max_, kBlock, super_min_, super_max_);
}

std::pair<int64_t, int64_t> LevelIndex::range(uint64_t from, uint64_t to) const {
  int64_t low = std::numeric_limits<int64_t>::max();
  int64_t high = std::numeric_limits<int64_t>::min();
  const auto take = [&](int64_t l, int64_t h) {
    low = std::min(low, l);
    high = std::max(high, h);
  };
  uint64_t i = from;
  const uint64_t end = to + 1;
  constexpr uint64_t kSuper = kBlock * kBlock;
  while (i < end) {
    if (i % kSuper == 0 && i + kSuper <= end) {
      take(super_min_[i / kSuper], super_max_[i / kSuper]);
      i += kSuper;
    } else if (i % kBlock == 0 && i + kBlock <= end) {
      take(block_min_[i / kBlock], block_max_[i / kBlock]);
      i += kBlock;
    } else {
      take(levels_[i], levels_[i]);
      ++i;
    }
  }
  return {low, high};
}

}  // namespace memsnap
