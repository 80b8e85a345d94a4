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
    out.push_back({{"source", rows[i].source},
                   {"bytes", rows[i].bytes},
                   {"count", rows[i].count},
                   {"key_kind", key_kind_name(rows[i].kind)}});
  }
  return out;
}

std::string usage_table(const std::vector<SourceUsage>& rows, int top, std::string_view column) {
  TextTable table({"bytes", "count", std::string(column)}, {true, true, false});
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    table.add_row({format_bytes(rows[i].bytes), format_count(rows[i].count), rows[i].source});
  }
  return table.empty() ? "  (nothing live)\n" : table.render();
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
