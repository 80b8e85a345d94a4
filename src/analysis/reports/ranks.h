// Many ranks of one run, from their summaries alone: who peaks highest, the
// spread, outliers, groups of ranks that look alike, and what the highest
// rank holds that the median rank does not. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/sources.h"
#include "analysis/reports/run_summary.h"

namespace memsnap {

struct RankRow {
  size_t input = 0;  // index in the summaries given
  std::optional<int64_t> rank;
  std::string path;
  std::string name;  // shown without a rank: the part of the path no other such file shares
  int device = 0;
  PeakFacts facts;           // the summary's
  double fragmentation = 0;  // inactive / reserved at the dump
  std::string top_source;    // the largest source live at the peak ("" when none)
  uint64_t top_source_bytes = 0;
  uint64_t oom_count = 0;
  double robust_z = 0;  // modified z-score of the absolute peak (see RanksReport)
  bool outlier = false;
};

// Ranks whose peaks lie within kGroupTolerance of the group's lowest and
// whose kGroupSignature largest sources at the peak are the same sources.
constexpr double kGroupTolerance = 0.01;
constexpr size_t kGroupSignature = 3;
struct RankGroup {
  std::vector<size_t> rows;  // indices into RanksReport::rows
  int64_t peak_min = 0;
  int64_t peak_max = 0;
  std::vector<std::string> signature;  // its largest sources at the peak
};

// Outliers: |modified z-score| > kOutlierZ, with z = 0.6745 (x - median) / MAD
// (Iglewicz and Hoaglin); when MAD is 0 (most ranks equal), any rank more than
// kGroupTolerance from the median.
constexpr double kOutlierZ = 3.5;

struct RanksReport {
  std::vector<RankRow> rows;  // highest absolute peak first
  int64_t peak_min = 0;
  int64_t peak_median = 0;
  int64_t peak_max = 0;
  double max_over_median = 0;     // 0 when the median is not positive
  int64_t mad = 0;                // median absolute deviation of the peaks
  std::vector<RankGroup> groups;  // highest peak first
  // The highest rank against the median rank, by source at each one's peak
  // (B - A = highest - median); empty with fewer than two ranks.
  std::optional<size_t> highest_row;
  std::optional<size_t> median_row;
  SourceComparison highest_vs_median;
  std::vector<int64_t> duplicate_ranks;  // rank numbers that more than one file claims
};

RanksReport analyze_ranks(const std::vector<RunSummary>& summaries);

// Short names for files whose names hold no rank number: the shortest part of
// each path that tells it from the others. The folders every path starts or
// ends with are dropped, then the words (split at / _ - . space) every name
// starts or ends with, each name keeping at least one; a name longer than
// kMaxFileName is cut in its middle ("...") where the cut names stay apart.
// One path: its file name. Equal paths get equal names.
constexpr size_t kMaxFileName = 40;
std::vector<std::string> distinguishing_names(const std::vector<std::string>& paths);

}  // namespace memsnap
