// The allocator's state at dump time (the `segments` list) and the baseline
// it implies: what was allocated before the trace started.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "memsnap/model.h"
#include "memsnap/replay.h"

namespace memsnap {

struct SegmentTotals {
  uint64_t count = 0;
  uint64_t total_size = 0;  // reserved
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t awaiting_free_size = 0;  // active - allocated
  uint64_t inactive_size = 0;       // reserved - active
  double fragmentation = 0;         // inactive / reserved
  uint64_t expandable_count = 0;
  uint64_t private_pool_count = 0;  // CUDA graph or user MemPool segments
  uint64_t private_pool_size = 0;   // their total_size
  uint64_t block_count = 0;
};
SegmentTotals segment_totals(const Snapshot& snapshot, int device);

// Reserved bytes over one device's trace: the dump's reserved walked back
// through the segment entries (segment_alloc and segment_map add,
// segment_free and segment_unmap remove), then forward, keeping each change.
// The one walk of reserved memory: the peak, the reserved bytes after any
// entry (at_position) and the timeline's reserved line all read it.
struct ReservedStep {
  uint64_t event = 0;    // model index of a segment entry
  int64_t reserved = 0;  // reserved bytes after it (below 0 only when the dump disagrees)
};
struct ReservedHistory {
  int64_t start = 0;      // before the first entry, as walked back (may be below 0)
  uint64_t at_start = 0;  // start, at least 0
  uint64_t peak = 0;
  uint64_t peak_event = kNoEvent;  // model index of the entry that reached it (kNoEvent: at start)
  uint64_t at_dump = 0;
  uint64_t segment_events = 0;
  std::vector<ReservedStep> steps;  // one per segment entry, in trace order

  // Reserved bytes once the first `position` entries of `trace` applied, at
  // least 0.
  [[nodiscard]] uint64_t at_position(const DeviceTrace& trace, uint64_t position) const;
};
// What one trace entry does to reserved bytes (0 for every other action).
int64_t reserved_change(Action action, uint64_t size);
ReservedHistory reserved_history(const Snapshot& snapshot, const DeviceTrace& trace,
                                 uint64_t reserved_at_dump);

// Entries applied when reserved memory first peaked (0: at the trace's start).
uint64_t reserved_peak_position(const ReservedHistory& reserved, const DeviceTrace& trace);

struct Baseline {
  int64_t baseline_at_start = 0;
  uint64_t segments_active = 0;
  uint64_t pre_existing_freed = 0;    // bytes of unmatched frees
  uint64_t profiling_still_live = 0;  // bytes of traced allocs live at the end
};
// segments_active - (bytes still live at the end of the replay) + (bytes of
// unmatched frees).
Baseline compute_baseline(const SegmentTotals& segments, const ReplayTotals& replay);

// "default pool", or "pool (1, 0)" for a CUDA graph's or MemPool's private pool.
// A segment, or a mapping of an expandable one, as the positions (entries
// applied) it was reserved at: from `begin` (after its segment_alloc or
// segment_map; 0 for one from before the trace) to before `end` (after its
// segment_free or segment_unmap; count() + 1 for one the dump still holds).
// An unmap of a mapping's first bytes ends it and begins the rest.
struct SegmentSpan {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  bool expandable = false;
  bool pool_known = false;  // the dump holds it, and says its pool
  PoolId pool;
};
// Every segment span of a device's trace, with the dump's segments no trace
// entry made (reserved throughout); largest first, then by begin.
std::vector<SegmentSpan> segment_spans(const Snapshot& snapshot, const DeviceTrace& trace,
                                       int device);

std::string pool_label(PoolId pool);

}  // namespace memsnap
