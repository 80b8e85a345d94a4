// Renderers of replay-step: they only read a finished result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/step_report.h"

namespace memsnap {

std::string render_steps_text(const ReplayStepResult& result);
nlohmann::ordered_json render_steps_json(const ReplayStepResult& result);

}  // namespace memsnap
