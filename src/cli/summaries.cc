#include "cli/summaries.h"

#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "cli/output.h"
#include "service/parameters.h"

namespace memsnap::cli {

void add_summary_input_flags(CLI::App& command, SummaryInputs& inputs) {
  command
      .add_option("--rank-from", inputs.rank_pattern,
                  "Regex whose first ( ) group is the rank in a file's name (default: the number "
                  "that ends it, after _ - . or 'rank': snapshot_12.pickle, rank3.pkl.gz)")
      ->option_text("REGEX");
  command
      .add_option("-j,--jobs", inputs.jobs,
                  "Files read at once (default: the core count); memory holds about this many "
                  "snapshots")
      ->check(whole_number_at_least(1))
      ->option_text("N");
}

RunInputs run_inputs(const SummaryInputs& inputs) {
  RunInputs out;
  out.device = inputs.common.device;
  out.steps = inputs.common.steps;
  out.keys = inputs.common.keys;
  out.load.allow_objects = inputs.common.allow_objects;
  out.load.max_input_bytes = inputs.common.max_input_bytes;
  out.rank_pattern = inputs.rank_pattern;
  out.jobs = inputs.jobs;
  return out;
}

RunListener stderr_listener(const CommonOptions& common) {
  RunListener listener;
  listener.spell = service::flag_of;  // max_peak -> --max-peak
  listener.note = [](const std::string& note) { write_note(note); };
  listener.parts = timing_observer(common);
  listener.trim_heap = true;
  if (!output_captured() && ::isatty(STDERR_FILENO) != 0) {
    listener.progress = [](size_t done, size_t total) {
      if (total < 2) return;
      std::fprintf(stderr, "\rmemsnap: summarised %zu of %zu files", done, total);
      if (done == total) std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    };
  }
  return listener;
}

std::vector<SummaryOutcome> summarize_all(const std::vector<std::string>& paths,
                                          const SummaryInputs& inputs) {
  return memsnap::summarize_all(paths, run_inputs(inputs), stderr_listener(inputs.common));
}

RunSummary summary_of(const std::string& path, const SummaryInputs& inputs, bool& from_summary) {
  return memsnap::summary_of(path, run_inputs(inputs), stderr_listener(inputs.common),
                             from_summary);
}

}  // namespace memsnap::cli
