#include "report/line_render.h"

#include <absl/container/flat_hash_map.h>

#include "report/json_fields.h"

namespace memsnap {

nlohmann::ordered_json render_line_json(const MemoryLine& line) {
  return {{"file", line.file},
          {"device", line.device},
          {"axis", line.window.axis == LineAxis::kTime ? "time" : "event"},
          {"from", line.window.from},
          {"to", line.window.to},
          {"width", line.window.width},
          {"baseline", line.baseline},
          {"low", line.low},
          {"high", line.high},
          {"peak_at", line.peak_at}};
}

nlohmann::ordered_json render_layout_json(const AllocationLayout& layout) {
  nlohmann::ordered_json out = render_line_json(layout.line);
  out["band"] = layout.band;
  out["budget"] = layout.budget;
  out["complete"] = layout.complete;
  out["query"] = text_or_null(layout.query);
  out["matched"] = layout.matched;
  // Sources named once: a few hundred names for thousands of allocations.
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  absl::flat_hash_map<std::string_view, size_t> source_index;
  nlohmann::ordered_json allocations = nlohmann::ordered_json::array();
  for (const DrawnAllocation& drawn : layout.drawn) {
    const auto [at, added] = source_index.try_emplace(drawn.source, source_index.size());
    if (added) sources.push_back(drawn.source);
    nlohmann::ordered_json end_entry = nullptr;
    if (drawn.end_entry) end_entry = *drawn.end_entry;
    allocations.push_back({{"entry", drawn.entry},
                           {"size", drawn.size},
                           {"first_column", drawn.first_column},
                           {"last_column", drawn.last_column},
                           {"end_entry", end_entry},
                           {"time_s", number_or_null(drawn.time_s)},
                           {"end_time_s", number_or_null(drawn.end_time_s)},
                           {"source", at->second},
                           {"category", std::string(category_name(drawn.category))},
                           {"matches", drawn.matches}});
  }
  out["sources"] = std::move(sources);
  out["allocations"] = std::move(allocations);
  return out;
}

}  // namespace memsnap
