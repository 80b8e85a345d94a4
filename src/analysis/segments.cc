#include "analysis/segments.h"

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
    if (segment.pool_id_first != 0 || segment.pool_id_second != 0) ++totals.private_pool_count;
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
