// `memsnap summarize` in a terminal: one line per summarised file.
#pragma once

#include <string>
#include <vector>

#include "analysis/reports/run_summary.h"

namespace memsnap {

// `memsnap summarize` in a terminal: one row per file (rank, absolute peak,
// reserved peak, what was largest at the peak), and where each summary went
// (`outputs[i]`, empty when none was written).
std::string render_summaries_text(const std::vector<RunSummary>& summaries,
                                  const std::vector<std::string>& outputs);

}  // namespace memsnap
