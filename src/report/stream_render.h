// Renderers of `memsnap streams`: they only read a finished StreamReport.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/reports/stream_report.h"

namespace memsnap {

std::string render_streams_text(const StreamReport& report, int top);
nlohmann::ordered_json render_streams_json(const StreamReport& report, int top);

}  // namespace memsnap
