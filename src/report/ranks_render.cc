#include "report/ranks_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "analysis/core/file_analysis.h"
#include "memsnap/bytes.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

std::string rank_name(const RankRow& row) {
  return row.rank ? std::to_string(*row.rank) : printable(row.name);
}

ordered_json rank_json(const RankRow& row) {
  return row.rank ? ordered_json(*row.rank) : ordered_json(nullptr);
}

}  // namespace

std::string unreadable_text(const std::vector<UnreadableFile>& unread) {
  if (unread.empty()) return {};
  std::string out = "\nCould not be read\n";
  for (const UnreadableFile& file : unread) out += "  " + printable(file.error) + "\n";
  return out;
}

ordered_json unreadable_json(const std::vector<UnreadableFile>& unread) {
  ordered_json out = ordered_json::array();
  for (const UnreadableFile& file : unread) {
    out.push_back({{"file", file.path}, {"error", file.error}});
  }
  return out;
}

std::string rank_list(const RanksReport& report, const std::vector<size_t>& rows) {
  std::vector<int64_t> numbers;
  std::vector<std::string> names;
  for (size_t r : rows) {
    if (report.rows[r].rank) {
      numbers.push_back(*report.rows[r].rank);
    } else {
      names.push_back(printable(report.rows[r].name));
    }
  }
  std::sort(numbers.begin(), numbers.end());
  std::vector<std::string> parts;
  if (!numbers.empty()) parts.push_back(step_ranges(numbers));  // "0-7, 9, 12-14"
  if (names.size() > 3) {
    parts.push_back(fmt::format("{} files without a rank", names.size()));
  } else {
    parts.insert(parts.end(), names.begin(), names.end());
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

namespace {

// The spread of the ranks' peaks and the outliers.
std::string spread_text(const RanksReport& r) {
  const RankRow& highest = r.rows.front();
  const RankRow& lowest = r.rows.back();
  std::string out;
  out += "\nAbsolute peak across ranks\n";
  TextTable spread({"", "", ""}, {false, true, false});
  spread.add_row({"max", format_level_bytes(r.peak_max), "rank " + rank_name(highest)});
  if (r.median_row) {
    spread.add_row(
        {"median", format_level_bytes(r.peak_median), "rank " + rank_name(r.rows[*r.median_row])});
  }
  spread.add_row({"min", format_level_bytes(r.peak_min), "rank " + rank_name(lowest)});
  if (r.max_over_median > 0) {
    spread.add_row({"max / median", fmt::format("{:.3f}", r.max_over_median), ""});
  }
  spread.add_row({"MAD", format_bytes(static_cast<uint64_t>(r.mad)),
                  "median absolute deviation from the median"});
  std::string rendered = spread.render();
  out += rendered.substr(rendered.find('\n') + 1);

  std::vector<size_t> outliers;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    if (r.rows[i].outlier) outliers.push_back(i);
  }
  if (outliers.empty()) {
    out += "  outliers: none (no rank's peak is more than 3.5 robust z from the median)\n";
  } else {
    out += fmt::format("  outliers: {} (|0.6745 (peak - median) / MAD| > 3.5)\n",
                       rank_list(r, outliers));
    for (size_t i : outliers) {
      const RankRow& row = r.rows[i];
      const int64_t distance = row.facts.absolute_peak - r.peak_median;
      out += fmt::format("    rank {}: {}, {} {} the median{}\n", rank_name(row),
                         format_level_bytes(row.facts.absolute_peak),
                         format_bytes(magnitude(distance)), distance >= 0 ? "above" : "below",
                         r.mad > 0 ? fmt::format(", z = {:.1f}", row.robust_z) : "");
    }
  }
  return out;
}

// Ranks alike: peaks within the tolerance, the same largest sources.
std::string groups_text(const RanksReport& r, int top) {
  std::string out;
  out += fmt::format(
      "\nGroups: ranks that peak within {:g}% of each other with the same {} largest sources\n",
      kGroupTolerance * 100, kGroupSignature);
  TextTable groups({"ranks", "count", "peak", "largest sources at the peak"},
                   {false, true, true, false});
  for (size_t g = 0; g < limit(top, r.groups.size()); ++g) {
    const RankGroup& group = r.groups[g];
    std::vector<std::string> names;
    for (const std::string& name : group.signature) names.push_back(printable(name));
    groups.add_row({rank_list(r, group.rows), std::to_string(group.rows.size()),
                    group.peak_min == group.peak_max
                        ? format_level_bytes(group.peak_max)
                        : fmt::format("{} - {}", format_level_bytes(group.peak_min),
                                      format_level_bytes(group.peak_max)),
                    names.empty() ? "-" : fmt::format("{}", fmt::join(names, ", "))});
  }
  out += groups.render();
  if (limit(top, r.groups.size()) < r.groups.size()) {
    out += fmt::format("  ... {} more groups (--top)\n",
                       r.groups.size() - limit(top, r.groups.size()));
  }
  return out;
}

// One row per rank, the highest peak first.
std::string per_rank_text(const RanksReport& r, int top) {
  std::string out;
  out += "\nPer rank, highest peak first\n";
  TextTable rows({"rank", "absolute peak", "at (s)", "reserved peak", "baseline", "frag (dump)",
                  "largest at the peak", "oom"},
                 {true, true, true, true, true, true, false, true});
  for (size_t i = 0; i < limit(top, r.rows.size()); ++i) {
    const RankRow& row = r.rows[i];
    rows.add_row({rank_name(row) + (row.outlier ? " !" : ""),
                  format_level_bytes(row.facts.absolute_peak),
                  row.facts.peak_time_s ? fmt::format("{:.3f}", *row.facts.peak_time_s) : "-",
                  format_bytes(row.facts.reserved_peak), format_level_bytes(row.facts.baseline),
                  format_percent(row.fragmentation),
                  row.top_source.empty() ? "-"
                                         : fmt::format("{} ({})", printable(row.top_source),
                                                       format_bytes(row.top_source_bytes)),
                  row.oom_count > 0 ? std::to_string(row.oom_count) : ""});
  }
  out += rows.render();
  if (limit(top, r.rows.size()) < r.rows.size()) {
    out += fmt::format("  ... {} more ranks (--top N for more, --json for all)\n",
                       r.rows.size() - limit(top, r.rows.size()));
  }
  return out;
}

}  // namespace

std::string render_ranks_text(const RanksReport& r, const std::vector<UnreadableFile>& unread,
                              int top) {
  std::string out =
      fmt::format("ranks: {} file{} read", r.rows.size(), r.rows.size() == 1 ? "" : "s");
  if (!unread.empty()) out += fmt::format(", {} could not be read (below)", unread.size());
  out += "\n";
  const std::string unread_text = unreadable_text(unread);
  if (r.rows.empty()) return out + unread_text;
  out += spread_text(r);
  out += groups_text(r, top);
  out += per_rank_text(r, top);

  if (r.highest_row && r.median_row && *r.median_row != *r.highest_row) {
    out += fmt::format(
        "\nRank {} (highest) against rank {} (median): live at each one's peak, by source "
        "(B - A = highest - median)\n",
        rank_name(r.rows[*r.highest_row]), rank_name(r.rows[*r.median_row]));
    out += diff_table(r.highest_vs_median.rows, top);
  }
  if (!r.duplicate_ranks.empty()) {
    out += fmt::format("\n! rank numbers claimed by more than one file: {} (--rank-from)\n",
                       short_list(r.duplicate_ranks));
  }
  return out + unread_text;
}

ordered_json render_ranks_json(const RanksReport& r, const std::vector<UnreadableFile>& unread) {
  ordered_json rows = ordered_json::array();
  for (const RankRow& row : r.rows) {
    rows.push_back({{"rank", rank_json(row)},
                    {"file", row.path},
                    {"device", row.device},
                    {"absolute_peak", row.facts.absolute_peak},
                    {"peak_time_s", row.facts.peak_time_s ? ordered_json(*row.facts.peak_time_s)
                                                          : ordered_json(nullptr)},
                    {"reserved_peak", row.facts.reserved_peak},
                    {"baseline", row.facts.baseline},
                    {"fragmentation", row.fragmentation},
                    {"top_source", text_or_null(row.top_source)},
                    {"top_source_bytes", row.top_source_bytes},
                    {"oom_count", row.oom_count},
                    {"robust_z", row.robust_z},
                    {"outlier", row.outlier}});
  }
  ordered_json groups = ordered_json::array();
  for (const RankGroup& group : r.groups) {
    ordered_json members = ordered_json::array();
    for (size_t i : group.rows) members.push_back(rank_json(r.rows[i]));
    ordered_json files = ordered_json::array();
    for (size_t i : group.rows) files.push_back(r.rows[i].path);
    groups.push_back({{"ranks", members},
                      {"files", files},
                      {"peak_min", group.peak_min},
                      {"peak_max", group.peak_max},
                      {"signature", group.signature}});
  }
  ordered_json outliers = ordered_json::array();
  for (const RankRow& row : r.rows) {
    if (row.outlier) outliers.push_back({{"rank", rank_json(row)}, {"file", row.path}});
  }
  ordered_json drill = nullptr;
  if (r.highest_row && r.median_row) {
    drill = {{"highest", rank_json(r.rows[*r.highest_row])},
             {"highest_file", r.rows[*r.highest_row].path},
             {"median", rank_json(r.rows[*r.median_row])},
             {"median_file", r.rows[*r.median_row].path},
             {"sources", diff_json(r.highest_vs_median.rows, -1, false)}};
  }
  return {{"files_read", r.rows.size()},
          {"unreadable", unreadable_json(unread)},
          {"spread",
           {{"min", r.peak_min},
            {"median", r.peak_median},
            {"max", r.peak_max},
            {"max_over_median", r.max_over_median},
            {"mad", r.mad}}},
          {"outliers", outliers},
          {"groups", groups},
          {"ranks", rows},
          {"highest_vs_median", drill},
          {"duplicate_ranks", r.duplicate_ranks}};
}

}  // namespace memsnap
