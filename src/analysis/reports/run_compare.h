// Two runs of many ranks, rank N against rank N: per-rank B - A of the
// absolute peak, the ranks found in one run only, and the rank whose peak
// grew most (the one to drill into). From summaries alone. Plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/sources.h"
#include "analysis/reports/run_summary.h"

namespace memsnap {

struct RankPair {
  int64_t rank = 0;
  size_t a = 0;  // indices into the summaries of A and of B
  size_t b = 0;
  int64_t peak_a = 0;
  int64_t peak_b = 0;
  uint64_t reserved_a = 0;
  uint64_t reserved_b = 0;
  [[nodiscard]] int64_t delta() const { return peak_b - peak_a; }
};

struct RunComparison {
  std::vector<RankPair> pairs;  // largest B - A first, then by rank
  // Files of one run whose rank the other run lacks, or that carry no rank.
  std::vector<size_t> only_a;
  std::vector<size_t> only_b;
  int64_t max_peak_a = 0;  // the highest absolute peak of each run's matched ranks
  int64_t max_peak_b = 0;
  // The rank whose peak grew most (largest B - A), and its sources at each
  // side's peak (B - A), from the summaries.
  std::optional<size_t> grew_most;  // index into pairs
  SourceComparison grew_most_sources;
};

RunComparison compare_runs(const std::vector<RunSummary>& a, const std::vector<RunSummary>& b);

// Two files of one run with the same rank (node1_rank0, node2_rank0): the
// first such pair by index. Matching by rank would pair one and leave the
// other unchecked.
struct DuplicateRank {
  int64_t rank = 0;
  size_t first = 0;
  size_t second = 0;
};
std::optional<DuplicateRank> duplicate_rank(const std::vector<RunSummary>& run);

}  // namespace memsnap
