#include "runs/run_reports.h"

#include <fmt/format.h>

#include "memsnap/load.h"

namespace memsnap {

std::string unread_files_message(size_t unread, size_t files) {
  return fmt::format("{} of {} files could not be read (listed in the report)", unread, files);
}

RanksRun ranks_of(const std::vector<std::string>& inputs, const RunInputs& run_inputs,
                  const RunListener& listener) {
  const std::vector<std::string> paths = expand_inputs(inputs);
  std::vector<SummaryOutcome> outcomes = summarize_all(paths, run_inputs, listener);
  SummarySet read = split_outcomes(outcomes, 0, outcomes.size());
  note_duplicate_rank(read.summaries, listener);
  RanksRun run;
  run.files = paths.size();
  run.report = analyze_ranks(read.summaries);
  run.unread = std::move(read.unread);
  return run;
}

RunCompareView RunFoldersComparison::view() const {
  RunCompareView out;
  out.dir_a = dir_a;
  out.dir_b = dir_b;
  out.a = &a;
  out.b = &b;
  out.comparison = &comparison;
  out.drill = drill ? &*drill : nullptr;
  out.unread = unread;
  return out;
}

RunFoldersComparison compare_run_folders(const std::string& dir_a, const std::string& dir_b,
                                         const RunInputs& inputs, std::optional<int64_t> step,
                                         const RunListener& listener) {
  std::vector<std::string> paths = expand_inputs({dir_a});
  const size_t count_a = paths.size();
  const std::vector<std::string> paths_b = expand_inputs({dir_b});
  paths.insert(paths.end(), paths_b.begin(), paths_b.end());
  std::vector<SummaryOutcome> outcomes = summarize_all(paths, inputs, listener);
  SummarySet run_a = split_outcomes(outcomes, 0, count_a);
  SummarySet run_b = split_outcomes(outcomes, count_a, outcomes.size());

  RunFoldersComparison out;
  out.dir_a = dir_a;
  out.dir_b = dir_b;
  out.files = paths.size();
  out.a = std::move(run_a.summaries);
  out.b = std::move(run_b.summaries);
  out.unread = std::move(run_a.unread);
  out.unread.insert(out.unread.end(), run_b.unread.begin(), run_b.unread.end());
  note_duplicate_rank(out.a, listener);
  note_duplicate_rank(out.b, listener);
  out.comparison = compare_runs(out.a, out.b);
  if (!out.comparison.grew_most) return out;
  const RankPair& pair = out.comparison.pairs[*out.comparison.grew_most];
  if (run_a.from_summary_file[pair.a] || run_b.from_summary_file[pair.b]) return out;
  // Both snapshots: compare that rank in full, one file after the other.
  const std::string& path_a = out.a[pair.a].path;
  const std::string& path_b = out.b[pair.b].path;
  const Snapshot snapshot_a = load_snapshot(path_a, inputs.load);
  const Snapshot snapshot_b = load_snapshot(path_b, inputs.load);
  const FileAnalysis file_a(path_a, snapshot_a, inputs.device, listener.parts, inputs.steps);
  const FileAnalysis file_b(path_b, snapshot_b, inputs.device, listener.parts, inputs.steps);
  note_device_choice(file_a, listener);
  note_device_choice(file_b, listener);
  out.drill = compare_files(file_a, file_b, step, inputs.keys);
  return out;
}

}  // namespace memsnap
