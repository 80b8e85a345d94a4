#include "analysis/segment_report.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <tuple>
#include "analysis/file_analysis.h"
#include "analysis/steps.h"
#include "analysis/timeline.h"
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

std::string pool_label(PoolId pool) {
  return pool.is_default() ? std::string("default pool")
                           : fmt::format("pool ({}, {})", pool.first, pool.second);
}

namespace {

using GroupKey = std::tuple<int64_t, int64_t, uint64_t>;

// One segment's row from its blocks (free ones included); `listed` false:
// the dump lists no blocks for it, so its own totals stand in.
void add_segment(SegmentReport& report, std::map<GroupKey, PoolStreamRow>& groups, SegmentRow row,
                 const Segment* listed_without_blocks, std::span<const Block> blocks) {
  BlockBytes& bytes = row.bytes;
  if (listed_without_blocks != nullptr) {
    const Segment& segment = *listed_without_blocks;
    report.blocks_known = false;
    const uint64_t active = std::max(segment.active_size, segment.allocated_size);
    bytes.allocated = segment.allocated_size;
    bytes.awaiting_free = active - segment.allocated_size;
    bytes.free = segment.total_size > active ? segment.total_size - active : 0;
  }
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

SegmentReport segments_at_dump(const std::string& file, const Snapshot& snapshot, int device) {
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
    add_segment(report, groups, std::move(row), blocks.empty() ? &segment : nullptr, blocks);
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
    blocks.clear();
    state.for_each_block(
        address, range, [&](uint64_t block_address, uint64_t size, const HeldBlock* held) {
          blocks.push_back(held == nullptr
                               ? Block{block_address, size, 0, BlockState::kInactive, {}}
                               : Block{block_address, size, held->requested, held->state, {}});
        });
    if (keep_blocks) row.blocks = blocks;
    add_segment(report, groups, std::move(row), nullptr, blocks);
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

SegmentReport segments_at_time(const FileAnalysis& analysis, double seconds) {
  const std::string& file = analysis.path();
  const Snapshot& snapshot = analysis.snapshot();
  const int device = analysis.device();
  const DeviceTrace& trace = analysis.trace();
  const int64_t start = trace_start_us(snapshot, trace);
  if (trace.count() == 0) {
    throw Error(
        fmt::format("{}: device {} has no trace entries, so only the dump's state is "
                    "known (drop --time)",
                    file, device));
  }
  if (start == 0) {
    throw Error(
        fmt::format("{}: trace entries carry no time_us (PyTorch before 2.2), so --time "
                    "cannot be used; the dump's state is shown without it",
                    file));
  }
  const AllocatorHistory& history = *analysis.allocator_history();
  if (!history.check().possible) {
    throw Error(fmt::format("{}: cannot replay the allocator's state: {}", file,
                            history.check().impossible_reason));
  }
  const double duration_s = static_cast<double>(trace_end_us(snapshot, trace) - start) / 1e6;
  const double clamped_s = std::min(seconds, duration_s);
  const uint64_t position = position_at_time(snapshot, trace, clamped_s);
  SegmentReport report = segments_at_state(file, device, history.at(position));
  report.position = position;
  report.time_s = clamped_s;
  report.requested_time_s = seconds;
  report.history = history.check();
  return report;
}

BoundedStepSeries::BoundedStepSeries(double duration_us, StepSeries& out)
    : out_(out), width_(std::max(duration_us / static_cast<double>(kFreeSeriesBuckets), 1.0)) {}

void BoundedStepSeries::add(int64_t t_us, uint64_t bytes) {
  if (open_) t_us = std::max(t_us, last_t_);
  const uint64_t b = bucket_of(static_cast<double>(t_us), width_, kFreeSeriesBuckets);
  if (open_ && b != bucket_) finish();
  if (!open_) {
    open_ = true;
    bucket_ = b;
    max_t_ = t_us;
    max_bytes_ = bytes;
  } else if (bytes > max_bytes_) {
    max_t_ = t_us;
    max_bytes_ = bytes;
  }
  last_t_ = t_us;
  last_bytes_ = bytes;
}

void BoundedStepSeries::finish() {
  if (!open_) return;
  out_.t_us.push_back(max_t_);
  out_.bytes.push_back(max_bytes_);
  if (last_t_ != max_t_ || last_bytes_ != max_bytes_) {
    out_.t_us.push_back(last_t_);
    out_.bytes.push_back(last_bytes_);
  }
  open_ = false;
}

namespace {

// Free memory after every allocator entry, kept per bucket as (first moment
// of the bucket's max, max) and (last moment, last value); the largest free
// block at evenly spaced moments. One forward walk.
void free_over_time(const Snapshot& snapshot, const DeviceTrace& trace,
                    const AllocatorHistory& history, AllocatorMoments& out) {
  const int64_t start = trace_start_us(snapshot, trace);
  const double duration_us = static_cast<double>(trace_end_us(snapshot, trace) - start);
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

AllocatorMoments allocator_moments(const FileAnalysis& file, const std::vector<double>& times_s) {
  AllocatorMoments out;
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const int64_t start = trace_start_us(snapshot, trace);
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
  // As many even moments as the block budget allows, judged by the larger
  // of the dump's size and the state's before the trace (a state's size
  // mostly stays between them; a trace that releases much of what was there
  // at its start, as a long run's repeated steps can, would otherwise make
  // 40 moments of tens of thousands of segments each).
  uint64_t dump_blocks = 1;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device == file.device()) dump_blocks += segment.block_count;
  }
  const uint64_t state_size =
      std::max(dump_blocks, 1 + history.start().ranges.size() + history.start().blocks.size());
  const uint64_t even = std::clamp<uint64_t>(kMomentBlocks / state_size, 2, kMaxEvenMoments);
  const double duration_s = static_cast<double>(trace_end_us(snapshot, trace) - start) / 1e6;
  std::vector<double> chosen;
  for (uint64_t k = 0; k < even; ++k) {
    // Rounded to the microsecond, as the page states times.
    chosen.push_back(
        std::round(duration_s * static_cast<double>(k) / static_cast<double>(even - 1) * 1e6) /
        1e6);
  }
  for (double t : times_s) {
    if (t >= 0 && t <= duration_s) chosen.push_back(std::round(t * 1e6) / 1e6);
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  std::vector<uint64_t> positions;
  positions.reserve(chosen.size());
  for (double t : chosen) positions.push_back(position_at_time(snapshot, trace, t));
  size_t next = 0;
  uint64_t blocks_kept = 0;
  history.states_at(positions, [&](uint64_t position, const AllocatorState& state) {
    SegmentReport report = segments_at_state(file.path(), file.device(), state, true);
    report.position = position;
    report.time_s = chosen[next++];
    report.requested_time_s = report.time_s;
    for (size_t i = 0; i < report.segments.size(); ++i) {
      if (i >= kMomentSegments || blocks_kept >= kMomentBlocks) {
        report.segments[i].blocks.clear();
        report.segments[i].blocks.shrink_to_fit();
      }
      blocks_kept += report.segments[i].blocks.size();
    }
    out.moments.push_back(std::move(report));
  });
  free_over_time(snapshot, trace, history, out);
  return out;
}

}  // namespace memsnap
