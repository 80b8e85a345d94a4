// memsnap replay-step FILE --step N | --all-steps: what happened in a step.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/reports/step_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/step_render.h"

namespace memsnap::cli {

Command replay_step_command() {
  return {"replay-step", "What happened in profiler step N: throughput, peaks, sources at the peak",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              std::optional<int64_t> step;
              bool all_steps = false;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file,
                                  "Snapshot file recorded with the PyTorch profiler");
            auto* step = command.add_option("--step", flags->step, "The ProfilerStep#N to replay");
            auto* all =
                command.add_flag("--all-steps", flags->all_steps, "Replay every step (one table)");
            step->excludes(all);
            add_analysis_flags(command, flags->common, 15);
            add_steps_flag(command, flags->common);
            return [flags] {
              if (!flags->step && !flags->all_steps)
                throw Error::usage("replay-step needs --step N or --all-steps");
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              FileAnalysis file = analyze(flags->file, snapshot, common);
              ReplayStepResult result = replay_steps(
                  file, flags->all_steps ? std::nullopt : flags->step, common.top, common.keys);
              if (common.json) {
                write_json(render_steps_json(result));
              } else {
                write_out(render_steps_text(result));
              }
            };
          }};
}

}  // namespace memsnap::cli
