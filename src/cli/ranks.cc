// memsnap ranks (FILE|DIR|SUMMARY.json)...: which rank peaks highest, and why.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/reports/ranks.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "memsnap/error.h"
#include "report/ranks_render.h"
#include "runs/run_reports.h"

namespace memsnap::cli {

Command ranks_command() {
  return {"ranks",
          "Many ranks of one run: the highest peak, the spread, outliers, groups of alike "
          "ranks, and what the highest holds that the median does not",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::vector<std::string> inputs;
              SummaryInputs summary;
            };
            auto flags = std::make_shared<Flags>();
            command
                .add_option("INPUT", flags->inputs,
                            "Snapshots, summaries (memsnap summarize), or folders of either")
                ->required();
            add_json_flag(command, flags->summary.common);
            add_device_flag(command, flags->summary.common);
            add_steps_flag(command, flags->summary.common);
            add_top_flag(command, flags->summary.common, "rows per table", 20);
            add_source_key_flags(command, flags->summary.common);
            add_input_flags(command, flags->summary.common);
            add_summary_input_flags(command, flags->summary);
            return [flags] {
              const RanksRun run = ranks_of(flags->inputs, run_inputs(flags->summary),
                                            stderr_listener(flags->summary.common));
              if (flags->summary.common.json) {
                write_json(render_ranks_json(run.report, run.unread));
              } else {
                write_out(render_ranks_text(run.report, run.unread, flags->summary.common.top));
              }
              if (!run.unread.empty()) {
                throw Error(ErrorCode::kFilesUnread,
                            unread_files_message(run.unread.size(), run.files));
              }
            };
          }};
}

}  // namespace memsnap::cli
