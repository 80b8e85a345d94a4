// The reports over many files (`ranks`, `compare RUN_A_DIR RUN_B_DIR`), for
// every front end: computed here, rendered by report/, written by the
// caller.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analysis/reports/compare.h"
#include "analysis/reports/ranks.h"
#include "analysis/reports/run_compare.h"
#include "report/ranks_render.h"
#include "report/run_compare_render.h"
#include "runs/multi_file.h"

namespace memsnap {

// "3 of 64 files could not be read (listed in the report)": what a front end
// raises after it gave the report of the files it could read.
std::string unread_files_message(size_t unread, size_t files);

// Many ranks of one run: the highest peak, the spread, outliers, groups.
struct RanksRun {
  size_t files = 0;  // inputs after folders were expanded
  RanksReport report;
  std::vector<UnreadableFile> unread;
};
RanksRun ranks_of(const std::vector<std::string>& inputs, const RunInputs& run_inputs,
                  const RunListener& listener);

// Two runs' folders, rank N against rank N; the rank that grew most compared
// in full (`drill`) when both of its files are snapshots.
struct RunFoldersComparison {
  std::string dir_a, dir_b;
  size_t files = 0;
  std::vector<RunSummary> a, b;
  RunComparison comparison;
  std::optional<CompareResult> drill;
  std::vector<UnreadableFile> unread;
  // What the renderers read; valid while this object is neither moved nor changed.
  [[nodiscard]] RunCompareView view() const;
};
RunFoldersComparison compare_run_folders(const std::string& dir_a, const std::string& dir_b,
                                         const RunInputs& inputs, std::optional<int64_t> step,
                                         const RunListener& listener);

}  // namespace memsnap
