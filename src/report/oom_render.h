// Renderers of `memsnap oom`: they only read a finished OomAnalysis.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/oom_report.h"

namespace memsnap {

std::string render_oom_text(const OomAnalysis& report, int top);
nlohmann::ordered_json render_oom_json(const OomAnalysis& report, int top);
// oom DIR: the table of ranks, then the first OOM's full analysis.
std::string render_oom_ranks_text(const OomRanks& ranks, int top);
nlohmann::ordered_json render_oom_ranks_json(const OomRanks& ranks, int top);

}  // namespace memsnap
