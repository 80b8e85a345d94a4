#include "report/allocation_render.h"

#include "report/json_fields.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

ordered_json frames_json(const std::vector<AllocationFrame>& frames) {
  ordered_json out = ordered_json::array();
  for (const AllocationFrame& frame : frames) {
    out.push_back({{"name", frame.name},
                   {"filename", frame.filename},
                   {"line", frame.line},
                   {"users", frame.users}});
  }
  return out;
}

}  // namespace

ordered_json render_allocation_json(const AllocationDetail& detail) {
  ordered_json end = nullptr;
  if (detail.end) {
    end = {{"entry", detail.end->entry},
           {"replaced", detail.end->replaced},
           {"time_s", number_or_null(detail.end->time_s)},
           {"frames", frames_json(detail.end->frames)}};
  }
  return {{"entry", detail.entry},
          {"address", detail.address},
          {"size", detail.size},
          {"stream", detail.stream},
          {"time_s", number_or_null(detail.time_s)},
          {"source", detail.source},
          {"category", std::string(category_name(detail.category))},
          {"frames", frames_json(detail.frames)},
          {"end", end}};
}

ordered_json render_live_of_source_json(const LiveOfSource& live) {
  ordered_json rows = ordered_json::array();
  for (const FoundAllocation& row : live.rows) {
    rows.push_back(
        {{"entry", row.entry}, {"size", row.size}, {"time_s", number_or_null(row.time_s)}});
  }
  return {{"position", live.position},
          {"source", live.source},
          {"count", live.count},
          {"bytes", live.bytes},
          {"rows", rows}};
}

ordered_json render_search_json(const SearchResult& result) {
  ordered_json rows = ordered_json::array();
  for (const FoundAllocation& row : result.rows) {
    rows.push_back({{"entry", row.entry},
                    {"size", row.size},
                    {"time_s", number_or_null(row.time_s)},
                    {"source", row.source}});
  }
  return {{"query", result.query},
          {"by_address", result.by_address},
          {"count", result.count},
          {"bytes", result.bytes},
          {"rows", rows}};
}

}  // namespace memsnap
