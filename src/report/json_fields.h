// JSON objects that several reports share, so a key is named in one place.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/segments.h"

namespace memsnap {

nlohmann::ordered_json segments_json(const SegmentTotals& segments);
// compare's segments_a/_b: the reference scripts' keys (count, total,
// allocated, active, awaiting_free, inactive), then segments_json's.
nlohmann::ordered_json compare_segments_json(const SegmentTotals& segments);
nlohmann::ordered_json baseline_json(const Baseline& baseline);

}  // namespace memsnap
