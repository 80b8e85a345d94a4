// Many files at once, for every front end (the command line, the Python
// package, a server): folders expanded to their snapshot and summary files,
// each file loaded, summarised and dropped on a bounded pool of threads, so
// memory holds about `jobs` snapshots whatever the number of files. Nothing
// here writes to stdout or stderr or changes process-wide state: progress and
// notes go to the caller's RunListener.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/steps.h"
#include "analysis/reports/run_compare.h"
#include "analysis/reports/run_summary.h"
#include "memsnap/load.h"
#include "report/ranks_render.h"

namespace memsnap {

// How each file of a run is read and summarised.
// How a front end spells a parameter in its messages, from its id (a
// limit's name, "max_peak", or "budget", "baseline", "rank_from"): the
// command line "--max-peak", Python "max_peak".
using SpellParameter = std::function<std::string(std::string_view id)>;

struct RunInputs {
  std::optional<int> device;             // none: each file's own choice
  StepSource steps = StepSource::kAuto;  // where steps come from
  SourceKeyOptions keys;
  LoadOptions load;
  std::string rank_pattern = kDefaultRankPattern;  // regex; its first group is the rank
  int jobs = 0;                                    // files read at once; 0: the core count
};

// What the caller hears while files are read. Every member may be empty.
// progress and note may be called from the pool's threads, one call at a
// time.
struct RunListener {
  std::function<void(size_t done, size_t total)> progress;  // after each file
  std::function<void(const std::string& note)> note;        // the device chosen, ranks shared
  SpellParameter spell;  // how notes and errors name a parameter (empty: by its id)
  PartObserver parts;    // what each analysis part took
  // glibc: give the memory a file freed back to the system after each file
  // (malloc_trim), so that a long run's footprint stays about `jobs`
  // snapshots. A process-wide act; the command line asks for it.
  bool trim_heap = false;
};

// One input's outcome: its summary, or why it could not be read.
struct SummaryOutcome {
  std::string path;
  std::optional<RunSummary> summary;
  std::string error;  // set when summary is empty
  bool from_summary_file = false;
};

// Files and folders as given: a folder stands for its files that look like
// snapshots or summaries (.pickle, .pkl, .pt, each optionally .gz or .zst,
// and .summary.json), in natural name order (snapshot_2 before
// snapshot_10); a folder with none is a usage error.
std::vector<std::string> expand_inputs(const std::vector<std::string>& arguments);

// The summary of one file: a summary document read back, or a snapshot
// loaded, summarised and dropped ("-": stdin, read whole first).
RunSummary summary_of(const std::string& path, const RunInputs& inputs, const RunListener& listener,
                      bool& from_summary);

// Summarises every path on `jobs` threads, in the order given. A file that
// fails is reported in its outcome and the others go on.
std::vector<SummaryOutcome> summarize_all(const std::vector<std::string>& paths,
                                          const RunInputs& inputs, const RunListener& listener);

// Outcomes [begin, end) sorted into the summaries read (with whether each
// came from a summary file) and the files that could not be read.
struct SummarySet {
  std::vector<RunSummary> summaries;
  std::vector<bool> from_summary_file;
  std::vector<UnreadableFile> unread;
};
SummarySet split_outcomes(std::vector<SummaryOutcome>& outcomes, size_t begin, size_t end);

// "A and B both have rank N ...": two files of one run that share a rank
// (check refuses them; ranks and compare warn).
std::string duplicate_rank_message(const std::vector<RunSummary>& run,
                                   const DuplicateRank& duplicate, const RunListener& listener);
// The listener's name for a parameter: its spell(id), or the id.
std::string spelled(const RunListener& listener, std::string_view id);
// Tells the listener (a warning) when two files of `run` share a rank.
void note_duplicate_rank(const std::vector<RunSummary>& run, const RunListener& listener);

// Tells the listener which device a file's analysis chose and why, when the
// file has others and none was asked for.
void note_device_choice(const FileAnalysis& file, const RunListener& listener);

// "stdin ('-') can be read once": refuses a list that names it twice.
void refuse_stdin_twice(const std::vector<std::string>& paths);

}  // namespace memsnap
