// `memsnap explain`: the one-page text and its JSON document.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/explain.h"

namespace memsnap {

// `top`: rows per table (negative: all); the rest are summed in one row.
std::string render_explain_text(const ExplainReport& report, int top);
nlohmann::ordered_json render_explain_json(const ExplainReport& report, int top);

}  // namespace memsnap
