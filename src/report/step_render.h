// Renderers of replay-step: they only read a finished result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/step_report.h"

namespace memsnap {

// `top`: source rows per step (negative: all).
std::string render_steps_text(const ReplayStepResult& result, int top);
nlohmann::ordered_json render_steps_json(const ReplayStepResult& result, int top);

}  // namespace memsnap
