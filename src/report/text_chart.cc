#include "report/text_chart.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "report/format.h"

namespace memsnap {
namespace {

constexpr const char* kMarks[] = {"●", "◆", "▲", "■", "○", "◇"};
constexpr const char* kColors[] = {"\033[34m", "\033[31m", "\033[32m",
                                   "\033[35m", "\033[36m", "\033[33m"};
constexpr const char* kReset = "\033[0m";

// Column maxima of a run: by wall clock when every run has time, else by
// event index, so that runs share one x axis.
std::vector<double> column_max(const RunTimeline& run, bool by_time, double extent, int width) {
  const Buckets& buckets = by_time ? run.time_buckets : run.index_buckets;
  std::vector<double> columns(static_cast<size_t>(width), std::nan(""));
  double run_extent =
      std::max(0.0, by_time ? run.duration_s * 1e6 : static_cast<double>(run.event_count));
  for (size_t b = 0; b < buckets.max.size(); ++b) {
    double position = (static_cast<double>(b) + 0.5) * buckets.width;
    if (position > run_extent + buckets.width) break;
    auto column =
        static_cast<size_t>(std::clamp<double>(position / extent * width, 0.0, width - 1));
    double value = buckets.max[b];
    columns[column] = std::isnan(columns[column]) ? value : std::max(columns[column], value);
  }
  // Carry values into columns with no bucket, up to the run's own end: a
  // shorter run stops where its trace stops.
  auto run_end =
      static_cast<size_t>(std::clamp<double>(run_extent / extent * width, 0.0, width - 1));
  double last = std::nan("");
  for (size_t c = 0; c <= run_end; ++c) {
    if (std::isnan(columns[c])) {
      columns[c] = last;
    } else {
      last = columns[c];
    }
  }
  return columns;
}

}  // namespace

namespace {

// Which run's mark each cell of the chart holds (-1: none); a later run
// draws over an earlier one.
std::vector<std::vector<int>> chart_grid(const std::vector<std::vector<double>>& series, int width,
                                         int height, double bottom, double top) {
  std::vector<std::vector<int>> grid(static_cast<size_t>(height),
                                     std::vector<int>(static_cast<size_t>(width), -1));
  for (size_t r = 0; r < series.size(); ++r) {
    for (int c = 0; c < width; ++c) {
      double value = series[r][static_cast<size_t>(c)];
      if (std::isnan(value)) continue;
      int row = static_cast<int>(std::lround((value - bottom) / (top - bottom) * (height - 1)));
      grid[static_cast<size_t>(height - 1 - row)][static_cast<size_t>(c)] = static_cast<int>(r);
    }
  }
  return grid;
}

// One line per run (its mark, its numbers), then each later run against the first.
std::string legend_text(const std::vector<RunTimeline>& runs, const TextChartOptions& options) {
  std::string out;
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunTimeline& run = runs[r];
    std::string mark = options.color ? fmt::format("{}{}{}", kColors[r % 6], kMarks[r % 6], kReset)
                                     : kMarks[r % 6];
    out += fmt::format(
        "  {} {}: absolute peak {}, baseline {}, peak delta {}, {} allocs, {} unmatched frees\n",
        mark, printable(run.label), format_signed_bytes(run.absolute_peak),
        format_signed_bytes(run.baseline), format_signed_bytes(run.peak_delta),
        format_count(run.alloc_count), format_count(run.unmatched_frees));
  }
  // Each later run against the first, named, so three or more runs read right.
  for (size_t r = 1; r < runs.size(); ++r) {
    out +=
        fmt::format("  {}: absolute peak {}, peak delta {}\n",
                    runs.size() == 2 ? "B - A" : printable(runs[r].label + " - " + runs[0].label),
                    format_signed_bytes(runs[r].absolute_peak - runs[0].absolute_peak),
                    format_signed_bytes(runs[r].peak_delta - runs[0].peak_delta));
  }
  return out;
}

}  // namespace

std::string render_text_chart(const std::vector<RunTimeline>& runs,
                              const TextChartOptions& options) {
  int width = std::max(options.width, 20);
  int height = std::max(options.height, 5);
  bool by_time =
      std::all_of(runs.begin(), runs.end(), [](const RunTimeline& r) { return r.has_time; });
  double extent = 0;
  for (const RunTimeline& run : runs) {
    extent =
        std::max(extent, by_time ? run.duration_s * 1e6 : static_cast<double>(run.event_count));
  }
  if (extent <= 0) extent = 1;

  std::vector<std::vector<double>> series;
  double top = 0;
  double bottom = 0;
  for (const RunTimeline& run : runs) {
    std::vector<double> columns = column_max(run, by_time, extent, width);
    double offset = options.absolute ? static_cast<double>(run.baseline) : 0.0;
    for (double& value : columns) {
      if (!std::isnan(value)) {
        value += offset;
        top = std::max(top, value);
        bottom = std::min(bottom, value);
      }
    }
    series.push_back(std::move(columns));
  }
  if (top <= bottom) top = bottom + 1;

  const std::vector<std::vector<int>> grid = chart_grid(series, width, height, bottom, top);

  std::string out = fmt::format("{} ({}), x: {}\n",
                                options.absolute ? "absolute memory" : "delta from trace start",
                                options.absolute ? "baseline + delta" : "bytes",
                                by_time ? "seconds from each trace's start" : "event index");
  constexpr int kLabelWidth = 11;
  for (int row = 0; row < height; ++row) {
    double value = top - (top - bottom) * row / (height - 1);
    std::string label = (row == 0 || row == height - 1 || row == height / 2)
                            ? format_bytes(static_cast<uint64_t>(std::max(value, 0.0)))
                            : "";
    out += fmt::format("{:>{}} ┤", label, kLabelWidth);
    for (int c = 0; c < width; ++c) {
      int run = grid[static_cast<size_t>(row)][static_cast<size_t>(c)];
      if (run < 0) {
        out += ' ';
      } else if (options.color) {
        out += fmt::format("{}{}{}", kColors[run % 6], kMarks[run % 6], kReset);
      } else {
        out += kMarks[run % 6];
      }
    }
    out += '\n';
  }
  out += fmt::format("{:>{}} └{}\n", "", kLabelWidth, [&] {
    std::string axis;
    for (int c = 0; c < width; ++c) axis += "─";
    return axis;
  }());
  std::string left = by_time ? "0 s" : "0";
  std::string right =
      by_time ? fmt::format("{:.3f} s", extent / 1e6) : format_count(static_cast<uint64_t>(extent));
  out += fmt::format("{:>{}}  {}{:>{}}\n", "", kLabelWidth, left, right,
                     width - static_cast<int>(left.size()));
  out += "\n";
  out += legend_text(runs, options);
  return out;
}

}  // namespace memsnap
