// memsnap compare A B: why does B peak higher than A.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>

#include "analysis/compare.h"
#include "analysis/run_compare.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "memsnap/error.h"
#include "report/compare_render.h"
#include "report/run_compare_render.h"

namespace memsnap::cli {

namespace {

// compare RUN_A_DIR RUN_B_DIR: every rank's summary on both sides, matched by
// rank; the rank that grew most compared in full when both are snapshots.
void compare_run_folders(const std::string& dir_a, const std::string& dir_b,
                         const SummaryInputs& inputs, std::optional<int64_t> step) {
  const CommonOptions& common = inputs.common;
  std::vector<std::string> paths = expand_inputs({dir_a});
  const size_t count_a = paths.size();
  const std::vector<std::string> paths_b = expand_inputs({dir_b});
  paths.insert(paths.end(), paths_b.begin(), paths_b.end());
  std::vector<SummaryOutcome> outcomes = summarize_all(paths, inputs);
  SummarySet run_a = split_outcomes(outcomes, 0, count_a);
  SummarySet run_b = split_outcomes(outcomes, count_a, outcomes.size());
  const std::vector<RunSummary>& a = run_a.summaries;
  const std::vector<RunSummary>& b = run_b.summaries;
  const std::vector<bool>& from_summary_a = run_a.from_summary_file;
  const std::vector<bool>& from_summary_b = run_b.from_summary_file;
  RunCompareView view;
  view.dir_a = dir_a;
  view.dir_b = dir_b;
  view.unread = std::move(run_a.unread);
  view.unread.insert(view.unread.end(), run_b.unread.begin(), run_b.unread.end());
  warn_duplicate_rank(a);
  warn_duplicate_rank(b);
  const RunComparison comparison = compare_runs(a, b);
  view.a = &a;
  view.b = &b;
  view.comparison = &comparison;
  std::optional<CompareResult> drill;
  if (comparison.grew_most) {
    const RankPair& pair = comparison.pairs[*comparison.grew_most];
    if (!from_summary_a[pair.a] && !from_summary_b[pair.b]) {
      const std::vector<std::string> files{a[pair.a].path, b[pair.b].path};
      std::vector<Snapshot> snapshots = load_all(files, common);
      FileAnalysis file_a = analyze(files[0], snapshots[0], common);
      FileAnalysis file_b = analyze(files[1], snapshots[1], common);
      drill = compare_files(file_a, file_b, step, common.keys);
      view.drill = &*drill;
    }
  }
  if (common.json) {
    write_json(render_run_compare_json(view, common.top));
  } else {
    write_out(render_run_compare_text(view, common.top));
  }
  if (!view.unread.empty()) {
    throw Error(fmt::format("{} of {} files could not be read (listed in the report)",
                            view.unread.size(), paths.size()));
  }
}

}  // namespace

Command compare_command() {
  return {"compare",
          "Why does B peak higher than A: settings, segments, steps, sources at the peak",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::vector<std::string> files{2};
              std::optional<int64_t> step;
              CommonOptions common;
              SummaryInputs folders;
            };
            auto flags = std::make_shared<Flags>();
            command
                .add_option("A", flags->files[0],
                            "Snapshot before (the baseline), or a folder of one run's rank files")
                ->required();
            command
                .add_option("B", flags->files[1],
                            "Snapshot after, or a folder of the other run's rank files (rank N "
                            "against rank N); every difference is B - A")
                ->required();
            command.add_option("--step", flags->step,
                               "Drill into this step (default: the step whose absolute peaks "
                               "differ most, else the full trace)");
            add_analysis_flags(command, flags->common, 15);
            add_steps_flag(command, flags->common);
            add_summary_input_flags(command, flags->folders);
            return [flags] {
              const CommonOptions& common = flags->common;
              std::error_code error;
              const bool folder_a = std::filesystem::is_directory(flags->files[0], error);
              const bool folder_b = std::filesystem::is_directory(flags->files[1], error);
              if (folder_a != folder_b) {
                throw Error::usage(fmt::format(
                    "{} is a folder and {} is not: compare two snapshots, or two folders of "
                    "rank files",
                    folder_a ? flags->files[0] : flags->files[1],
                    folder_a ? flags->files[1] : flags->files[0]));
              }
              if (folder_a) {
                SummaryInputs inputs = flags->folders;
                inputs.common = common;
                compare_run_folders(flags->files[0], flags->files[1], inputs, flags->step);
                return;
              }
              std::vector<Snapshot> snapshots = load_all(flags->files, common);
              FileAnalysis a = analyze(flags->files[0], snapshots[0], common);
              FileAnalysis b = analyze(flags->files[1], snapshots[1], common);
              CompareResult result = compare_files(a, b, flags->step, common.keys);
              if (common.json) {
                write_json(render_compare_json(result, common.top));
              } else {
                write_out(render_compare_text(result, common.top));
              }
            };
          }};
}

}  // namespace memsnap::cli
