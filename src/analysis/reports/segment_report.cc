#include "analysis/reports/segment_report.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <tuple>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/file_analysis.h"
#include "analysis/core/steps.h"
#include "analysis/reports/timeline.h"
#include "memsnap/error.h"

namespace memsnap {

namespace {

void add(BlockBytes& total, const BlockBytes& part) {
  total.reserved += part.reserved;
  total.allocated += part.allocated;
  total.awaiting_free += part.awaiting_free;
  total.free += part.free;
  total.requested += part.requested;
  total.rounding += part.rounding;
  total.largest_free = std::max(total.largest_free, part.largest_free);
  total.blocks += part.blocks;
}

// A segment's blocks by state, added to `bytes`.
void count_blocks(BlockBytes& bytes, std::span<const Block> blocks) {
  for (const Block& block : blocks) {
    ++bytes.blocks;
    switch (block.state) {
      case BlockState::kActiveAllocated:
        bytes.allocated += block.size;
        if (block.requested_size > 0 && block.requested_size <= block.size) {
          bytes.requested += block.requested_size;
          bytes.rounding += block.size - block.requested_size;
        }
        break;
      case BlockState::kActivePendingFree: bytes.awaiting_free += block.size; break;
      case BlockState::kInactive:
        bytes.free += block.size;
        bytes.largest_free = std::max(bytes.largest_free, block.size);
        break;
      case BlockState::kUnknown: break;
    }
  }
}

// The blocks of one mapped range of a reconstructed state, in address
// order, its gaps as the free blocks they are.
void range_blocks(const AllocatorState& state, uint64_t address, const MappedRange& range,
                  std::vector<Block>& out) {
  out.clear();
  state.for_each_block(
      address, range, [&](uint64_t block_address, uint64_t size, const HeldBlock* held) {
        out.push_back(held == nullptr
                          ? Block{block_address, size, 0, BlockState::kInactive, {}}
                          : Block{block_address, size, held->requested, held->state, {}});
      });
}

// Per slice of the segment: bytes allocated, awaiting free and free.
std::string fill_map(uint64_t address, uint64_t size, std::span<const Block> blocks) {
  if (size == 0) return {};
  const uint64_t cells = kFillWidth;
  std::vector<double> allocated(cells, 0);
  std::vector<double> pending(cells, 0);
  std::vector<double> covered(cells, 0);
  const auto total = static_cast<double>(size);
  const double cell = total / static_cast<double>(cells);
  for (const Block& block : blocks) {
    if (block.address < address) continue;
    double from = static_cast<double>(block.address - address);
    double to = std::min(total, from + static_cast<double>(block.size));
    for (auto c = static_cast<uint64_t>(from / cell); c < cells; ++c) {
      double lo = std::max(from, static_cast<double>(c) * cell);
      double hi = std::min(to, static_cast<double>(c + 1) * cell);
      if (hi <= lo) break;
      covered[c] += hi - lo;
      if (block.state == BlockState::kActiveAllocated) allocated[c] += hi - lo;
      if (block.state == BlockState::kActivePendingFree) pending[c] += hi - lo;
    }
  }
  std::string out;
  for (uint64_t c = 0; c < cells; ++c) {
    const double share = allocated[c] / cell;
    if (covered[c] < cell * 1e-9) {
      out += ' ';
    } else if (share >= 1 - 1e-9) {
      out += '#';
    } else if (pending[c] >= cell / 2) {
      out += '~';
    } else if (allocated[c] <= 0) {
      out += '.';
    } else {
      out += static_cast<char>('0' + std::clamp(static_cast<int>(share * 10), 1, 9));
    }
  }
  return out;
}

}  // namespace

namespace {

using GroupKey = std::tuple<int64_t, int64_t, uint64_t>;

// One segment's row from its blocks (free ones included); `listed` false:
// the dump lists no blocks for it, so its own totals stand in.
void add_segment(SegmentReport& report, std::map<GroupKey, PoolStreamRow>& groups, SegmentRow row,
                 const Segment* listed_without_blocks, std::span<const Block> blocks,
                 bool keep_blocks) {
  if (keep_blocks) row.blocks.assign(blocks.begin(), blocks.end());
  BlockBytes& bytes = row.bytes;
  if (listed_without_blocks != nullptr) {
    const Segment& segment = *listed_without_blocks;
    report.blocks_known = false;
    const uint64_t active = std::max(segment.active_size, segment.allocated_size);
    bytes.allocated = segment.allocated_size;
    bytes.awaiting_free = active - segment.allocated_size;
    bytes.free = segment.total_size > active ? segment.total_size - active : 0;
  }
  count_blocks(bytes, blocks);
  row.fill = fill_map(row.address, bytes.reserved, blocks);
  PoolStreamRow& group = groups[{row.pool.first, row.pool.second, row.stream}];
  group.pool = row.pool;
  group.stream = row.stream;
  ++group.segments;
  add(group.bytes, bytes);
  add(report.totals, bytes);
  report.segments.push_back(std::move(row));
}

void finish(SegmentReport& report, std::map<GroupKey, PoolStreamRow>& groups) {
  for (auto& [key, group] : groups) report.groups.push_back(group);
  std::sort(report.segments.begin(), report.segments.end(),
            [](const SegmentRow& a, const SegmentRow& b) {
              if (a.bytes.reserved != b.bytes.reserved) return a.bytes.reserved > b.bytes.reserved;
              return a.address < b.address;
            });
}

}  // namespace

SegmentReport segments_at_dump(const std::string& file, const Snapshot& snapshot, int device,
                               bool keep_blocks) {
  SegmentReport report;
  report.file = file;
  report.device = device;
  std::map<GroupKey, PoolStreamRow> groups;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    SegmentRow row;
    row.address = segment.address;
    row.stream = segment.stream;
    row.pool = PoolId{segment.pool_id_first, segment.pool_id_second};
    row.kind = std::string(snapshot.strings.get(segment.segment_type));
    row.expandable = segment.is_expandable;
    row.bytes.reserved = segment.total_size;
    std::span<const Block> blocks = snapshot.blocks_of(segment);
    add_segment(report, groups, std::move(row), blocks.empty() ? &segment : nullptr, blocks,
                keep_blocks);
  }
  finish(report, groups);
  return report;
}

