#include "report/summaries_render.h"

#include <fmt/format.h>
#include <algorithm>

#include "report/format.h"

namespace memsnap {

std::string render_summaries_text(const std::vector<RunSummary>& summaries,
                                  const std::vector<std::string>& outputs) {
  const bool written = std::any_of(outputs.begin(), outputs.end(),
                                   [](const std::string& path) { return !path.empty(); });
  std::vector<std::string> header{"rank", "file", "absolute peak", "reserved peak",
                                  "largest at the peak"};
  if (written) header.emplace_back("summary");
  TextTable table(header, {true, false, true, true, false, false});
  for (size_t i = 0; i < summaries.size(); ++i) {
    const RunSummary& s = summaries[i];
    std::string largest = "-";
    if (!s.live_at_peak.empty()) {
      largest = fmt::format("{} ({})", printable(s.live_at_peak.front().source),
                            format_bytes(s.live_at_peak.front().bytes));
    }
    std::vector<std::string> row{s.rank ? std::to_string(*s.rank) : "-", printable(s.path),
                                 format_level_bytes(s.facts.absolute_peak),
                                 format_bytes(s.facts.reserved_peak), largest};
    if (written) row.push_back(i < outputs.size() ? printable(outputs[i]) : "");
    table.add_row(std::move(row));
  }
  return table.render();
}

}  // namespace memsnap
