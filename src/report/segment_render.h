// Renderers of `memsnap segments`: they only read a finished SegmentReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/segment_report.h"

namespace memsnap {

std::string render_segments_text(const SegmentReport& report, int top);
nlohmann::ordered_json render_segments_json(const SegmentReport& report, int top);
// A segment's or a group's bytes by block state, as every report's JSON writes them.
nlohmann::ordered_json block_bytes_json(const BlockBytes& bytes);

}  // namespace memsnap
