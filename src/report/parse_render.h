// Renderers of `memsnap parse`: they only read a finished ParseReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/parse_report.h"

namespace memsnap {

// `top`: source rows to show (negative: all).
std::string render_parse_text(const ParseReport& result, int top);
nlohmann::ordered_json render_parse_json(const ParseReport& result, int top);

}  // namespace memsnap
