// memsnap replay-to-time FILE [FILE] --time T: what was live at second T.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "analysis/reports/time_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/time_render.h"

namespace memsnap::cli {

Command replay_to_time_command() {
  return {"replay-to-time", "What was live T seconds after the trace start (one file, or A vs B)",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              std::string other;
              double seconds = 0;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file, "Snapshot file (A when a second is given)");
            command.add_option("B", flags->other,
                               "A second snapshot: both side by side, sorted by |B - A|");
            command
                .add_option("--time", flags->seconds,
                            "Seconds after the first event of the device's trace")
                ->required()
                ->check(finite_number());
            add_analysis_flags(command, flags->common, 25);
            return [flags] {
              if (!(flags->seconds >= 0))
                throw Error::usage("--time must be >= 0 (seconds from the start of the trace)");
              const CommonOptions& common = flags->common;
              std::vector<std::string> files{flags->file};
              if (!flags->other.empty()) files.push_back(flags->other);
              std::vector<Snapshot> snapshots = load_all(files, common);
              std::vector<TimeSide> sides;
              for (size_t i = 0; i < files.size(); ++i) {
                FileAnalysis file = analyze(files[i], snapshots[i], common);
                sides.push_back(replay_to_time(file, flags->seconds, common.keys));
              }
              for (const TimeSide& side : sides) {
                if (side.clamped) {
                  write_note(fmt::format(
                      "note: {}: --time {} is past the end of the trace; clamped to {:.6f} s",
                      side.file, side.requested_s, side.time_s));
                }
              }
              if (sides.size() == 1) {
                if (common.json) {
                  write_json(render_time_json(sides[0], common.top));
                } else {
                  write_out(render_time_text(sides[0], common.top));
                }
                return;
              }
              TimePair pair = compare_at_time(std::move(sides[0]), std::move(sides[1]));
              if (common.json) {
                write_json(render_time_pair_json(pair, common.top));
              } else {
                write_out(render_time_pair_text(pair, common.top));
              }
            };
          }};
}

}  // namespace memsnap::cli
