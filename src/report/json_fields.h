// JSON objects that several reports share, so a key is named in one place.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/core/segments.h"

namespace memsnap {

nlohmann::ordered_json segments_json(const SegmentTotals& segments);
// compare's segments_a/_b: the reference scripts' keys (count, total,
// allocated, active, awaiting_free, inactive), then segments_json's.
nlohmann::ordered_json compare_segments_json(const SegmentTotals& segments);
// Reserved bytes over the trace: at_start, peak, peak_event (null: at the
// start), at_dump, segment_events.
nlohmann::ordered_json reserved_json(const ReservedHistory& reserved);
// null when the allocator's state could not be replayed.
nlohmann::ordered_json fragmentation_json(const FragmentationHistory& fragmentation,
                                          std::optional<double> peak_free_time_s);
nlohmann::ordered_json baseline_json(const Baseline& baseline);
// The text, or null where there is none (an empty string).
nlohmann::ordered_json text_or_null(const std::string& text);
// The number, or null where there is none.
nlohmann::ordered_json number_or_null(std::optional<double> value);

// Python's round(value, decimals) for a finite double: the exact binary value
// rounded half to even at that decimal, read back as the nearest double. For
// keys where the reference scripts write a rounded figure.
double python_round(double value, int decimals);

}  // namespace memsnap
