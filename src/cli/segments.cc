// memsnap segments FILE [--time T]: what the allocator held at the dump, or at T.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/segment_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/segment_render.h"

namespace memsnap::cli {

Command segments_command() {
  return {"segments",
          "What the allocator held at the dump (or at --time T): segments, blocks, free space, "
          "pools, streams",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              std::optional<double> seconds;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file);
            command
                .add_option("--time", flags->seconds,
                            "Seconds after the device's first trace entry: the state then, "
                            "replayed from the dump through the trace (default: at the dump)")
                ->check(finite_number());
            add_json_flag(command, flags->common);
            add_device_flag(command, flags->common);
            add_top_flag(command, flags->common, "segments", 15);
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              if (flags->seconds && !(*flags->seconds >= 0))
                throw Error::usage("--time must be >= 0 (seconds from the start of the trace)");
              const FileAnalysis file = analyze(flags->file, snapshot, common);
              const SegmentReport report = segments_report(file, flags->seconds);
              if (common.json) {
                write_json(render_segments_json(report, common.top));
              } else {
                write_out(render_segments_text(report, common.top));
              }
            };
          }};
}

}  // namespace memsnap::cli
