// memsnap oom FILE: why a request failed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <climits>
#include <memory>

#include "analysis/file_analysis.h"
#include "analysis/oom_report.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/oom_render.h"

namespace memsnap::cli {

Command oom_command() {
  return {"oom",
          "Why did this run go out of memory: the request, the allocator then, what was live, "
          "a verdict",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              std::string at = "1";
              double window_s = 1.0;
              uint64_t capacity = 0;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file);
            command
                .add_option("--at", flags->at,
                            "Which oom entry of the device, counted from 1 (default 1), or "
                            "'peak': the same analysis at the run's absolute peak (a file "
                            "without an oom entry, or to see how close a run came)")
                ->check(whole_number_or_word(1, "peak"))
                ->option_text("N|peak");
            command
                .add_option("--window", flags->window_s,
                            "Seconds before the OOM whose growth is reported (default 1)")
                ->check(finite_number());
            command
                .add_option("--capacity", flags->capacity,
                            "The device's memory, e.g. 80GiB or 81559MiB (nvidia-smi's total), "
                            "to tell memory held outside PyTorch")
                ->transform(CLI::AsSizeValue(false).description(""))
                ->check(whole_number_at_least(1).description(""))
                ->option_text("SIZE");
            add_json_flag(command, flags->common);
            add_device_flag(command, flags->common);
            add_top_flag(command, flags->common, "rows per table", 10);
            add_source_key_flags(command, flags->common);
            add_input_flags(command, flags->common);
            return [flags] {
              if (!(flags->window_s > 0))
                throw Error::usage("--window must be > 0 (seconds before the OOM)");
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              FileAnalysis file = analyze(flags->file, snapshot, common);
              OomOptions options;
              options.at_peak = flags->at == "peak";
              if (!options.at_peak) {
                long long entry = 0;  // checked above: a whole number >= 1
                std::from_chars(flags->at.data(), flags->at.data() + flags->at.size(), entry);
                options.at = static_cast<int>(std::min<long long>(entry, INT_MAX));
              }
              options.window_s = flags->window_s;
              options.capacity = flags->capacity;
              options.keys = common.keys;
              OomAnalysis report = analyze_oom(file, options);
              if (common.json) {
                write_json(render_oom_json(report, common.top));
              } else {
                write_out(render_oom_text(report, common.top));
              }
            };
          }};
}

}  // namespace memsnap::cli
