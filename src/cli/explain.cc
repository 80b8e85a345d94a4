// memsnap explain FILE (and a bare `memsnap FILE`): what matters in a snapshot,
// on one page, for a reader who does not know which command to run.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/reports/explain.h"
#include "analysis/core/file_analysis.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "report/explain_render.h"

namespace memsnap::cli {

Command explain_command() {
  return {
      "explain",
      "What matters in this snapshot, on one page: the device, the peak and what was live, "
      "the OOM and why, what the file lacks, what to run next (also: memsnap FILE)",
      [](CLI::App& command) -> Runner {
        struct Flags {
          std::string file;
          CommonOptions common;
        };
        auto flags = std::make_shared<Flags>();
        add_snapshot_argument(command, flags->file);
        add_json_flag(command, flags->common);
        add_device_flag(command, flags->common);
        add_steps_flag(command, flags->common);
        add_top_flag(command, flags->common, "rows per table (the rest are summed)", 5);
        add_source_key_flags(command, flags->common);
        add_input_flags(command, flags->common);
        return [flags] {
          const CommonOptions& common = flags->common;
          Snapshot snapshot = load_with_progress(flags->file, common);
          const FileAnalysis file = analyze(flags->file, snapshot, common);
          const ExplainReport report = explain_file(file, ExplainOptions{common.top, common.keys});
          if (common.json) {
            write_json(render_explain_json(report));
          } else {
            write_out(render_explain_text(report));
          }
        };
      }};
}

}  // namespace memsnap::cli
