// memsnap plot FILE...: memory over time, one run or several overlaid.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "analysis/reports/timeline.h"
#include "analysis/reports/whatif.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "memsnap/error.h"
#include "report/format.h"
#include "report/html_plot.h"
#include "report/text_chart.h"

namespace memsnap::cli {
namespace {

struct PlotFlags {
  std::vector<std::string> files;
  std::vector<std::string> labels;
  std::string output = "memsnap_timeline.html";
  double precision_ms = 1.0;
  uint64_t max_lifetimes = kDefaultMaxLifetimes;
  uint64_t max_entries = kDefaultMaxEntries;
  std::optional<std::string> whatif;  // PYTORCH_CUDA_ALLOC_CONF's text
  bool text = false;
  bool delta = false;
  int width = 100;
  int height = 20;
  CommonOptions common;
};

// Why a run that asked for the allocator model's line has none on the page.
void note_missing_whatif_line(const RunTimeline& run) {
  if (!run.whatif) return;
  if (!run.whatif->possible) {
    write_note(fmt::format("{}: no simulated reserved line: {}", run.label,
                           run.whatif->impossible_reason));
  }
}

void run_plot(const PlotFlags& flags) {
  // Folders stand for their snapshot files (one line each, in natural name order).
  const std::vector<std::string> files = expand_inputs(flags.files);
  if (!flags.labels.empty() && flags.labels.size() != files.size()) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("--labels has {} labels for {} files; give one label per file",
                            flags.labels.size(), files.size()));
  }
  if (!(flags.precision_ms > 0))
    throw Error(ErrorCode::kBadParameter, "--precision must be a positive number of milliseconds");
  if (flags.text &&
      (flags.width < 20 || flags.width > 1000 || flags.height < 5 || flags.height > 500)) {
    throw Error(ErrorCode::kBadParameter,
                "--width must be 20 to 1000 columns and --height 5 to 500 rows");
  }
  if (flags.whatif) {
    if (flags.text) {
      throw Error(
          ErrorCode::kBadParameter,
          "--whatif draws on the HTML page, beside the reserved line; --text draws no reserved "
          "memory (use memsnap whatif FILE --set CONF for the numbers)");
    }
    settings_of_conf(*flags.whatif, SplitRule{});  // a text the model does not read: refused first
  }
  if (!flags.text) refuse_overwriting_inputs(flags.output, files);
  if (!flags.text && !html_plot_available()) {
    throw Error(
        ErrorCode::kUnavailable,
        "this memsnap was built without the HTML plot (MEMSNAP_HTML_PLOT=OFF); use plot --text");
  }
  const CommonOptions& common = flags.common;
  const auto sessions = open_all(files, common);
  std::vector<RunTimeline> runs;
  for (size_t i = 0; i < files.size(); ++i) {
    const FileAnalysis& file = analysis_of(*sessions[i], common);
    std::string label = flags.labels.empty() ? default_label(files[i]) : flags.labels[i];
    runs.push_back(plot_run(file, label, flags.precision_ms, common.keys, flags.max_lifetimes,
                            !flags.text, PagePlace{i, files.size(), flags.max_entries},
                            flags.whatif));
    note_missing_whatif_line(runs.back());
  }
  if (flags.text) {
    TextChartOptions options;
    options.width = flags.width;
    options.height = flags.height;
    options.absolute = !flags.delta;
    options.color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
    write_out(render_text_chart(runs, options));
    return;
  }
  std::string page = render_plot_html(runs, flags.precision_ms);
  write_file(flags.output, page);
  write_note(fmt::format("wrote {} ({}, {} run{})", flags.output, format_bytes(page.size()),
                         runs.size(), runs.size() == 1 ? "" : "s"));
}

}  // namespace

Command plot_command() {
  return {
      "plot", "Memory over time, one run or several overlaid: one offline HTML file (or --text)",
      [](CLI::App& command) -> Runner {
        auto flags = std::make_shared<PlotFlags>();
        add_snapshots_argument(
            command, flags->files,
            "Snapshot files or folders of them; each file becomes one line on the same axis");
        command.add_option("--labels", flags->labels, "One label per file (default: file names)")
            ->expected(1, -1);
        command.add_option("-o,--output", flags->output,
                           "HTML file to write (default memsnap_timeline.html)");
        command
            .add_option("--precision", flags->precision_ms,
                        "Finest time bucket of the wall-clock view, in ms (default 1.0); "
                        "the page can coarsen it")
            ->check(finite_number());
        command.add_option(
            "--max-lifetimes", flags->max_lifetimes,
            "Allocations a run may embed one by one, for clicks at any time (default 500000, "
            "~16 MiB of page); a run with more embeds what was live by source at up to 2,048 "
            "evenly spaced moments instead, and a click snaps to the nearest one (the page "
            "says which). Keeps the page's size bounded whatever the length of the trace");
        command
            .add_option("--max-entries", flags->max_entries,
                        "Allocations the page's allocation view draws one by one per run, the "
                        "largest visible over the whole trace (default 15000, as memory_viz; at "
                        "most 15000; 0: no allocation view); the rest is one band, exact")
            ->check(CLI::Range(uint64_t{0}, uint64_t{kMaxLayoutBudget}));
        command
            .add_option(
                "--whatif", flags->whatif,
                "Also draw reserved memory as the allocator model has it under these settings, "
                "in PYTORCH_CUDA_ALLOC_CONF's words "
                "(expandable_segments:True,max_split_size_mb:128; "
                "as memsnap whatif --set), beside the reserved line the file recorded")
            ->type_name("CONF");
        command.add_flag("--text", flags->text,
                         "Draw the overlay in the terminal instead of writing HTML");
        command.add_flag("--delta", flags->delta,
                         "--text: plot the delta from the trace start, not baseline + delta");
        command.add_option("--width", flags->width, "--text: chart columns (default 100)");
        command.add_option("--height", flags->height, "--text: chart rows (default 20)");
        add_source_key_flags(command, flags->common);
        add_device_flag(command, flags->common);
        add_steps_flag(command, flags->common);
        add_input_flags(command, flags->common);
        return [flags] { run_plot(*flags); };
      }};
}

}  // namespace memsnap::cli
