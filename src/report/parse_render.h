// Renderers of `memsnap parse`: they only read a finished ParseResult.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/parse_summary.h"

namespace memsnap {

std::string render_parse_text(const ParseResult& result);
nlohmann::ordered_json render_parse_json(const ParseResult& result);

}  // namespace memsnap
