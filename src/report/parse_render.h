// Renderers of `memsnap parse`: they only read a finished ParseReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/parse_report.h"

namespace memsnap {

std::string render_parse_text(const ParseReport& result);
nlohmann::ordered_json render_parse_json(const ParseReport& result);

}  // namespace memsnap
