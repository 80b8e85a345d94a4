#include "analysis/core/segments.h"

#include <fmt/format.h>
#include <algorithm>
#include <iterator>

#include <absl/container/flat_hash_map.h>

namespace memsnap {

SegmentTotals segment_totals(const Snapshot& snapshot, int device) {
  SegmentTotals totals;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    ++totals.count;
    totals.total_size += segment.total_size;
    totals.allocated_size += segment.allocated_size;
    totals.active_size += segment.active_size;
    totals.block_count += segment.block_count;
    if (segment.is_expandable) ++totals.expandable_count;
    if (segment.pool_id_first != 0 || segment.pool_id_second != 0) {
      ++totals.private_pool_count;
      totals.private_pool_size += segment.total_size;
    }
  }
  totals.awaiting_free_size =
      totals.active_size > totals.allocated_size ? totals.active_size - totals.allocated_size : 0;
  totals.inactive_size =
      totals.total_size > totals.active_size ? totals.total_size - totals.active_size : 0;
  totals.fragmentation = totals.total_size == 0 ? 0.0
                                                : static_cast<double>(totals.inactive_size) /
                                                      static_cast<double>(totals.total_size);
  return totals;
}

int64_t reserved_change(Action action, uint64_t size) {
  switch (action) {
    case Action::kSegmentAlloc:
    case Action::kSegmentMap: return add_bytes(0, size);
    case Action::kSegmentFree:
    case Action::kSegmentUnmap: return sub_bytes(0, size);
    default: return 0;
  }
}

ReservedHistory reserved_history(const Snapshot& snapshot, const DeviceTrace& trace,
                                 uint64_t reserved_at_dump) {
  ReservedHistory history;
  history.at_dump = reserved_at_dump;
  const EventColumns& events = snapshot.events;
  // Forward from 0, keeping each change; the start is then what makes the
  // end equal the dump. Sizes are bounded (2^60 in all), so sums stay in range.
  int64_t change = 0;
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const int64_t step = reserved_change(events.action[i], events.size[i]);
    if (step == 0) continue;
    change += step;
    history.steps.push_back({i, change});
  }
  history.segment_events = history.steps.size();
  history.start = static_cast<int64_t>(reserved_at_dump) - change;
  history.at_start = static_cast<uint64_t>(std::max<int64_t>(history.start, 0));
  history.peak = history.at_start;
  for (ReservedStep& step : history.steps) {
    step.reserved += history.start;
    if (step.reserved > static_cast<int64_t>(history.peak)) {
      history.peak = static_cast<uint64_t>(step.reserved);
      history.peak_event = step.event;
    }
  }
  return history;
}

uint64_t ReservedHistory::at_position(const DeviceTrace& trace, uint64_t position) const {
  const uint64_t end = trace.begin + position;  // entries before this model index applied
  auto after =
      std::lower_bound(steps.begin(), steps.end(), end,
                       [](const ReservedStep& step, uint64_t e) { return step.event < e; });
  const int64_t reserved = after == steps.begin() ? start : std::prev(after)->reserved;
  return static_cast<uint64_t>(std::max<int64_t>(reserved, 0));
}

uint64_t reserved_peak_position(const ReservedHistory& reserved, const DeviceTrace& trace) {
  return reserved.peak_event == kNoEvent ? 0 : reserved.peak_event + 1 - trace.begin;
}

Baseline compute_baseline(const SegmentTotals& segments, const ReplayTotals& replay) {
  Baseline baseline;
  baseline.segments_active = segments.active_size;
  baseline.pre_existing_freed = replay.unmatched_free_bytes;
  baseline.profiling_still_live = replay.live_bytes_at_end;
  baseline.baseline_at_start =
      add_bytes(sub_bytes(static_cast<int64_t>(segments.active_size), replay.live_bytes_at_end),
                replay.unmatched_free_bytes);
  return baseline;
}

std::vector<SegmentSpan> segment_spans(const Snapshot& snapshot, const DeviceTrace& trace,
                                       int device) {
  const EventColumns& events = snapshot.events;
  const uint64_t held_to_the_end = trace.count() + 1;
  std::vector<SegmentSpan> spans;
  absl::flat_hash_map<uint64_t, size_t> open;  // address -> index in spans
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const Action action = events.action[i];
    const uint64_t position = i - trace.begin + 1;
    const uint64_t address = events.addr[i];
    const uint64_t size = events.size[i];
    const bool expandable = action == Action::kSegmentMap || action == Action::kSegmentUnmap;
    if (action == Action::kSegmentAlloc || action == Action::kSegmentMap) {
      if (const auto found = open.find(address); found != open.end()) {
        spans[found->second].end = position;  // reserved again without a free: the old one ends
      }
      open[address] = spans.size();
      spans.push_back({position, held_to_the_end, address, size, events.stream[i], expandable});
    } else if (action == Action::kSegmentFree || action == Action::kSegmentUnmap) {
      const auto found = open.find(address);
      if (found == open.end()) {
        // Reserved before the trace began.
        spans.push_back({0, position, address, size, events.stream[i], expandable});
        continue;
      }
      const size_t index = found->second;
      open.erase(found);
      spans[index].end = position;
      if (spans[index].size > size) {  // the mapping's first bytes unmapped: the rest goes on
        SegmentSpan rest = spans[index];
        rest.begin = position;
        rest.end = held_to_the_end;
        rest.address += size;
        rest.size -= size;
        open[rest.address] = spans.size();
        spans.push_back(rest);
      }
    }
  }
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    const PoolId pool{segment.pool_id_first, segment.pool_id_second};
    if (const auto found = open.find(segment.address); found != open.end()) {
      spans[found->second].pool_known = true;
      spans[found->second].pool = pool;
      continue;
    }
    spans.push_back({0, held_to_the_end, segment.address, segment.total_size, segment.stream,
                     segment.is_expandable, true, pool});
  }
  std::sort(spans.begin(), spans.end(), [](const SegmentSpan& a, const SegmentSpan& b) {
    return a.size != b.size ? a.size > b.size : a.begin < b.begin;
  });
  return spans;
}

std::string pool_label(PoolId pool) {
  return pool.is_default() ? std::string("default pool")
                           : fmt::format("pool ({}, {})", pool.first, pool.second);
}

}  // namespace memsnap
