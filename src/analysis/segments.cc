#include "analysis/segments.h"

#include <algorithm>

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
  int64_t change = 0;  // sizes are bounded (2^60 in all), so sums stay in range
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const int64_t step = reserved_change(events.action[i], events.size[i]);
    if (step == 0) continue;
    change += step;
    ++history.segment_events;
  }
  const int64_t start = static_cast<int64_t>(reserved_at_dump) - change;
  history.at_start = static_cast<uint64_t>(std::max<int64_t>(start, 0));
  history.peak = history.at_start;
  int64_t reserved = start;
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const int64_t step = reserved_change(events.action[i], events.size[i]);
    if (step == 0) continue;
    reserved += step;
    if (reserved > static_cast<int64_t>(history.peak)) {
      history.peak = static_cast<uint64_t>(reserved);
      history.peak_event = i;
    }
  }
  return history;
}

FragmentationHistory fragmentation_over_trace(const Snapshot& snapshot, const DeviceTrace& trace,
                                              const ReservedHistory& reserved) {
  if (trace.count() == 0) return {};
  return fragmentation_history(AllocatorHistory(snapshot, trace.device),
                               reserved_peak_position(reserved, trace));
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

}  // namespace memsnap
