// memsnap serve's memory line (analysis/reports/memory_line.h) as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/reports/allocation_layout.h"
#include "analysis/reports/memory_line.h"

namespace memsnap {

// {"file", "device", "axis": "time" | "event", "from", "to", "width",
//  "baseline", "low": [bytes per column], "high": [...], "peak_at":
//  [position per column]}, absolute bytes.
nlohmann::ordered_json render_line_json(const MemoryLine& line);

// The line's fields, then "band": [bytes per column], "budget", "complete",
// "query", "matched", "sources": [names], "allocations": [{"entry", "size",
// "first_column", "last_column", "end_entry", "time_s", "end_time_s",
// "source" (an index into "sources"), "category", "matches"}] by entry.
nlohmann::ordered_json render_layout_json(const AllocationLayout& layout);

}  // namespace memsnap
