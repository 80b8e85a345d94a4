// The allocations of a window, drawn one by one as memory_viz draws them
// (its "Active Memory Timeline"), at any zoom of any trace: memsnap serve's
// allocation view.
//
// Each of `width` columns is taken at one position: where the memory line
// (memory_line.h) is highest in the column, so the drawing's top is the
// line's true peak. The allocations live at one of those positions at least
// are the visible ones; the largest `budget` of them are drawn, each as the
// columns it is live in, stacked by entry (the earliest lowest) above one
// band that holds everything else: smaller allocations, memory from before
// the trace, allocations a later alloc at their address replaced. At every
// column the band plus the drawn allocations live there equal the line's
// highest point, exactly. Zooming in draws the smaller ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/categories.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/reports/memory_line.h"

namespace memsnap {

// The most allocations one request may ask to draw (memory_viz's default).
constexpr size_t kMaxLayoutBudget = 15'000;

struct DrawnAllocation {
  const AllocationSpan* span = nullptr;  // the analysis' (FileAnalysis::spans)
  uint64_t entry = 0;  // its alloc entry, within the device's trace (memsnap events)
  uint64_t size = 0;
  int first_column = 0;  // the columns it is live in, both included
  int last_column = 0;
  std::optional<uint64_t> end_entry;  // none: live at the end of the trace
  std::optional<double> time_s;       // its alloc's, from the trace's first timed entry
  std::optional<double> end_time_s;
  std::string source;
  StackId stack;  // its alloc's frames
  Category category = Category::kUnknown;
  bool matches = false;  // the search given with the layout finds it
};

struct AllocationLayout {
  MemoryLine line;
  std::vector<uint64_t> sample;  // per column: the position it is taken at
  std::vector<int64_t> band;     // per column: what the drawn allocations leave of the line's high
  size_t budget = 0;
  // Every visible allocation is drawn (false: zoom in to see smaller ones).
  bool complete = true;
  std::vector<DrawnAllocation> drawn;  // by entry: the stacking order
  std::string query;                   // the search marked (empty: none)
  uint64_t matched = 0;                // drawn allocations it finds
};

// Throws as memory_line does, a usage Error for a budget of 0 or above
// kMaxLayoutBudget, and AllocationMatcher's for a bad query.
AllocationLayout allocation_layout(const FileAnalysis& file, const LineWindow& window,
                                   size_t budget, std::string_view query,
                                   const SourceKeyOptions& keys);

// The same layout for allocations chosen elsewhere (the offline page draws
// one set on both axes): those of `chosen` live at a column's position are
// drawn, whatever their size; `complete` says nothing of the others.
AllocationLayout layout_of_chosen(const FileAnalysis& file, const LineWindow& window,
                                  const std::vector<const AllocationSpan*>& chosen,
                                  const SourceKeyOptions& keys);

}  // namespace memsnap
