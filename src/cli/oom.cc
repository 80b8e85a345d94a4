// memsnap oom FILE: why a request failed; oom DIR (or FILE...): which ranks
// ran out of memory, then the first OOM in time in full.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/oom_report.h"
#include "analysis/reports/ranks.h"
#include "analysis/reports/run_summary.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "memsnap/error.h"
#include "report/oom_render.h"

namespace memsnap::cli {
namespace {

// One file at a time (memory holds one snapshot); a file that cannot be read
// is a row that says why, and the others go on. The first OOM in time is
// analysed again, in full, at the end.
OomRanks oom_ranks(const std::vector<std::string>& paths, const OomOptions& options,
                   const CommonOptions& common) {
  OomRanks ranks;
  for (const std::string& path : paths) {
    if (path.ends_with(".json")) {
      throw Error::usage(fmt::format(
          "{}: oom reads snapshots, not summaries (a verdict needs the allocator's state)", path));
    }
  }
  std::vector<std::string> names = distinguishing_names(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    OomRankRow row;
    try {
      Snapshot snapshot = load_with_progress(path, common);
      FileAnalysis file = analyze(path, snapshot, common);
      row = oom_rank_row(file, analyze_oom(file, options));
    } catch (const Error& error) {
      if (error.kind() == Error::Kind::kUsage) throw;
      row.file = path;
      row.error = error.what();
    }
    row.rank = rank_from_name(path, kDefaultRankPattern);
    row.name = row.rank ? std::to_string(*row.rank) : names[i];
    ranks.rows.push_back(std::move(row));
  }
  ranks.first = first_oom_row(ranks.rows);
  if (ranks.first) {
    const std::string& path = ranks.rows[*ranks.first].file;
    Snapshot snapshot = load_with_progress(path, common);
    FileAnalysis file = analyze(path, snapshot, common);
    ranks.first_oom = analyze_oom(file, options);
  }
  return ranks;
}

}  // namespace

Command oom_command() {
  return {
      "oom",
      "Why did this run go out of memory: the request, the allocator then, what was live, "
      "a verdict",
      [](CLI::App& command) -> Runner {
        struct Flags {
          std::vector<std::string> files;
          std::string at = "1";
          double window_s = 1.0;
          uint64_t capacity = 0;
          CommonOptions common;
        };
        auto flags = std::make_shared<Flags>();
        add_snapshots_argument(command, flags->files,
                               "Snapshot pickle(s) (.pickle, .gz, .zst, or - for stdin); "
                               "a folder or several files: one row per rank, then the "
                               "first OOM in time in full");
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
        add_steps_flag(command, flags->common);
        add_top_flag(command, flags->common, "rows per table", 10);
        add_source_key_flags(command, flags->common);
        add_input_flags(command, flags->common);
        return [flags] {
          if (!(flags->window_s > 0))
            throw Error::usage("--window must be > 0 (seconds before the OOM)");
          const CommonOptions& common = flags->common;
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
          std::error_code error;
          if (flags->files.size() == 1 && !std::filesystem::is_directory(flags->files[0], error)) {
            const std::string& path = flags->files[0];
            Snapshot snapshot = load_with_progress(path, common);
            FileAnalysis file = analyze(path, snapshot, common);
            OomAnalysis report = analyze_oom(file, options);
            if (common.json) {
              write_json(render_oom_json(report, common.top));
            } else {
              write_out(render_oom_text(report, common.top));
            }
            return;
          }
          if (options.at_peak || options.at != 1) {
            throw Error::usage(
                "--at takes one file: with a folder or several files, oom reports each "
                "rank's first OOM");
          }
          const OomRanks ranks = oom_ranks(expand_inputs(flags->files), options, common);
          if (common.json) {
            write_json(render_oom_ranks_json(ranks, common.top));
          } else {
            write_out(render_oom_ranks_text(ranks, common.top));
          }
        };
      }};
}

}  // namespace memsnap::cli
