// Which spans of positions (allocations, segments) a drawing of a window
// shows: each column of the drawing is taken at one position, and a span is
// visible in the columns whose positions it holds (begin <= p < end). The
// positions never decrease from column to column, so those columns are
// contiguous. Used by serve's allocation view and its segment timeline.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace memsnap {

template <typename Span>
struct VisibleSpan {
  const Span* span;
  int first_column;  // both included
  int last_column;
};

// The columns of `at` (one position per column, non-decreasing) in which
// [begin, end) is live; nullopt when none.
inline std::optional<std::pair<int, int>> live_columns(uint64_t begin, uint64_t end,
                                                       const std::vector<uint64_t>& at) {
  const auto first = std::lower_bound(at.begin(), at.end(), begin);
  if (first == at.end() || *first >= end) return std::nullopt;
  const auto past = std::lower_bound(first, at.end(), end);
  return std::pair{static_cast<int>(first - at.begin()), static_cast<int>(past - at.begin()) - 1};
}

// The first `budget` visible spans of `largest_first` (spans with `begin`
// and `end` members, largest first), in their order; `complete` says whether
// they are all the visible ones. One scan that stops at the first visible
// span past the budget.
template <typename Span>
std::vector<VisibleSpan<Span>> largest_visible(const std::vector<Span>& largest_first,
                                               const std::vector<uint64_t>& at, size_t budget,
                                               bool& complete) {
  std::vector<VisibleSpan<Span>> out;
  complete = true;
  if (at.empty()) return out;
  const uint64_t lowest = at.front();
  const uint64_t highest = at.back();
  for (const Span& span : largest_first) {
    if (span.end <= lowest || span.begin > highest) continue;
    const std::optional<std::pair<int, int>> columns = live_columns(span.begin, span.end, at);
    if (!columns) continue;
    if (out.size() == budget) {
      complete = false;
      break;
    }
    out.push_back({&span, columns->first, columns->second});
  }
  return out;
}

}  // namespace memsnap
