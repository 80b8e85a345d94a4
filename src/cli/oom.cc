// memsnap oom FILE: why a request failed; oom DIR (or FILE...): which ranks
// ran out of memory, then the first OOM in time in full.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
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
#include "cli/report_command.h"
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
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format(
              "{}: oom reads snapshots, not summaries (a verdict needs the allocator's state)",
              path));
    }
  }
  std::vector<std::string> names = distinguishing_names(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    OomRankRow row;
    try {
      const auto session = open_session(path, common);
      const FileAnalysis& file = analysis_of(*session, common);
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
    const auto session = open_session(path, common);
    const FileAnalysis& file = analysis_of(*session, common);
    ranks.first_oom = analyze_oom(file, options);
  }
  return ranks;
}

}  // namespace

Command oom_command() {
  const service::ReportEntry& entry = *service::find_report("oom");
  return {
      entry.name, entry.summary,
      [&entry](CLI::App& command) -> Runner {
        struct Flags {
          std::vector<std::string> files;
          ReportFlags report;
        };
        auto flags = std::make_shared<Flags>();
        add_snapshots_argument(command, flags->files, std::string(entry.file_help));
        add_report_flags(command, entry, flags->report);
        return [flags, &entry] {
          const service::ReportRequest request = report_request(entry, flags->report);
          const CommonOptions& common = flags->report.common;
          std::error_code error;
          if (flags->files.size() == 1 && !std::filesystem::is_directory(flags->files[0], error)) {
            answer_file(entry, flags->files[0], request, common);
            return;
          }
          const OomOptions options = service::oom_options(request);
          if (options.at_peak || options.at != 1) {
            throw Error(ErrorCode::kBadParameter,
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
      },
      entry.description, entry.example};
}

}  // namespace memsnap::cli
