// memsnap compare A B: why does B peak higher than A.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>

#include "analysis/reports/compare.h"
#include "analysis/reports/run_compare.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "memsnap/error.h"
#include "report/compare_render.h"
#include "report/run_compare_render.h"
#include "runs/run_reports.h"

namespace memsnap::cli {

namespace {

// compare RUN_A_DIR RUN_B_DIR: every rank's summary on both sides, matched by
// rank; the rank that grew most compared in full when both are snapshots.
void compare_run_folders(const std::string& dir_a, const std::string& dir_b,
                         const SummaryInputs& inputs, std::optional<int64_t> step) {
  const CommonOptions& common = inputs.common;
  const RunFoldersComparison run =
      memsnap::compare_run_folders(dir_a, dir_b, run_inputs(inputs), step, stderr_listener(common));
  if (common.json) {
    write_json(render_run_compare_json(run.view(), common.top));
  } else {
    write_out(render_run_compare_text(run.view(), common.top));
  }
  if (!run.unread.empty())
    throw Error(ErrorCode::kFilesUnread, unread_files_message(run.unread.size(), run.files));
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
                throw Error(
                    ErrorCode::kBadParameter,
                    fmt::format(
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
              const auto sessions = open_all(flags->files, common);
              const FileAnalysis& a = analysis_of(*sessions[0], common);
              const FileAnalysis& b = analysis_of(*sessions[1], common);
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
