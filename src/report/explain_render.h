// `memsnap explain`: the one-page text and its JSON document.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/explain.h"

namespace memsnap {

std::string render_explain_text(const ExplainReport& report);
nlohmann::ordered_json render_explain_json(const ExplainReport& report);

}  // namespace memsnap
