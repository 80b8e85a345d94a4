// Tables and JSON arrays of per-source rows, shared by several reports so a
// column or key is named in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/sources.h"
#include "report/format.h"

namespace memsnap {

// Rows to show of `size` under --top (negative: all).
size_t limit(int top, size_t size);

// The first `top` rows (negative: all), and the rest summed.
struct ShownRows {
  std::span<const SourceUsage> rows;
  uint64_t rest_bytes = 0;
  uint64_t rest_count = 0;
  uint64_t rest_sources = 0;
};
ShownRows shown_rows(const std::vector<SourceUsage>& rows, int top);

nlohmann::ordered_json usage_json(const std::vector<SourceUsage>& rows, int top);
// Category rows carry their evidence: the cell that names it ("constructor,
// nn-init"), whether any row shown has some, and the legend that explains
// each id shown, one line each, for below the table.
bool has_evidence(std::span<const SourceUsage> rows);
// The empty table of bytes, count and `column`, with an evidence column
// when `evidence`.
TextTable usage_text_table(std::string_view column, bool evidence);
std::string evidence_cell(const SourceUsage& row);
std::string evidence_legend(std::span<const SourceUsage> rows);
// A line under a table for each of memsnap's own row names shown
// (`<no frames>`, `<before the trace: no block matches>`, "freed at ...
// (allocated before the trace)"), saying what it stands for.
std::string row_name_notes(std::span<const SourceUsage> rows);
// `column`: the rows' header (group_label of the --group-by in force).
std::string usage_table(const std::vector<SourceUsage>& rows, int top,
                        std::string_view column = "source");
std::string diff_table(const std::vector<SourceDiff>& rows, int top,
                       std::string_view column = "source");
// counts: the replay-to-time key set (bytes_a, count_a, ..., delta = A - B as
// the reference writes it, bytes_diff = B - A); else compare's (peak_a,
// peak_b, delta = B - A, ...).
nlohmann::ordered_json diff_json(const std::vector<SourceDiff>& rows, int top, bool counts);
nlohmann::ordered_json only_json(const OnlyOnOneSide& only);

// One "label | A | B | B - A" row of a side-by-side table.
void add_bytes_row(TextTable& table, const std::string& label, uint64_t a, uint64_t b);
void add_signed_bytes_row(TextTable& table, const std::string& label, int64_t a, int64_t b);
void add_count_row(TextTable& table, const std::string& label, uint64_t a, uint64_t b);

// B - A of two byte counts and of two counts, signed.
std::string signed_diff(uint64_t a, uint64_t b);
std::string count_diff(uint64_t a, uint64_t b);
// "1, 2, 3" or "1, 2, 3, 4, 5, ... 40 (40 steps)".
std::string short_list(const std::vector<int64_t>& numbers);

}  // namespace memsnap
