// `memsnap check` in five formats: text, JSON, JUnit XML (pugixml), GitHub
// Actions annotations, and Markdown (for $GITHUB_STEP_SUMMARY or a PR comment).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/check.h"

namespace memsnap {

// The ready commands to look closer (compare, plot), for the current file
// against the baseline.
std::vector<std::string> investigate_commands(const CheckReport& report);

// One line per limit: "absolute peak 12.50 GiB > 12.00 GiB (by 512.00 MiB)".
std::string limit_sentence(const LimitResult& result);

std::string render_check_text(const CheckReport& report, int top);
nlohmann::ordered_json render_check_json(const CheckReport& report, int top);
std::string render_check_junit(const CheckReport& report, int top);
std::string render_check_github(const CheckReport& report, int top);
std::string render_check_markdown(const CheckReport& report, int top);

// The same for a run folder checked rank by rank (check_ranked).
std::string render_check_text(const RankedCheck& r, int top);
nlohmann::ordered_json render_check_json(const RankedCheck& r, int top);
std::string render_check_junit(const RankedCheck& r, int top);
std::string render_check_github(const RankedCheck& r, int top);
std::string render_check_markdown(const RankedCheck& r, int top);

}  // namespace memsnap