SegmentReport segments_at_state(const std::string& file, int device, const AllocatorState& state,
                                bool keep_blocks) {
  SegmentReport report;
  report.file = file;
  report.device = device;
  report.at_dump = false;
  std::map<GroupKey, PoolStreamRow> groups;
  std::vector<Block> blocks;
  for (const auto& [address, range] : state.ranges) {
    SegmentRow row;
    row.address = address;
    row.stream = range.stream;
    row.pool = range.pool;
    row.kind = std::string(range.kind);
    row.expandable = range.expandable;
    row.bytes.reserved = range.size;
    range_blocks(state, address, range, blocks);
    add_segment(report, groups, std::move(row), nullptr, blocks, keep_blocks);
  }
  finish(report, groups);
  return report;
}

SegmentReport segments_report(const FileAnalysis& file, std::optional<double> seconds) {
  if (seconds) return segments_at_time(file, *seconds);
  SegmentReport report = segments_at_dump(file.path(), file.snapshot(), file.device());
  report.history = file.allocator_history()->check();
  return report;
}

SegmentReport segments_at_position(const FileAnalysis& analysis, uint64_t position,
                                   bool keep_blocks) {
  const std::string& file = analysis.path();
  const DeviceTrace& trace = analysis.trace();
  if (trace.count() == 0) {
    throw Error(ErrorCode::kNoTrace,
                fmt::format("{}: device {} has no trace entries, so only the dump's state is "
                            "known (ask without a time)",
                            file, analysis.device()));
  }
  const AllocatorHistory& history = *analysis.allocator_history();
  if (!history.check().possible) {
    throw Error(ErrorCode::kCannotReplay, fmt::format("{}: cannot replay the allocator's state: {}",
                                                      file, history.check().impossible_reason));
  }
  position = std::min(position, trace.count());
  SegmentReport report =
      segments_at_state(file, analysis.device(), history.at(position), keep_blocks);
  report.position = position;
  report.history = history.check();
  return report;
}

