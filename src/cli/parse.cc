// memsnap parse FILE: what is in this file.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/reports/parse_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "report/parse_render.h"

namespace memsnap::cli {

Command parse_command() {
  return {"parse", "What is in this file: settings, segments, baseline, steps, events, top sources",
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
            add_top_flag(command, flags->common, "sources", 15);
            add_source_key_flags(command, flags->common);
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              const FileAnalysis file = analyze(flags->file, snapshot, common);
              ParseReport result = parse_report(file, ParseOptions{common.top, common.keys});
              if (common.json) {
                write_json(render_parse_json(result));
              } else {
                write_out(render_parse_text(result));
              }
            };
          }};
}

}  // namespace memsnap::cli
