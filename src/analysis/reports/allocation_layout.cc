#include "analysis/reports/allocation_layout.h"

#include <fmt/format.h>
#include <algorithm>

#include "analysis/core/sources.h"
#include "analysis/core/visible_spans.h"
#include "analysis/reports/allocation.h"
#include "memsnap/error.h"
#include "memsnap/replay.h"

namespace memsnap {
namespace {

using Visible = VisibleSpan<AllocationSpan>;

// The `budget` largest visible allocations, by entry (their stacking order).
std::vector<Visible> largest_visible_by_entry(const AllocationSpans& spans,
                                              const std::vector<uint64_t>& at, size_t budget,
                                              bool& complete) {
  std::vector<Visible> out = largest_visible(spans.by_size(), at, budget, complete);
  std::sort(out.begin(), out.end(),
            [](const Visible& a, const Visible& b) { return a.span->begin < b.span->begin; });
  return out;
}

// Draws `visible` (by entry) on `layout`, whose line and samples are set:
// each allocation's facts, and the band of the rest.
void lay_out(const FileAnalysis& file, const std::vector<Visible>& visible,
             const AllocationMatcher* matcher, const SourceKeyOptions& keys,
             AllocationLayout& layout) {
  // The band: the line's high less the drawn allocations live in the column
  // (a difference array over the columns, then its running sum).
  const size_t width = layout.sample.size();
  std::vector<int64_t> drawn_change(width + 1, 0);
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const AllocationSpans& spans = file.spans();
  SourceIndex sources(snapshot, keys);
  Categorizer categories(snapshot, keys.category_rules);
  layout.drawn.reserve(visible.size());
  for (const Visible& v : visible) {
    const uint64_t size = spans.size_of(*v.span);
    drawn_change[static_cast<size_t>(v.first_column)] += static_cast<int64_t>(size);
    drawn_change[static_cast<size_t>(v.last_column) + 1] -= static_cast<int64_t>(size);
    const uint64_t at = trace.begin + v.span->entry();
    DrawnAllocation drawn;
    drawn.span = v.span;
    drawn.entry = v.span->entry();
    drawn.size = size;
    drawn.first_column = v.first_column;
    drawn.last_column = v.last_column;
    drawn.time_s = file.seconds_at(at);
    if (v.span->end <= trace.count()) {
      drawn.end_entry = v.span->end - 1;
      drawn.end_time_s = file.seconds_at(trace.begin + v.span->end - 1);
    }
    drawn.stack = snapshot.events.stack[at];
    drawn.source = sources.name(sources.of(LiveAllocation{size, drawn.stack, at, 0}));
    drawn.category = categories.of(at, drawn.stack);
    drawn.matches = matcher != nullptr && matcher->matches(at);
    layout.matched += drawn.matches ? 1 : 0;
    layout.drawn.push_back(std::move(drawn));
  }
  layout.band.reserve(width);
  int64_t drawn_here = 0;
  for (size_t c = 0; c < width; ++c) {
    drawn_here += drawn_change[c];
    layout.band.push_back(layout.line.high[c] - drawn_here);
  }
}

void check_budget(size_t budget) {
  if (budget == 0 || budget > kMaxLayoutBudget) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("the budget is 1 to {} allocations", kMaxLayoutBudget));
  }
}

}  // namespace

AllocationLayout allocation_layout(const FileAnalysis& file, const LineWindow& window,
                                   size_t budget, std::string_view query,
                                   const SourceKeyOptions& keys) {
  check_budget(budget);
  std::optional<AllocationMatcher> matcher;
  if (!query.empty()) matcher.emplace(file.snapshot(), query);
  AllocationLayout layout;
  layout.line = memory_line(file, window);
  layout.sample = layout.line.peak_at;
  layout.budget = budget;
  layout.query = std::string(query);
  const std::vector<Visible> visible =
      largest_visible_by_entry(file.spans(), layout.sample, budget, layout.complete);
  lay_out(file, visible, matcher ? &*matcher : nullptr, keys, layout);
  return layout;
}

AllocationLayout layout_of_chosen(const FileAnalysis& file, const LineWindow& window,
                                  const std::vector<const AllocationSpan*>& chosen,
                                  const SourceKeyOptions& keys) {
  AllocationLayout layout;
  layout.line = memory_line(file, window);
  layout.sample = layout.line.peak_at;
  layout.budget = chosen.size();
  std::vector<Visible> visible;
  for (const AllocationSpan* span : chosen) {
    if (const auto columns = live_columns(span->begin, span->end, layout.sample)) {
      visible.push_back({span, columns->first, columns->second});
    }
  }
  std::sort(visible.begin(), visible.end(),
            [](const Visible& a, const Visible& b) { return a.span->begin < b.span->begin; });
  lay_out(file, visible, nullptr, keys, layout);
  return layout;
}

}  // namespace memsnap