SegmentReport segments_at_time(const FileAnalysis& analysis, double seconds, bool keep_blocks) {
  const DeviceTrace& trace = analysis.trace();
  if (trace.count() == 0) return segments_at_position(analysis, 0, keep_blocks);  // throws
  const TraceTime& time = analysis.time();
  time.require_times(analysis.path(), "the dump's state is shown without one");
  const double clamped_s = time.clamped(seconds);
  SegmentReport report = segments_at_position(analysis, time.position_at(clamped_s), keep_blocks);
  report.time_s = clamped_s;
  report.requested_time_s = seconds;
  return report;
}

namespace {

// Free memory after every allocator entry, kept per bucket as (first moment
// of the bucket's max, max) and (last moment, last value); the largest free
// block at evenly spaced moments. One forward walk.
void free_over_time(const Snapshot& snapshot, const DeviceTrace& trace, const TraceTime& clock,
                    const AllocatorHistory& history, AllocatorMoments& out) {
  const int64_t start = clock.start_us();
  const double duration_us = static_cast<double>(clock.end_us() - start);
  const double sample_every = std::max(duration_us / static_cast<double>(kLargestFreeSamples), 1.0);
  int64_t latest_t = 0;  // times that go backwards hold the latest one seen
  double next_sample = 0;
  BoundedStepSeries free_series(duration_us, out.free);
  auto observe = [&](int64_t t, const AllocatorState& state) {
    free_series.add(t, state.reserved > state.held ? state.reserved - state.held : 0);
    if (static_cast<double>(t) >= next_sample) {
      out.largest_free.t_us.push_back(t);
      out.largest_free.bytes.push_back(state.largest_free());
      next_sample = (std::floor(static_cast<double>(t) / sample_every) + 1) * sample_every;
    }
  };
  observe(0, history.start());
  const EventColumns& events = snapshot.events;
  history.walk(trace.count(), [&](uint64_t position, const AllocatorState& state) {
    const int64_t time = events.time_us[trace.begin + position - 1];
    if (time != 0) latest_t = std::max(latest_t, time - start);
    observe(latest_t, state);
  });
  free_series.finish();
}

}  // namespace

namespace {

// Builds the allocator panel's moments, one state at a time, and counts
// about what they cost in the page (the JSON html_plot writes: a moment's
// totals and the slots of its drawn list that changed, a segment's fields
// and its blocks). Past the budget it stops, unless it is the last try
// (`last`): then it goes on and stores new segments without their blocks.
class MomentBuilder {
 public:
  MomentBuilder(uint64_t budget, bool last) : budget_(budget), last_(last) {}

  void add_moment(double time_s, uint64_t position, const AllocatorState& state) {
    if (over() && !last_) return;
    AllocatorMoment moment;
    moment.time_s = time_s;
    moment.position = position;
    // Every segment counts in the totals; the largest are drawn.
    add_totals(state, moment.totals);
    // The ranges change far less often than the blocks: rank them again
    // only when they did.
    ranges_.clear();
    for (const auto& [address, range] : state.ranges) ranges_.push_back({address, range.size});
    if (ranges_ != ranked_from_) {
      ranked_from_ = ranges_;
      ranked_ = ranges_;
      const size_t top = std::min(ranked_.size(), kMomentSegments);
      std::partial_sort(ranked_.begin(), ranked_.begin() + static_cast<ptrdiff_t>(top),
                        ranked_.end(), [](const Ranked& a, const Ranked& b) {
                          return a.size != b.size ? a.size > b.size : a.address < b.address;
                        });
    }
    moment.segment_count = ranked_.size();
    const size_t drawn = std::min(ranked_.size(), kMomentSegments);
    uint64_t cost = kMomentBytes;
    for (size_t i = 0; i < drawn; ++i) {
      const uint32_t id = segment_id(state, ranked_[i].address);
      if (i >= previous_.size() || previous_[i] != id) cost += kChangedSlotBytes;
      moment.drawn.push_back(id);
    }
    previous_ = moment.drawn;
    spent_ += cost;
    moments_.push_back(std::move(moment));
  }

  [[nodiscard]] bool over() const { return spent_ > budget_; }
  [[nodiscard]] size_t moments_built() const { return moments_.size(); }
  [[nodiscard]] uint64_t spent() const { return spent_; }
  void take(AllocatorMoments& out) {
    out.segments = std::move(segments_);
    out.moments = std::move(moments_);
  }

