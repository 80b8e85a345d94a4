#include "report/source_tables.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "report/format.h"

namespace memsnap {

using nlohmann::ordered_json;

size_t limit(int top, size_t size) {
  return top < 0 ? size : std::min(size, static_cast<size_t>(top));
}

ShownRows shown_rows(const std::vector<SourceUsage>& rows, int top) {
  const size_t shown = limit(top, rows.size());
  ShownRows out{.rows = std::span(rows).first(shown)};
  for (size_t i = shown; i < rows.size(); ++i) {
    out.rest_bytes += rows[i].bytes;
    out.rest_count += rows[i].count;
    ++out.rest_sources;
  }
  return out;
}

ordered_json usage_json(const std::vector<SourceUsage>& rows, int top) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    ordered_json row = {{"source", rows[i].source},
                        {"bytes", rows[i].bytes},
                        {"count", rows[i].count},
                        {"key_kind", key_kind_name(rows[i].kind)}};
    if (!rows[i].evidence.empty()) {
      // A category row: its name under its own key too (`source` stays for
      // the tools that read it, docs/json-schema.md).
      row["category"] = rows[i].source;
      ordered_json evidence = ordered_json::array();
      for (const RowEvidence& part : rows[i].evidence) {
        evidence.push_back({{"rule", category_evidence()[part.evidence].id},
                            {"bytes", part.bytes},
                            {"count", part.count}});
      }
      row["evidence"] = std::move(evidence);
    }
    out.push_back(std::move(row));
  }
  return out;
}

bool has_evidence(std::span<const SourceUsage> rows) {
  return std::any_of(rows.begin(), rows.end(),
                     [](const SourceUsage& row) { return !row.evidence.empty(); });
}

TextTable usage_text_table(std::string_view column, bool evidence) {
  std::vector<std::string> headers = {"bytes", "count", std::string(column)};
  std::vector<bool> right = {true, true, false};
  if (evidence) {
    headers.emplace_back("evidence");
    right.push_back(false);
  }
  return TextTable(std::move(headers), std::move(right));
}

std::string evidence_cell(const SourceUsage& row) {
  constexpr size_t kShown = 3;
  std::vector<std::string_view> ids;
  for (size_t i = 0; i < std::min(kShown, row.evidence.size()); ++i)
    ids.push_back(category_evidence()[row.evidence[i].evidence].id);
  std::string cell = fmt::format("{}", fmt::join(ids, ", "));
  if (row.evidence.size() > kShown) cell += fmt::format(" +{}", row.evidence.size() - kShown);
  return cell;
}

std::string evidence_legend(std::span<const SourceUsage> rows) {
  std::vector<EvidenceId> shown;
  for (const SourceUsage& row : rows) {
    for (size_t i = 0; i < std::min<size_t>(3, row.evidence.size()); ++i) {
      if (std::find(shown.begin(), shown.end(), row.evidence[i].evidence) == shown.end())
        shown.push_back(row.evidence[i].evidence);
    }
  }
  if (shown.empty()) return {};
  std::string out = "  evidence:\n";
  for (EvidenceId id : shown) {
    const CategoryEvidence& e = category_evidence()[id];
    out += fmt::format("    {}: {}\n", e.id, e.text);
  }
  return out;
}

std::string row_name_notes(std::span<const SourceUsage> rows) {
  const auto shown = [rows](auto&& matches) {
    return std::any_of(rows.begin(), rows.end(),
                       [&](const SourceUsage& row) { return matches(row.source); });
  };
  std::string out;
  if (shown([](std::string_view name) { return name == kNoFrames; })) {
    out += fmt::format(
        "  {}: allocations whose entries carry no stack (recorded without frames, or held since "
        "before recording)\n",
        kNoFrames);
  }
  if (shown([](std::string_view name) { return name == kBaselineUnmatched; })) {
    out += fmt::format(
        "  {}: memory the replay counts from before the trace that no block of the dump "
        "accounts for (a traced allocation whose block size differs, or one the dump lacks)\n",
        kBaselineUnmatched);
  }
  if (shown([](std::string_view name) {
        return name.starts_with(kFreedAtPrefix) && name.ends_with(kFreedAtSuffix);
      })) {
    out += fmt::format(
        "  {}CODE{}: memory allocated before the trace began; only its free is recorded, so the "
        "code that freed it names it\n",
        kFreedAtPrefix, kFreedAtSuffix);
  }
  return out;
}

