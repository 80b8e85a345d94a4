// `memsnap plot --text`: the overlay as a Unicode chart for a terminal.
#pragma once

#include <string>
#include <vector>

#include "analysis/reports/timeline.h"

namespace memsnap {

struct TextChartOptions {
  int width = 100;  // plot columns
  int height = 20;  // plot rows
  bool color = false;
  bool absolute = true;  // baseline + delta, else delta
};

std::string render_text_chart(const std::vector<RunTimeline>& runs,
                              const TextChartOptions& options);

}  // namespace memsnap
