// Memory over a window of the trace at a given width: for each of `width`
// columns the lowest and highest absolute memory it reached, so the true
// peak shows at every zoom (memsnap serve's chart). From the level index
// (analysis/core/level_index.h): a window of any length costs about the
// same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"

namespace memsnap {

enum class LineAxis : uint8_t { kTime, kEvent };

// The widest line one request may ask for.
constexpr int kMaxLineWidth = 8192;

struct LineWindow {
  LineAxis axis = LineAxis::kTime;
  // Seconds from the trace's first timed entry, or entry positions (0 to the
  // entry count); `to` > `from`. A window past the trace ends with it.
  double from = 0;
  double to = 0;
  int width = 0;  // columns, 1 to kMaxLineWidth
};

struct MemoryLine {
  std::string file;
  int device = 0;
  LineWindow window;
  int64_t baseline = 0;
  // Column c spans [from + c * step, from + (c + 1) * step): the memory at
  // its start and every level reached in it, absolute (baseline + delta).
  std::vector<int64_t> low;
  std::vector<int64_t> high;
  // The first position (entries applied) in the column where it is highest.
  std::vector<uint64_t> peak_at;
};

// The positions (entries applied) at the columns' edges, width + 1 of them:
// column c spans positions edges[c] to edges[c + 1]. Throws as memory_line.
std::vector<uint64_t> column_edges(const FileAnalysis& file, const LineWindow& window);

// Throws a usage Error for a window or width out of range, and an input
// Error for a device without trace entries or (TraceTime::require_times) a
// time axis on a trace without times.
MemoryLine memory_line(const FileAnalysis& file, const LineWindow& window);

}  // namespace memsnap
