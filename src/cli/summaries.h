// The command line's side of reading many files (summarize, ranks, check,
// compare of two run folders): the flags, and the listener that shows
// progress and notes on stderr. The work itself is runs/multi_file.h's.
#pragma once

#include <string>
#include <vector>

#include "analysis/reports/run_summary.h"
#include "cli/options.h"
#include "runs/multi_file.h"

namespace memsnap::cli {

struct SummaryInputs {
  CommonOptions common;
  std::string rank_pattern = kDefaultRankPattern;  // --rank-from
  int jobs = 0;                                    // -j; 0: the core count
};

// --rank-from and -j, for the commands that read many files.
void add_summary_input_flags(CLI::App& command, SummaryInputs& inputs);

// The flags as the reading of many files takes them.
RunInputs run_inputs(const SummaryInputs& inputs);

// Notes (device choices, ranks shared) and --timings on stderr, a line of
// progress when stderr is a terminal, and the heap trimmed after each file.
RunListener stderr_listener(const CommonOptions& common);

// runs/multi_file.h's, with the flags and stderr_listener.
std::vector<SummaryOutcome> summarize_all(const std::vector<std::string>& paths,
                                          const SummaryInputs& inputs);
RunSummary summary_of(const std::string& path, const SummaryInputs& inputs, bool& from_summary);

}  // namespace memsnap::cli