 private:
  // About what html_plot writes for a moment, a changed slot of its list, a
  // segment and one of its blocks.
  static constexpr uint64_t kMomentBytes = 210;
  static constexpr uint64_t kChangedSlotBytes = 12;
  static constexpr uint64_t kSegmentBytes = 200;
  static constexpr uint64_t kBlockBytes = 24;

  struct Ranked {
    uint64_t address = 0;
    uint64_t size = 0;
    bool operator==(const Ranked&) const = default;
  };

  // The totals over every range, as count_blocks counts each range's blocks
  // (AllocatorState::for_each_block), in one walk over ranges and blocks
  // together: a search per range made this most of the page's time.
  static void add_totals(const AllocatorState& state, BlockBytes& totals) {
    auto block = state.blocks.begin();
    const auto gap = [&totals](uint64_t size) {
      totals.free += size;
      totals.largest_free = std::max(totals.largest_free, size);
    };
    for (const auto& [address, range] : state.ranges) {
      totals.reserved += range.size;
      const uint64_t end = address + range.size;
      while (block != state.blocks.end() && block->first < address) ++block;
      uint64_t cursor = address;
      for (; block != state.blocks.end() && block->first < end; ++block) {
        if (block->first > cursor) gap(block->first - cursor);
        if (block->second.state == BlockState::kActiveAllocated) {
          totals.allocated += block->second.size;
        } else if (block->second.state == BlockState::kActivePendingFree) {
          totals.awaiting_free += block->second.size;
        }
        cursor = std::max(cursor, block->first + block->second.size);
      }
      if (end > cursor) gap(end - cursor);
    }
  }

  // The segment at `address` as it is in `state`: the one stored for it last
  // when its blocks are the same, else a new one.
  uint32_t segment_id(const AllocatorState& state, uint64_t address) {
    const MappedRange& range = state.ranges.at(address);
    range_blocks(state, address, range, blocks_);
    const auto same_block = [](const Block& a, const Block& b) {
      return a.address == b.address && a.size == b.size && a.state == b.state;
    };
    if (auto it = latest_.find(address); it != latest_.end()) {
      const SegmentRow& last = segments_[it->second];
      if (last.bytes.reserved == range.size && last.stream == range.stream &&
          last.pool.first == range.pool.first && last.pool.second == range.pool.second &&
          last.expandable == range.expandable && last.kind == range.kind &&
          std::equal(last.blocks.begin(), last.blocks.end(), blocks_.begin(), blocks_.end(),
                     same_block)) {
        return it->second;
      }
    }
    SegmentRow row;
    row.address = address;
    row.stream = range.stream;
    row.pool = range.pool;
    row.kind = std::string(range.kind);
    row.expandable = range.expandable;
    row.bytes.reserved = range.size;
    count_blocks(row.bytes, blocks_);
    if (!over()) row.blocks = blocks_;  // past the budget: a bar without blocks
    spent_ += kSegmentBytes + kBlockBytes * row.blocks.size();
    const auto id = static_cast<uint32_t>(segments_.size());
    segments_.push_back(std::move(row));
    latest_[address] = id;
    return id;
  }

  uint64_t budget_;
  bool last_ = false;
  uint64_t spent_ = 0;
  std::vector<SegmentRow> segments_;
  std::vector<AllocatorMoment> moments_;
  absl::flat_hash_map<uint64_t, uint32_t> latest_;  // address -> its last stored segment
  std::vector<uint32_t> previous_;                  // the last moment's drawn list
  std::vector<Ranked> ranges_;                      // this state's, in address order
  std::vector<Ranked> ranked_from_;                 // the ranges ranked_ was ranked from
  std::vector<Ranked> ranked_;                      // largest first (the first kMomentSegments)
  std::vector<Block> blocks_;                       // scratch
};

}  // namespace

