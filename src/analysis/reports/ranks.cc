#include "analysis/reports/ranks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>

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

bool is_word_separator(char c) {
  return c == '/' || c == '\\' || c == '_' || c == '-' || c == '.' || c == ' ';
}

// A path's folders and file name ("." and empty parts left out).
std::vector<std::string_view> parts_of(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find_first_of("/\\", start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  if (parts.empty()) parts.push_back(path.empty() ? "(empty path)" : path);  // "", "/" or "-"
  return parts;
}

std::string joined(const std::vector<std::string_view>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) {
    if (i > from) out += '/';
    out += parts[i];
  }
  return out;
}

// Drops the words every name starts with and then those every name ends
// with, each name keeping at least one character.
void drop_shared_words(std::vector<std::string>& names) {
  size_t shortest = names.front().size();
  size_t prefix = names.front().size();
  for (const std::string& name : names) {
    shortest = std::min(shortest, name.size());
    prefix = std::min(
        prefix, static_cast<size_t>(std::mismatch(name.begin(), name.end(), names.front().begin(),
                                                  names.front().end())
                                        .first -
                                    name.begin()));
  }
  if (shortest == 0) return;
  // A cut after a separator, leaving something of the shortest name.
  size_t cut = std::min(prefix, shortest - 1);
  while (cut > 0 && !is_word_separator(names.front()[cut - 1])) --cut;
  for (std::string& name : names) name.erase(0, cut);

  shortest = names.front().size();
  size_t suffix = names.front().size();
  for (const std::string& name : names) {
    shortest = std::min(shortest, name.size());
    suffix = std::min(
        suffix, static_cast<size_t>(std::mismatch(name.rbegin(), name.rend(),
                                                  names.front().rbegin(), names.front().rend())
                                        .first -
                                    name.rbegin()));
  }
  // A cut before a separator, the same way.
  cut = std::min(suffix, shortest - 1);
  const std::string& first = names.front();
  while (cut > 0 && !is_word_separator(first[first.size() - cut])) --cut;
  for (std::string& name : names) name.resize(name.size() - cut);
}

bool utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// "first words...last words", kMaxFileName bytes at most, cut between characters.
std::string elided(const std::string& name) {
  constexpr std::string_view kEllipsis = "...";
  size_t head = (kMaxFileName - kEllipsis.size()) / 2;
  size_t tail = name.size() - (kMaxFileName - kEllipsis.size() - head);
  while (head > 0 && utf8_continuation(name[head])) --head;
  while (tail < name.size() && utf8_continuation(name[tail])) ++tail;
  return name.substr(0, head) + std::string(kEllipsis) + name.substr(tail);
}

}  // namespace

std::vector<std::string> distinguishing_names(const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  std::vector<std::vector<std::string_view>> parts;
  parts.reserve(paths.size());
  size_t fewest = SIZE_MAX;
  for (const std::string& path : paths) {
    parts.push_back(parts_of(path));
    fewest = std::min(fewest, parts.back().size());
  }
  // Folders (and file names) every path shares, at the start and at the end.
  auto shared = [&](auto part_of) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const auto& p) { return part_of(p) == part_of(parts.front()); });
  };
  size_t lead = 0;
  while (lead + 1 < fewest && shared([&](const auto& p) { return p[lead]; })) ++lead;
  size_t trail = 0;
  while (lead + trail + 1 < fewest &&
         shared([&](const auto& p) { return p[p.size() - 1 - trail]; })) {
    ++trail;
  }
  std::vector<std::string> names;
  names.reserve(parts.size());
  for (const auto& p : parts) names.push_back(joined(p, lead, p.size() - trail));
  const bool all_equal = std::all_of(names.begin(), names.end(),
                                     [&](const std::string& name) { return name == names[0]; });
  if (!all_equal) drop_shared_words(names);

  // Long names cut in the middle, unless two different names would then read
  // the same (or one reads like another's uncut name).
  std::map<std::string, std::vector<size_t>> by_cut;
  std::set<std::string> uncut;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].size() > kMaxFileName) {
      by_cut[elided(names[i])].push_back(i);
    } else {
      uncut.insert(names[i]);
    }
  }
  for (const auto& entry : by_cut) {
    const std::vector<size_t>& which = entry.second;
    const std::string& first = names[which.front()];
    if (!uncut.contains(entry.first) &&
        std::all_of(which.begin(), which.end(), [&](size_t i) { return names[i] == first; })) {
      for (size_t i : which) names[i] = entry.first;
    }
  }
  return names;
}

