// Renderers of replay-to-time (one file or a pair): they only read a finished result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/time_report.h"

namespace memsnap {

std::string render_time_text(const TimeSide& side, int top);
nlohmann::ordered_json render_time_json(const TimeSide& side, int top);
std::string render_time_pair_text(const TimePair& pair, int top);
nlohmann::ordered_json render_time_pair_json(const TimePair& pair, int top);

}  // namespace memsnap