std::string usage_table(const std::vector<SourceUsage>& rows, int top, std::string_view column) {
  const std::span<const SourceUsage> shown = std::span(rows).first(limit(top, rows.size()));
  const bool evidence = has_evidence(shown);
  TextTable table = usage_text_table(column, evidence);
  for (const SourceUsage& row : shown) {
    std::vector<std::string> cells = {format_bytes(row.bytes), format_count(row.count), row.source};
    if (evidence) cells.push_back(evidence_cell(row));
    table.add_row(cells);
  }
  return table.empty() ? "  (nothing live)\n"
                       : table.render() + evidence_legend(shown) + row_name_notes(shown);
}

std::string diff_table(const std::vector<SourceDiff>& rows, int top, std::string_view column) {
  TextTable table({"A", "B", "B - A", "count A", "count B", std::string(column)},
                  {true, true, true, true, true, false});
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    const SourceDiff& r = rows[i];
    table.add_row({format_bytes(r.bytes_a), format_bytes(r.bytes_b), format_signed_bytes(r.delta()),
                   format_count(r.count_a), format_count(r.count_b), r.source});
  }
  return table.empty() ? "  (nothing live on either side)\n" : table.render();
}

ordered_json diff_json(const std::vector<SourceDiff>& rows, int top, bool counts) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    const SourceDiff& r = rows[i];
    if (counts) {
      // The reference's replay-to-time writes delta as A - B; memsnap's B - A
      // goes under bytes_diff.
      out.push_back({{"source", r.source},
                     {"bytes_a", r.bytes_a},
                     {"count_a", r.count_a},
                     {"bytes_b", r.bytes_b},
                     {"count_b", r.count_b},
                     {"delta", static_cast<int64_t>(r.bytes_a) - static_cast<int64_t>(r.bytes_b)},
                     {"bytes_diff", r.delta()},
                     {"key_kind", key_kind_name(r.kind)}});
    } else {
      out.push_back({{"source", r.source},
                     {"peak_a", r.bytes_a},
                     {"peak_b", r.bytes_b},
                     {"delta", r.delta()},
                     {"count_a", r.count_a},
                     {"count_b", r.count_b},
                     {"key_kind", key_kind_name(r.kind)}});
    }
  }
  return out;
}

std::string signed_diff(uint64_t a, uint64_t b) {
  return format_signed_bytes(static_cast<int64_t>(b) - static_cast<int64_t>(a));
}

std::string count_diff(uint64_t a, uint64_t b) {
  // Thousands separated like the counts beside it: "+1,234", "-2,221", "0".
  if (a == b) return "0";
  return b > a ? fmt::format("+{}", format_count(b - a)) : fmt::format("-{}", format_count(a - b));
}

std::string short_list(const std::vector<int64_t>& numbers) {
  if (numbers.empty()) return "none";
  if (numbers.size() <= 12) return fmt::format("{}", fmt::join(numbers, ", "));
  return fmt::format("{}, ... {} ({} steps)", fmt::join(numbers.begin(), numbers.begin() + 5, ", "),
                     numbers.back(), numbers.size());
}

void add_bytes_row(TextTable& table, const std::string& label, uint64_t a, uint64_t b) {
  table.add_row({label, format_bytes(a), format_bytes(b), signed_diff(a, b)});
}

void add_signed_bytes_row(TextTable& table, const std::string& label, int64_t a, int64_t b) {
  table.add_row(
      {label, format_signed_bytes(a), format_signed_bytes(b), format_signed_bytes(b - a)});
}

void add_count_row(TextTable& table, const std::string& label, uint64_t a, uint64_t b) {
  table.add_row({label, format_count(a), format_count(b), count_diff(a, b)});
}

ordered_json only_json(const OnlyOnOneSide& only) {
  return {{"sources", only.sources}, {"bytes", only.bytes}};
}

}  // namespace memsnap
