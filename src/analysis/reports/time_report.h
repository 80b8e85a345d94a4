// replay-to-time: what was live T seconds after the trace start, in one file
// or in two side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"

namespace memsnap {

struct TimeSide {
  GroupBy group = GroupBy::kSource;  // what the source rows stand for
  std::string file;
  int device = 0;
  double requested_s = 0;
  double time_s = 0;  // after clamping
  double trace_duration_s = 0;
  bool clamped = false;
  int64_t baseline = 0;
  int64_t delta = 0;
  int64_t absolute = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  std::vector<SourceUsage> sources;  // all, largest first
};
TimeSide replay_to_time(const FileAnalysis& file, double seconds,
                        const SourceKeyOptions& key_options);

struct TimePair {
  GroupBy group = GroupBy::kSource;  // what the source rows stand for
  TimeSide a, b;
  SourceComparison sources;
};
TimePair compare_at_time(TimeSide a, TimeSide b);

}  // namespace memsnap
