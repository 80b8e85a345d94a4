// memsnap segments FILE: what the allocator held at the dump.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/file_analysis.h"
#include "analysis/segment_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "report/segment_render.h"

namespace memsnap::cli {

Command segments_command() {
  return {"segments",
          "What the allocator held at the dump: segments, blocks, free space, pools, streams",
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
            add_top_flag(command, flags->common, "segments", 15);
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              SegmentReport report =
                  segments_at_dump(flags->file, snapshot, choose_device(snapshot, common.device));
              if (common.json) {
                write_json(render_segments_json(report, common.top));
              } else {
                write_out(render_segments_text(report, common.top));
              }
            };
          }};
}

}  // namespace memsnap::cli
