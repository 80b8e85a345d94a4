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

// Collects the spans in the order the allocations were made (their
// ordinals), then sorts them largest first.
struct SpanCollector {
  struct Open {
    uint64_t size;
    AllocationSpan span;
  };
  uint64_t trace_begin;
  uint64_t end_of_trace;  // count() + 1
  std::vector<Open> spans;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    spans.push_back({added.size, {event - trace_begin + 1, end_of_trace}});
  }
  void on_replace(uint64_t event, const LiveAllocation& replaced) { end(event, replaced); }
  void on_free(uint64_t event, const LiveAllocation& freed) { end(event, freed); }
  void end(uint64_t event, const LiveAllocation& allocation) {
    spans[allocation.ordinal].span.end = event - trace_begin + 1;
  }
  std::vector<AllocationSpan> sorted() {
    std::sort(spans.begin(), spans.end(), [](const Open& a, const Open& b) {
      return a.size != b.size ? a.size > b.size : a.span.begin < b.span.begin;
    });
    std::vector<AllocationSpan> out;
    out.reserve(spans.size());
    for (const Open& open : spans) out.push_back(open.span);
    spans = {};
    return out;
  }
};

}  // namespace

LevelIndex::LevelIndex(const Snapshot& snapshot, const DeviceTrace& trace, AllocationSpans& spans) {
  levels_.reserve(trace.count() + 1);
  levels_.push_back(0);
  Replay replay(snapshot);
  SpanCollector collector{trace.begin, trace.count() + 1, {}};
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    replay.apply(i, collector);
    levels_.push_back(replay.delta());
  }
  spans.spans_ = collector.sorted();
  spans.events_ = &snapshot.events;
  spans.trace_begin_ = trace.begin;
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

uint64_t LevelIndex::peak_position(uint64_t from, uint64_t to) const {
  const int64_t high = range(from, to).second;
  constexpr uint64_t kSuper = kBlock * kBlock;
  const uint64_t end = to + 1;
  uint64_t i = from;
  while (i < end) {
    // Skip whole (super-)blocks that stay below the highest level.
    if (i % kSuper == 0 && i + kSuper <= end && super_max_[i / kSuper] < high) {
      i += kSuper;
    } else if (i % kBlock == 0 && i + kBlock <= end && block_max_[i / kBlock] < high) {
      i += kBlock;
    } else if (levels_[i] == high) {
      return i;
    } else {
      ++i;
    }
  }
  return to;  // not reached: range() found `high` in from..to
}

const AllocationSpan* AllocationSpans::find(uint64_t entry, uint64_t size) const {
  const auto at = std::lower_bound(
      spans_.begin(), spans_.end(), std::pair{size, entry + 1},
      [this](const AllocationSpan& span, const std::pair<uint64_t, uint64_t>& key) {
        const uint64_t span_size = size_of(span);
        return span_size != key.first ? span_size > key.first : span.begin < key.second;
      });
  if (at == spans_.end() || at->begin != entry + 1 || size_of(*at) != size) return nullptr;
  return &*at;
}

}  // namespace memsnap
