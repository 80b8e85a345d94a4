// Renderers of `memsnap segments`: they only read a finished SegmentReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/segment_report.h"
#include "analysis/reports/segment_timeline.h"

namespace memsnap {

std::string render_segments_text(const SegmentReport& report, int top);
nlohmann::ordered_json render_segments_json(const SegmentReport& report, int top);
// serve's segment map: the first `limit` segments of a report made with
// keep_blocks, each {"address", "reserved", "blocks": [[offset, size, state,
// requested], ...]} in address order, state 0 allocated, 1 awaiting free,
// 2 free, 3 unknown.
nlohmann::ordered_json render_segment_map_json(const SegmentReport& report, size_t limit);
// serve's segment timeline: {"file", "device", "axis", "from", "to",
// "width", "reserved": [bytes per column], "peak_at": [position per
// column], "band": [...], "segment_events", "budget", "complete",
// "segments": [{"address", "size", "stream", "expandable", "pool",
// "pool_label" (null where the dump does not hold it), "first_column",
// "last_column", "begin_entry", "end_entry"}]}.
nlohmann::ordered_json render_segment_timeline_json(const SegmentTimeline& timeline);
// A segment's or a group's bytes by block state, as every report's JSON writes them.
nlohmann::ordered_json block_bytes_json(const BlockBytes& bytes);

}  // namespace memsnap
