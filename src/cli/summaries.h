// Run summaries for many files at once (summarize, ranks, compare of two run
// folders): folders expanded to their snapshot and summary files, each file
// loaded, summarised and dropped on a bounded pool of threads, so memory
// holds about `jobs` snapshots whatever the number of files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/run_compare.h"
#include "analysis/run_summary.h"
#include "cli/options.h"
#include "report/ranks_render.h"

namespace memsnap::cli {

struct SummaryInputs {
  CommonOptions common;
  std::string rank_pattern = kDefaultRankPattern;  // --rank-from
  int jobs = 0;                                    // -j; 0: the core count
};

// One input's outcome: its summary, or why it could not be read.
struct SummaryOutcome {
  std::string path;
  std::optional<RunSummary> summary;
  std::string error;  // set when summary is empty
  bool from_summary_file = false;
};

// --rank-from and -j, for the commands that read many files.
void add_summary_input_flags(CLI::App& command, SummaryInputs& inputs);

// Files and folders as given: a folder stands for its files that look like
// snapshots or summaries (.pickle, .pkl, .pt, each optionally .gz or .zst,
// and .summary.json), in natural name order (snapshot_2 before
// snapshot_10); a folder with none is a usage error.
std::vector<std::string> expand_inputs(const std::vector<std::string>& arguments);

// Summarises every path on `jobs` threads, in the order given. A file that
// fails is reported in its outcome and the others go on. A line of progress
// goes to stderr when it is a terminal.
std::vector<SummaryOutcome> summarize_all(const std::vector<std::string>& paths,
                                          const SummaryInputs& inputs);

// Outcomes [begin, end) sorted into the summaries read (with whether each
// came from a summary file) and the files that could not be read.
struct SummarySet {
  std::vector<RunSummary> summaries;
  std::vector<bool> from_summary_file;
  std::vector<UnreadableFile> unread;
};
SummarySet split_outcomes(std::vector<SummaryOutcome>& outcomes, size_t begin, size_t end);

// The summary of one file: a summary document read back, or a snapshot
// loaded, summarised and dropped.
RunSummary summary_of(const std::string& path, const SummaryInputs& inputs, bool& from_summary);

// "A and B both have rank N ...": two files of one run that share a rank
// (check refuses them; ranks and compare warn).
std::string duplicate_rank_message(const std::vector<RunSummary>& run,
                                   const DuplicateRank& duplicate);
// Warns (one stderr note) when two files of `run` share a rank.
void warn_duplicate_rank(const std::vector<RunSummary>& run);

}  // namespace memsnap::cli
