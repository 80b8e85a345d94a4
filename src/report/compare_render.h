// Renderers of compare: they only read a finished result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/compare.h"

namespace memsnap {

std::string render_compare_text(const CompareResult& result, int top);
nlohmann::ordered_json render_compare_json(const CompareResult& result, int top);

}  // namespace memsnap
