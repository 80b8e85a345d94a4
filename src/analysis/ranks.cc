#include "analysis/ranks.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "memsnap/bytes.h"

namespace memsnap {

namespace {

// The lower median of a sorted list (a value some rank really has).
int64_t lower_median(const std::vector<int64_t>& sorted) {
  return sorted[(sorted.size() - 1) / 2];
}

std::vector<std::string> signature_of(const RunSummary& summary) {
  std::vector<std::string> names;
  for (size_t i = 0; i < std::min(kGroupSignature, summary.live_at_peak.size()); ++i) {
    names.push_back(summary.live_at_peak[i].source);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

RanksReport analyze_ranks(const std::vector<RunSummary>& summaries) {
  RanksReport report;
  if (summaries.empty()) return report;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const RunSummary& s = summaries[i];
    RankRow row;
    row.input = i;
    row.rank = s.rank;
    row.path = s.path;
    row.device = s.device;
    row.absolute_peak = s.absolute_peak;
    row.peak_time_s = s.peak_time_s;
    row.reserved_peak = s.reserved_peak;
    row.baseline = s.baseline;
    row.fragmentation = s.segments.fragmentation;
    if (!s.live_at_peak.empty()) {
      row.top_source = s.live_at_peak.front().source;
      row.top_source_bytes = s.live_at_peak.front().bytes;
    }
    row.oom_count = s.ooms.size();
    report.rows.push_back(std::move(row));
  }
  // Highest first; ties by rank, then input order, so the table is stable.
  std::stable_sort(report.rows.begin(), report.rows.end(), [](const RankRow& a, const RankRow& b) {
    if (a.absolute_peak != b.absolute_peak) return a.absolute_peak > b.absolute_peak;
    return a.rank.value_or(INT64_MAX) < b.rank.value_or(INT64_MAX);
  });

  std::vector<int64_t> peaks;
  peaks.reserve(report.rows.size());
  for (const RankRow& row : report.rows) peaks.push_back(row.absolute_peak);
  std::sort(peaks.begin(), peaks.end());
  report.peak_min = peaks.front();
  report.peak_max = peaks.back();
  report.peak_median = lower_median(peaks);
  report.max_over_median = report.peak_median > 0 ? static_cast<double>(report.peak_max) /
                                                        static_cast<double>(report.peak_median)
                                                  : 0.0;
  std::vector<int64_t> deviations;
  deviations.reserve(peaks.size());
  for (int64_t peak : peaks) {
    deviations.push_back(static_cast<int64_t>(
        magnitude(sub_bytes(peak, static_cast<uint64_t>(report.peak_median)))));
  }
  std::sort(deviations.begin(), deviations.end());
  report.mad = lower_median(deviations);
  const double median = static_cast<double>(report.peak_median);
  for (RankRow& row : report.rows) {
    const double distance = static_cast<double>(row.absolute_peak) - median;
    if (report.mad > 0) {
      row.robust_z = 0.6745 * distance / static_cast<double>(report.mad);
      row.outlier = std::abs(row.robust_z) > kOutlierZ;
    } else {
      row.outlier = std::abs(distance) > kGroupTolerance * std::abs(median) && distance != 0;
    }
  }

  // Groups: same largest sources at the peak, peaks within the tolerance.
  std::map<std::vector<std::string>, std::vector<size_t>> by_signature;
  for (size_t r = 0; r < report.rows.size(); ++r) {
    by_signature[signature_of(summaries[report.rows[r].input])].push_back(r);
  }
  for (auto& [signature, rows] : by_signature) {
    // Rows are highest first; walk them lowest first so each group starts at its minimum.
    std::vector<size_t> ascending(rows.rbegin(), rows.rend());
    RankGroup group;
    for (size_t r : ascending) {
      const int64_t peak = report.rows[r].absolute_peak;
      const double limit = static_cast<double>(group.peak_min) +
                           kGroupTolerance * std::abs(static_cast<double>(group.peak_min));
      if (!group.rows.empty() && static_cast<double>(peak) > limit) {
        report.groups.push_back(group);
        group = RankGroup{};
      }
      if (group.rows.empty()) {
        group.peak_min = peak;
        group.signature = signature;
      }
      group.rows.push_back(r);
      group.peak_max = peak;
    }
    if (!group.rows.empty()) report.groups.push_back(group);
  }
  for (RankGroup& group : report.groups) std::sort(group.rows.begin(), group.rows.end());
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const RankGroup& a, const RankGroup& b) { return a.peak_max > b.peak_max; });

  // The highest rank against the median rank.
  if (report.rows.size() >= 2) {
    report.highest_row = 0;
    for (size_t r = report.rows.size(); r-- > 0;) {
      if (report.rows[r].absolute_peak == report.peak_median) {
        report.median_row = r;
        break;
      }
    }
    report.highest_vs_median =
        compare_sources(summaries[report.rows[*report.median_row].input].live_at_peak,
                        summaries[report.rows[0].input].live_at_peak);
  }
  std::map<int64_t, int> claims;
  for (const RankRow& row : report.rows) {
    if (row.rank) ++claims[*row.rank];
  }
  for (const auto& [rank, count] : claims) {
    if (count > 1) report.duplicate_ranks.push_back(rank);
  }
  return report;
}

}  // namespace memsnap
