// One allocation and a search's result (analysis/reports/allocation.h) as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/reports/allocation.h"

namespace memsnap {

// {"entry", "address", "size", "stream", "time_s", "source", "category",
//  "frames": [{"name", "filename", "line", "users"}], "end": null | {"entry",
//  "replaced", "time_s", "frames"}}
nlohmann::ordered_json render_allocation_json(const AllocationDetail& detail);
// {"query", "by_address", "count", "bytes", "rows": [{"entry", "size", "time_s", "source"}]}
// {"position", "source", "count", "bytes", "rows": [{"entry", "size", "time_s"}]}
nlohmann::ordered_json render_live_of_source_json(const LiveOfSource& live);
nlohmann::ordered_json render_search_json(const SearchResult& result);

}  // namespace memsnap
