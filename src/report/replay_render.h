// Renderers of compare, replay-to-time and replay-step.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/replay_reports.h"

namespace memsnap {

std::string render_steps_text(const ReplayStepResult& result);
nlohmann::ordered_json render_steps_json(const ReplayStepResult& result);

std::string render_time_text(const TimeSide& side, int top);
nlohmann::ordered_json render_time_json(const TimeSide& side, int top);
std::string render_time_pair_text(const TimeSide& a, const TimeSide& b, int top);
nlohmann::ordered_json render_time_pair_json(const TimeSide& a, const TimeSide& b, int top);

std::string render_compare_text(const CompareResult& result, int top);
nlohmann::ordered_json render_compare_json(const CompareResult& result, int top);

}  // namespace memsnap