namespace {

// One row per summary, named, highest peak first (ties by rank, then input
// order, so the table is stable).
void add_rows(const std::vector<RunSummary>& summaries, RanksReport& report) {
  for (size_t i = 0; i < summaries.size(); ++i) {
    const RunSummary& s = summaries[i];
    RankRow row;
    row.input = i;
    row.rank = s.rank;
    row.path = s.path;
    row.device = s.device;
    row.facts = s.facts;
    row.fragmentation = s.segments.fragmentation;
    if (!s.live_at_peak.empty()) {
      row.top_source = s.live_at_peak.front().source;
      row.top_source_bytes = s.live_at_peak.front().bytes;
    }
    row.oom_count = s.oom_count;
    report.rows.push_back(std::move(row));
  }
  std::vector<size_t> unranked;
  std::vector<std::string> unranked_paths;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    if (report.rows[i].rank) continue;
    unranked.push_back(i);
    unranked_paths.push_back(report.rows[i].path);
  }
  const std::vector<std::string> names = distinguishing_names(unranked_paths);
  for (size_t k = 0; k < unranked.size(); ++k) report.rows[unranked[k]].name = names[k];
  std::stable_sort(report.rows.begin(), report.rows.end(), [](const RankRow& a, const RankRow& b) {
    if (a.facts.absolute_peak != b.facts.absolute_peak)
      return a.facts.absolute_peak > b.facts.absolute_peak;
    return a.rank.value_or(INT64_MAX) < b.rank.value_or(INT64_MAX);
  });
}

// The spread of the peaks (min, median, max, MAD) and the outliers by robust z.
void add_spread(RanksReport& report) {
  std::vector<int64_t> peaks;
  peaks.reserve(report.rows.size());
  for (const RankRow& row : report.rows) peaks.push_back(row.facts.absolute_peak);
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
    const double distance = static_cast<double>(row.facts.absolute_peak) - median;
    if (report.mad > 0) {
      row.robust_z = 0.6745 * distance / static_cast<double>(report.mad);
      row.outlier = std::abs(row.robust_z) > kOutlierZ;
    } else {
      row.outlier = std::abs(distance) > kGroupTolerance * std::abs(median) && distance != 0;
    }
  }
}

// Groups: same largest sources at the peak, peaks within the tolerance.
void add_groups(const std::vector<RunSummary>& summaries, RanksReport& report) {
  std::map<std::vector<std::string>, std::vector<size_t>> by_signature;
  for (size_t r = 0; r < report.rows.size(); ++r) {
    by_signature[signature_of(summaries[report.rows[r].input])].push_back(r);
  }
  for (auto& [signature, rows] : by_signature) {
    // Rows are highest first; walk them lowest first so each group starts at its minimum.
    std::vector<size_t> ascending(rows.rbegin(), rows.rend());
    RankGroup group;
    for (size_t r : ascending) {
      const int64_t peak = report.rows[r].facts.absolute_peak;
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
}

}  // namespace

RanksReport analyze_ranks(const std::vector<RunSummary>& summaries) {
  RanksReport report;
  if (summaries.empty()) return report;
  add_rows(summaries, report);
  add_spread(report);
  add_groups(summaries, report);

  // The highest rank against the median rank.
  if (report.rows.size() >= 2) {
    report.highest_row = 0;
    for (size_t r = report.rows.size(); r-- > 0;) {
      if (report.rows[r].facts.absolute_peak == report.peak_median) {
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
