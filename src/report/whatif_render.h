// Renderers of `memsnap whatif --check`: they only read a finished
// SegmentCheck.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/whatif.h"

namespace memsnap {

std::string render_whatif_check_text(const SegmentCheck& check, int top);
nlohmann::ordered_json render_whatif_check_json(const SegmentCheck& check, int top);

}  // namespace memsnap
