// `memsnap check` in five formats: text, JSON, JUnit XML (pugixml), GitHub
// Actions annotations, and Markdown (for $GITHUB_STEP_SUMMARY or a PR comment).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/check.h"

namespace memsnap {

// The ready commands to look closer (compare, plot), for the current file
// against the baseline.
std::vector<std::string> investigate_commands(const CheckReport& report);

// One line per limit: "absolute peak 12.50 GiB > 12.00 GiB (by 512.00 MiB)".
std::string limit_sentence(const LimitResult& result);

// The count in one phrase, the same in the report's headline and in the exit
// message: "5 of 8 limits violated (1 not checked)", "8 limits hold"; for a
// folder "2 of 8 ranks violate 3 limits", "every limit holds on all 8 ranks".
std::string check_verdict(const CheckReport& report);
std::string check_verdict(const RankedCheck& report);

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
