#include "analysis/reports/segment_timeline.h"

#include <fmt/format.h>
#include <algorithm>

#include "analysis/core/visible_spans.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

// Per column: the highest reserved bytes and the first position it holds,
// from the reserved history's steps (one per segment entry): the level
// carried in at the column's start, then each step in it.
void reserved_columns(const FileAnalysis& file, const std::vector<uint64_t>& edges,
                      SegmentTimeline& out) {
  const ReservedHistory& history = file.reserved();
  const DeviceTrace& trace = file.trace();
  const std::vector<ReservedStep>& steps = history.steps;
  auto step = steps.begin();
  for (size_t c = 0; c + 1 < edges.size(); ++c) {
    const uint64_t from = edges[c];
    const uint64_t to = std::max(from, edges[c + 1]);
    // Steps are applied at position event - begin + 1; skip those at or before `from`.
    while (step != steps.end() && step->event - trace.begin + 1 <= from) ++step;
    auto high = static_cast<int64_t>(history.at_position(trace, from));
    uint64_t at = from;
    for (auto in = step; in != steps.end() && in->event - trace.begin + 1 <= to; ++in) {
      if (in->reserved > high) {
        high = in->reserved;
        at = in->event - trace.begin + 1;
      }
    }
    out.reserved.push_back(high);
    out.sample.push_back(at);
  }
}

}  // namespace

SegmentTimeline segment_timeline(const FileAnalysis& file, const LineWindow& window,
                                 size_t budget) {
  if (budget == 0 || budget > kMaxSegmentBudget) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("the budget is 1 to {} segments", kMaxSegmentBudget));
  }
  const std::vector<uint64_t> edges = column_edges(file, window);
  SegmentTimeline timeline;
  timeline.file = file.path();
  timeline.device = file.device();
  timeline.window = window;
  timeline.budget = budget;
  timeline.segment_events = file.reserved().segment_events;
  reserved_columns(file, edges, timeline);
  std::vector<VisibleSpan<SegmentSpan>> visible =
      largest_visible(file.segment_spans(), timeline.sample, budget, timeline.complete);
  std::sort(visible.begin(), visible.end(),
            [](const VisibleSpan<SegmentSpan>& a, const VisibleSpan<SegmentSpan>& b) {
              return a.span->begin != b.span->begin ? a.span->begin < b.span->begin
                                                    : a.span->address < b.span->address;
            });
  const size_t width = timeline.sample.size();
  const uint64_t count = file.trace().count();
  std::vector<int64_t> drawn_change(width + 1, 0);
  for (const VisibleSpan<SegmentSpan>& v : visible) {
    const auto size = static_cast<int64_t>(v.span->size);
    drawn_change[static_cast<size_t>(v.first_column)] += size;
    drawn_change[static_cast<size_t>(v.last_column) + 1] -= size;
    DrawnSegment drawn{v.span, v.first_column, v.last_column, std::nullopt, std::nullopt};
    if (v.span->begin > 0) drawn.begin_entry = v.span->begin - 1;
    if (v.span->end <= count) drawn.end_entry = v.span->end - 1;
    timeline.drawn.push_back(drawn);
  }
  int64_t drawn_here = 0;
  for (size_t c = 0; c < width; ++c) {
    drawn_here += drawn_change[c];
    timeline.band.push_back(timeline.reserved[c] - drawn_here);
  }
  return timeline;
}

}  // namespace memsnap
