// Renderers of `memsnap whatif` (a finished WhatIfReport) and of
// `memsnap whatif --check` (a finished SegmentCheck).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/whatif.h"

namespace memsnap {

std::string render_whatif_check_text(const SegmentCheck& check, int top);
nlohmann::ordered_json render_whatif_check_json(const SegmentCheck& check, int top);
std::string render_whatif_text(const WhatIfReport& report, int top);
// The line `oom` and `explain` print for the first OOM, and its JSON.
std::string prediction_text(const OomPrediction& prediction);
nlohmann::ordered_json prediction_json(const std::optional<OomPrediction>& prediction);
nlohmann::ordered_json render_whatif_json(const WhatIfReport& report, int top);
// "given", "oom" or "peak": where the capacity came from, in JSON.
const char* capacity_from_name(WhatIfReport::CapacityFrom from);

}  // namespace memsnap
