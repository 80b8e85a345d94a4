#include "report/run_compare_render.h"

#include <fmt/format.h>

#include "report/compare_render.h"
#include "report/format.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

std::string file_list(const std::vector<RunSummary>& run, const std::vector<size_t>& files) {
  std::vector<std::string> names;
  names.reserve(files.size());
  for (size_t i : files) {
    names.push_back(run[i].rank ? fmt::format("rank {} ({})", *run[i].rank, printable(run[i].path))
                                : fmt::format("{} (no rank in its name)", printable(run[i].path)));
  }
  std::string out;
  for (const std::string& name : names) out += "    " + name + "\n";
  return out;
}

ordered_json files_json(const std::vector<RunSummary>& run, const std::vector<size_t>& files) {
  ordered_json out = ordered_json::array();
  for (size_t i : files) {
    out.push_back({{"rank", run[i].rank ? ordered_json(*run[i].rank) : ordered_json(nullptr)},
                   {"file", run[i].path}});
  }
  return out;
}

}  // namespace

std::string render_run_compare_text(const RunCompareView& v, int top) {
  const RunComparison& c = *v.comparison;
  std::string out = fmt::format(
      "compare {} ({} files) with {} ({} files): {} rank{} matched, rank N with rank N; every "
      "difference is B - A\n",
      printable(v.dir_a), v.a->size(), printable(v.dir_b), v.b->size(), c.pairs.size(),
      c.pairs.size() == 1 ? "" : "s");
  if (c.pairs.empty()) {
    out +=
        "  no rank is in both runs: name the files so that each ends in its rank, or pass "
        "--rank-from REGEX\n";
  } else {
    out += fmt::format("  highest peak of the matched ranks: A {}, B {} ({})\n",
                       format_level_bytes(c.max_peak_a), format_level_bytes(c.max_peak_b),
                       format_signed_bytes(c.max_peak_b - c.max_peak_a));
    out += "\nPer rank, largest growth first\n";
    TextTable table({"rank", "A peak", "B peak", "B - A", "A reserved", "B reserved"},
                    {true, true, true, true, true, true});
    for (size_t i = 0; i < limit(top, c.pairs.size()); ++i) {
      const RankPair& p = c.pairs[i];
      table.add_row({std::to_string(p.rank), format_level_bytes(p.peak_a),
                     format_level_bytes(p.peak_b), format_signed_bytes(p.delta()),
                     format_bytes(p.reserved_a), format_bytes(p.reserved_b)});
    }
    out += table.render();
    if (limit(top, c.pairs.size()) < c.pairs.size()) {
      out += fmt::format("  ... {} more ranks (--top N for more, --json for all)\n",
                         c.pairs.size() - limit(top, c.pairs.size()));
    }
  }
  // Appended in two steps: GCC 12 warns (falsely, -Wrestrict) on literal + string here.
  if (!c.only_a.empty()) {
    out += "\nOnly in A (no rank to match in B)\n";
    out += file_list(*v.a, c.only_a);
  }
  if (!c.only_b.empty()) {
    out += "\nOnly in B (no rank to match in A)\n";
    out += file_list(*v.b, c.only_b);
  }
  if (c.grew_most) {
    const RankPair& p = c.pairs[*c.grew_most];
    const std::string& file_a = (*v.a)[p.a].path;
    const std::string& file_b = (*v.b)[p.b].path;
    out += fmt::format("\nRank {} grew most ({}): memsnap compare {} {}\n", p.rank,
                       format_signed_bytes(p.delta()), printable(file_a), printable(file_b));
    if (v.drill != nullptr) {
      out += "\n";
      out += render_compare_text(*v.drill, top);
    } else {
      out += "(from the summaries: live at each one's peak by source)\n";
      out += diff_table(c.grew_most_sources.rows, top);
    }
  }
  out += unreadable_text(v.unread);
  return out;
}

ordered_json render_run_compare_json(const RunCompareView& v, int top) {
  const RunComparison& c = *v.comparison;
  ordered_json pairs = ordered_json::array();
  for (const RankPair& p : c.pairs) {
    pairs.push_back({{"rank", p.rank},
                     {"file_a", (*v.a)[p.a].path},
                     {"file_b", (*v.b)[p.b].path},
                     {"absolute_peak_a", p.peak_a},
                     {"absolute_peak_b", p.peak_b},
                     {"absolute_peak_diff", p.delta()},
                     {"reserved_peak_a", p.reserved_a},
                     {"reserved_peak_b", p.reserved_b}});
  }
  ordered_json drill = nullptr;
  if (c.grew_most) {
    const RankPair& p = c.pairs[*c.grew_most];
    drill = {{"rank", p.rank},
             {"file_a", (*v.a)[p.a].path},
             {"file_b", (*v.b)[p.b].path},
             {"absolute_peak_diff", p.delta()},
             {"compare",
              v.drill != nullptr ? render_compare_json(*v.drill, top) : ordered_json(nullptr)},
             {"sources", diff_json(c.grew_most_sources.rows, top, false)}};
  }
  return {{"run_a", v.dir_a},
          {"run_b", v.dir_b},
          {"files_a", v.a->size()},
          {"files_b", v.b->size()},
          {"matched", c.pairs.size()},
          {"max_peak_a", c.max_peak_a},
          {"max_peak_b", c.max_peak_b},
          {"ranks", pairs},
          {"only_a", files_json(*v.a, c.only_a)},
          {"only_b", files_json(*v.b, c.only_b)},
          {"grew_most", drill},
          {"unreadable", unreadable_json(v.unread)}};
}

}  // namespace memsnap
