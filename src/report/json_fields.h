// JSON objects that several reports share, so a key is named in one place.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/segments.h"

namespace memsnap {

nlohmann::ordered_json segments_json(const SegmentTotals& segments);
nlohmann::ordered_json baseline_json(const Baseline& baseline);

}  // namespace memsnap
