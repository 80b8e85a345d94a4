// The files memsnap reads besides snapshots, for both fuzz targets: an input
// that starts with one of these tag lines is the rest of such a file.
//
//   "#summary\n" JSON      a run summary: read, then ranks and check over it
//   "#budget\n" TOML|JSON  a budget: read, then a check against it
//   "#rules\n" TEXT        --category-rules: read, then its patterns matched
//                          against the file's own lines
//   "#regex\n" P "\n" S    a pattern (--skip, --keep, --rank-from) and a subject
//
// Anything else is a pickle. Whatever the rest is, it must end in a result or
// a memsnap::Error: never a crash, a hang or undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/reports/check.h"
#include "analysis/reports/ranks.h"
#include "analysis/core/source_key.h"
#include "formats/budget_file.h"
#include "formats/summary_json.h"
#include "memsnap/error.h"
#include "report/check_render.h"
#include "report/ranks_render.h"
#include "util/pattern.h"

namespace memsnap::fuzz {

inline void exercise_summary(std::string_view text) {
  const RunSummary summary = read_summary_json(text, "fuzz.summary.json");
  const RanksReport ranked = analyze_ranks({summary, summary});
  (void)render_ranks_text(ranked, {}, 5);
  (void)render_ranks_json(ranked, {})
      .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::vector<Limit> limits = budget_from_run(summary, 0.05);
  limits.push_back(Limit{LimitKind::kMaxSourceGrowth, Amount{1, true}, {}, false});
  for (const bool allow : {false, true}) {
    const CheckReport checked = run_check(summary, &summary, limits,
                                          {.baseline_is_summary = true, .allow_unmeasured = allow});
    (void)render_check_text(checked, 5);
    (void)render_check_json(checked, 5)
        .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    (void)render_check_junit(checked, 5);
    (void)render_check_github(checked, 5);
    (void)render_check_markdown(checked, 5);
  }
  (void)render_summary_json(summary);
}

inline void exercise_budget(std::string_view text) {
  const std::vector<Limit> limits = read_budget(text, "fuzz.toml");
  RunSummary run;
  run.path = "fuzz.pickle";
  const CheckReport checked = run_check(run, &run, limits);
  (void)render_check_text(checked, 5);
  (void)render_check_markdown(checked, 5);
  (void)read_budget(write_budget_toml(limits, "fuzz"), "fuzz.toml");
}

inline void exercise_rules(std::string_view text) {
  const std::vector<CategoryRuleSpec> rules = parse_category_rules(text, "fuzz.rules");
  for (const CategoryRuleSpec& rule : rules) {
    const Pattern pattern(rule.pattern, "fuzz.rules");
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      (void)pattern.search(text.substr(start, end - start));
      start = end + 1;
    }
  }
}

inline void exercise_regex(std::string_view text) {
  const size_t newline = text.find('\n');
  const std::string_view pattern = text.substr(0, newline);
  const std::string_view subject =
      newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  const Pattern compiled(pattern, "--skip");
  (void)compiled.search(subject);
  (void)compiled.first_group(subject);
  (void)fx_origin(subject);
}

// True when the input was one of the tagged files (and has been exercised).
inline bool exercise_text_input(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  struct Tag {
    std::string_view line;
    void (*exercise)(std::string_view);
  };
  static constexpr Tag kTags[] = {{"#summary\n", exercise_summary},
                                  {"#budget\n", exercise_budget},
                                  {"#rules\n", exercise_rules},
                                  {"#regex\n", exercise_regex}};
  for (const Tag& tag : kTags) {
    if (!input.starts_with(tag.line)) continue;
    try {
      tag.exercise(input.substr(tag.line.size()));
    } catch (const Error&) {
      // a refusal: the expected end for most mutations
    }
    return true;
  }
  return false;
}

}  // namespace memsnap::fuzz
