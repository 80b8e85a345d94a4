// The self-contained HTML timeline of `memsnap plot`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/timeline.h"

namespace memsnap {

// The data the page reads (see web/README.md for the contract).
nlohmann::ordered_json plot_data_json(const std::vector<RunTimeline>& runs, double precision_ms);

// False when built with MEMSNAP_HTML_PLOT=OFF (no web assets embedded).
bool html_plot_available();

// The page: the template with the chart library, memsnap's script, styles
// and the data inlined.
std::string render_plot_html(const std::vector<RunTimeline>& runs, double precision_ms);

}  // namespace memsnap
