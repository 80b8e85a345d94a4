#include "analysis/reports/memory_line.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "memsnap/error.h"

namespace memsnap {
namespace {

void check_window(const LineWindow& window) {
  if (window.width < 1 || window.width > kMaxLineWidth) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("width must be 1 to {} columns", kMaxLineWidth));
  }
  if (!std::isfinite(window.from) || !std::isfinite(window.to) || window.from < 0 ||
      !(window.to > window.from)) {
    throw Error(ErrorCode::kBadParameter, "the window needs 0 <= from < to");
  }
}

}  // namespace

std::vector<uint64_t> column_edges(const FileAnalysis& file, const LineWindow& window) {
  if (file.trace().count() == 0) {
    throw Error(
        ErrorCode::kNoTrace,
        "the file has no trace entries on this device, so no memory over time (its segments at "
        "the dump still answer: memsnap segments)");
  }
  check_window(window);
  if (window.axis == LineAxis::kTime) {
    file.time().require_times(file.path(), "the line by event (axis=event) still works");
  }
  const double step = (window.to - window.from) / window.width;
  std::vector<double> edges(static_cast<size_t>(window.width) + 1);
  for (size_t c = 0; c < edges.size(); ++c) edges[c] = window.from + static_cast<double>(c) * step;
  edges.back() = window.to;
  if (window.axis == LineAxis::kTime) return file.time().positions_at(edges);
  const auto count = static_cast<double>(file.trace().count());
  std::vector<uint64_t> positions;
  positions.reserve(edges.size());
  for (double edge : edges) positions.push_back(static_cast<uint64_t>(std::min(edge, count)));
  return positions;
}

MemoryLine memory_line(const FileAnalysis& file, const LineWindow& window) {
  const std::vector<uint64_t> edges = column_edges(file, window);
  MemoryLine line;
  line.file = file.path();
  line.device = file.device();
  line.window = window;
  line.baseline = file.baseline().baseline_at_start;
  const LevelIndex& levels = file.levels();
  line.low.reserve(static_cast<size_t>(window.width));
  line.high.reserve(static_cast<size_t>(window.width));
  line.peak_at.reserve(static_cast<size_t>(window.width));
  for (size_t c = 0; c + 1 < edges.size(); ++c) {
    // The level carried in at the column's start, then every one reached in
    // it; a column without entries holds the level carried in.
    const uint64_t last = std::max(edges[c], edges[c + 1]);
    const auto [low, high] = levels.range(edges[c], last);
    line.low.push_back(line.baseline + low);
    line.high.push_back(line.baseline + high);
    line.peak_at.push_back(levels.peak_position(edges[c], last));
  }
  return line;
}

}  // namespace memsnap
