// Renderers of `memsnap oom`: they only read a finished OomReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/oom_report.h"

namespace memsnap {

std::string render_oom_text(const OomReport& report, int top);
nlohmann::ordered_json render_oom_json(const OomReport& report, int top);

}  // namespace memsnap
