// memsnap serve's memory line (analysis/reports/memory_line.h) as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/reports/memory_line.h"

namespace memsnap {

// {"file", "device", "axis": "time" | "event", "from", "to", "width",
//  "baseline", "low": [bytes per column], "high": [...]}, absolute bytes.
nlohmann::ordered_json render_line_json(const MemoryLine& line);

}  // namespace memsnap
