// memsnap compare A B: why does B peak higher than A.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/compare.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "report/compare_render.h"

namespace memsnap::cli {

Command compare_command() {
  return {"compare",
          "Why does B peak higher than A: settings, segments, steps, sources at the peak",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::vector<std::string> files{2};
              std::optional<int64_t> step;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            command.add_option("A", flags->files[0], "Snapshot before (the baseline)")->required();
            command.add_option("B", flags->files[1], "Snapshot after; every difference is B - A")
                ->required();
            command.add_option("--step", flags->step,
                               "Drill into this step (default: the step whose absolute peaks "
                               "differ most, else the full trace)");
            add_analysis_flags(command, flags->common, 15);
            return [flags] {
              const CommonOptions& common = flags->common;
              std::vector<Snapshot> snapshots = load_all(flags->files, common);
              FileAnalysis a = analyze_file(flags->files[0], snapshots[0], common.device);
              FileAnalysis b = analyze_file(flags->files[1], snapshots[1], common.device);
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
