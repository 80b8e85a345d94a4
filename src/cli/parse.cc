// memsnap parse FILE: what is in this file.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/parse_summary.h"
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
            command
                .add_option("FILE", flags->file,
                            "Snapshot pickle (.pickle, .gz, .zst, or - for stdin)")
                ->required();
            add_json_flag(command, flags->common);
            add_device_flag(command, flags->common);
            add_top_flag(command, flags->common, "sources", 15);
            add_source_key_flags(command, flags->common);
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              ParseResult result = summarize(snapshot, flags->file,
                                             ParseOptions{common.device, common.top, common.keys});
              if (common.json) {
                write_json(render_parse_json(result));
              } else {
                write_out(render_parse_text(result));
              }
            };
          }};
}

}  // namespace memsnap::cli
