// The allocator's segments over a window, cudaMalloc by cudaMalloc (and an
// expandable segment's mappings): memory_viz's "Active Cached Segment
// Timeline", at any zoom of any trace, for memsnap serve.
//
// As the allocation layout (allocation_layout.h) does for allocations: each
// column is taken where reserved memory is highest in it; the largest
// `budget` segments reserved at one of those positions are drawn, each as the
// columns it is reserved in, stacked by when it was reserved (those from
// before the trace lowest) over one band of the rest, and the band plus the
// drawn segments equal the reserved line at every column.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/segments.h"
#include "analysis/reports/memory_line.h"

namespace memsnap {

constexpr size_t kMaxSegmentBudget = 15'000;

struct DrawnSegment {
  const SegmentSpan* span = nullptr;  // the analysis' (FileAnalysis::segment_spans)
  int first_column = 0;               // both included
  int last_column = 0;
  std::optional<uint64_t> begin_entry;  // its segment_alloc or map; none: before the trace
  std::optional<uint64_t> end_entry;    // its free or unmap; none: the dump holds it
};

struct SegmentTimeline {
  std::string file;
  int device = 0;
  LineWindow window;
  std::vector<uint64_t> sample;   // per column: the position it is taken at
  std::vector<int64_t> reserved;  // per column: the highest reserved bytes
  std::vector<int64_t> band;      // per column: what the drawn segments leave of it
  uint64_t segment_events = 0;    // segment entries in the whole trace
  size_t budget = 0;
  bool complete = true;             // every segment reserved at a sample is drawn
  std::vector<DrawnSegment> drawn;  // by begin, then address: the stacking order
};

// Throws as memory_line does, and a usage Error for a budget of 0 or above
// kMaxSegmentBudget.
SegmentTimeline segment_timeline(const FileAnalysis& file, const LineWindow& window, size_t budget);

}  // namespace memsnap