namespace {

// Times are rounded to the microsecond, as the page states them.
double rounded_to_us(double seconds) {
  return std::round(seconds * 1e6) / 1e6;
}

// The time of every entry that changes the allocator, and the start.
std::vector<double> change_times(const Snapshot& snapshot, const DeviceTrace& trace,
                                 const AllocatorHistory& history, int64_t start) {
  std::vector<double> chosen{0.0};
  for (uint64_t position = 1; position <= trace.count(); ++position) {
    const int64_t time = snapshot.events.time_us[trace.begin + position - 1];
    if (time != 0 && history.observed(position))
      chosen.push_back(rounded_to_us(static_cast<double>(time - start) / 1e6));
  }
  return chosen;
}

// Each moment walks the whole state for its totals: no more moments than
// kMomentWork allows for a state of the larger of the dump's size and the
// start's (a state's size mostly stays between them), and room for the given
// times and two more.
uint64_t most_moments(const FileAnalysis& file, const AllocatorHistory& history, size_t given) {
  uint64_t dump_blocks = 1;
  for (const Segment& segment : file.snapshot().segments) {
    if (segment.device == file.device()) dump_blocks += 1 + segment.block_count;
  }
  const uint64_t state_size =
      std::max(dump_blocks, 1 + history.start().ranges.size() + history.start().blocks.size());
  return std::max<uint64_t>(given + 2,
                            std::min<uint64_t>(kMomentWork / state_size, kMaxAllocatorMoments));
}

}  // namespace

AllocatorMoments allocator_moments(const FileAnalysis& file, const std::vector<double>& times_s,
                                   uint64_t page_bytes) {
  AllocatorMoments out;
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const TraceTime& clock = file.time();
  const int64_t start = clock.start_us();
  if (trace.count() == 0 || start == 0) {
    out.unavailable_reason =
        trace.count() == 0 ? "the device has no trace entries" : "trace entries carry no time_us";
    return out;
  }
  const AllocatorHistory& history =
      *file.allocator_history();  // a trace with entries: replayed once
  out.check = history.check();
  if (!out.check.possible) {
    out.unavailable_reason = out.check.impossible_reason;
    return out;
  }
  out.available = true;
  const double duration_s = clock.duration_s();
  std::vector<double> given;
  for (double t : times_s) {
    if (t >= 0 && t <= duration_s) given.push_back(rounded_to_us(t));
  }
  // The moments to try: the time of every entry that changes the allocator
  // (and the start), else `even` moments spread evenly, with the given ones.
  const auto evenly = [&](uint64_t even) {
    std::vector<double> chosen;
    for (uint64_t k = 0; k < even; ++k) {
      chosen.push_back(
          rounded_to_us(duration_s * static_cast<double>(k) / static_cast<double>(even - 1)));
    }
    return chosen;
  };
  const uint64_t most = most_moments(file, history, given.size());
  std::vector<double> chosen = change_times(snapshot, trace, history, start);
  bool all_changes = chosen.size() + given.size() <= most && page_bytes > 0;
  if (page_bytes == 0) {
    chosen = evenly(2);
  } else if (!all_changes) {
    chosen = evenly(most - given.size());
  }
  constexpr int kMaxAttempts = 6;  // each walks the trace once
  for (int attempt = 0;; ++attempt) {
    chosen.insert(chosen.end(), given.begin(), given.end());
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    const std::vector<uint64_t> positions = clock.positions_at(chosen);
    // No budget (a run the panel does not show): the fewest moments at once.
    const bool last =
        chosen.size() <= given.size() + 2 || attempt >= kMaxAttempts || page_bytes == 0;
    MomentBuilder builder(page_bytes, last);
    size_t next = 0;
    // A try that overflows the budget stops there: the rest of the walk
    // would only be thrown away.
    history.states_at(positions, [&](uint64_t position, const AllocatorState& state) {
      builder.add_moment(chosen[next++], position, state);
      return last || !builder.over();
    });
    // Too many for the budget: as many even moments as the ones built cost,
    // a quarter fewer (moments far apart share fewer segments), down to two.
    if (builder.over() && !last) {
      all_changes = false;
      const double per_moment = static_cast<double>(builder.spent()) /
                                static_cast<double>(std::max<size_t>(builder.moments_built(), 1));
      const auto fit = static_cast<uint64_t>(static_cast<double>(page_bytes) / per_moment * 0.75);
      const uint64_t even =
          std::clamp<uint64_t>(std::min<uint64_t>(fit, chosen.size() / 2), 2, chosen.size() - 1);
      chosen = evenly(even);
      continue;
    }
    out.every_change = all_changes && !builder.over();
    builder.take(out);
    break;
  }
  free_over_time(snapshot, trace, clock, history, out);
  return out;
}

}  // namespace memsnap
