#include "analysis/reports/run_compare.h"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <map>

namespace memsnap {

RunComparison compare_runs(const std::vector<RunSummary>& a, const std::vector<RunSummary>& b) {
  RunComparison out;
  // Rank -> file; a rank claimed twice keeps its first file (ranks lists duplicates).
  auto by_rank = [](const std::vector<RunSummary>& run, std::vector<size_t>& unranked) {
    std::map<int64_t, size_t> ranks;
    for (size_t i = 0; i < run.size(); ++i) {
      if (!run[i].rank || !ranks.emplace(*run[i].rank, i).second) unranked.push_back(i);
    }
    return ranks;
  };
  const std::map<int64_t, size_t> ranks_a = by_rank(a, out.only_a);
  const std::map<int64_t, size_t> ranks_b = by_rank(b, out.only_b);
  for (const auto& [rank, i] : ranks_a) {
    auto match = ranks_b.find(rank);
    if (match == ranks_b.end()) {
      out.only_a.push_back(i);
      continue;
    }
    const size_t j = match->second;
    out.pairs.push_back(RankPair{rank, i, j, a[i].facts.absolute_peak, b[j].facts.absolute_peak,
                                 a[i].facts.reserved_peak, b[j].facts.reserved_peak});
  }
  for (const auto& [rank, j] : ranks_b) {
    if (!ranks_a.contains(rank)) out.only_b.push_back(j);
  }
  std::sort(out.only_a.begin(), out.only_a.end());
  std::sort(out.only_b.begin(), out.only_b.end());
  std::stable_sort(out.pairs.begin(), out.pairs.end(), [](const RankPair& x, const RankPair& y) {
    return x.delta() != y.delta() ? x.delta() > y.delta() : x.rank < y.rank;
  });
  for (const RankPair& pair : out.pairs) {
    out.max_peak_a = std::max(out.max_peak_a, pair.peak_a);
    out.max_peak_b = std::max(out.max_peak_b, pair.peak_b);
  }
  if (!out.pairs.empty()) {
    out.grew_most = 0;
    const RankPair& top = out.pairs.front();
    out.grew_most_sources = compare_sources(a[top.a].live_at_peak, b[top.b].live_at_peak);
  }
  return out;
}

std::optional<DuplicateRank> duplicate_rank(const std::vector<RunSummary>& run) {
  absl::flat_hash_map<int64_t, size_t> seen;
  for (size_t i = 0; i < run.size(); ++i) {
    if (!run[i].rank) continue;
    auto [it, fresh] = seen.emplace(*run[i].rank, i);
    if (!fresh) return DuplicateRank{*run[i].rank, it->second, i};
  }
  return std::nullopt;
}

}  // namespace memsnap
