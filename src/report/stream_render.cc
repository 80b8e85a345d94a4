#include "report/stream_render.h"

#include <fmt/format.h>

#include <algorithm>

#include "report/format.h"
#include "report/segment_render.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

size_t shown(const StreamReport& report, int top) {
  return std::min(report.rows.size(), static_cast<size_t>(std::max(top, 0)));
}

std::string stream_label(uint64_t stream) {
  return stream == 0 ? "0 (default)" : std::to_string(stream);
}

std::string peak_time_text(const StreamRow& row) {
  if (row.alloc_count == 0) return "-";
  return row.peak_time_s ? fmt::format("{:.3f} s", *row.peak_time_s) : "?";
}

}  // namespace

std::string render_streams_text(const StreamReport& r, int top) {
  std::string out = fmt::format("Streams of device {} in {}: {} stream{}, {} trace entries\n",
                                r.device, printable(r.file), r.rows.size(),
                                r.rows.size() == 1 ? "" : "s", format_count(r.trace_entries));
  if (r.rows.empty()) return out + "  No segments and no trace entries on this device.\n";
  out += "\n";
  TextTable table({"stream", "segments", "reserved", "allocated", "free", "largest free",
                   "allocs in trace", "allocated in trace", "peak live in trace", "peak at"});
  const size_t count = shown(r, top);
  for (size_t i = 0; i < count; ++i) {
    const StreamRow& row = r.rows[i];
    table.add_row({stream_label(row.stream), format_count(row.segments),
                   format_bytes(row.dump.reserved), format_bytes(row.dump.allocated),
                   format_bytes(row.dump.free), format_bytes(row.dump.largest_free),
                   format_count(row.alloc_count), format_bytes(row.alloc_bytes),
                   format_level_bytes(row.peak_live), peak_time_text(row)});
  }
  out += table.render();
  if (count < r.rows.size()) {
    out += fmt::format("  ... {} more stream{} (--top to show more)\n", r.rows.size() - count,
                       r.rows.size() - count == 1 ? "" : "s");
  }
  out +=
      "\nsegments to largest free: the allocator at the dump; the columns after: the trace's own "
      "allocations on the stream (memory from before the trace is not counted).\n"
      "Free memory in one stream's segments serves only that stream's requests until the "
      "allocator returns it to CUDA.\n";
  return out;
}

ordered_json render_streams_json(const StreamReport& r, int top) {
  ordered_json rows = ordered_json::array();
  const size_t count = shown(r, top);
  for (size_t i = 0; i < count; ++i) {
    const StreamRow& row = r.rows[i];
    ordered_json dump = {{"segments", row.segments}};
    dump.update(block_bytes_json(row.dump));
    rows.push_back({{"stream", row.stream},
                    {"dump", std::move(dump)},
                    {"trace",
                     {{"alloc_count", row.alloc_count},
                      {"alloc_bytes", row.alloc_bytes},
                      {"free_count", row.free_count},
                      {"segment_allocs", row.segment_allocs},
                      {"peak_live", row.peak_live},
                      {"peak_time_s",
                       row.peak_time_s ? ordered_json(*row.peak_time_s) : ordered_json(nullptr)},
                      {"end_live", row.end_live}}}});
  }
  return {{"file", r.file},
          {"device", r.device},
          {"trace_entries", r.trace_entries},
          {"stream_count", r.rows.size()},
          {"streams", std::move(rows)},
          {"more_streams", r.rows.size() - count}};
}

}  // namespace memsnap
