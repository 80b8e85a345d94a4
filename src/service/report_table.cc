#include "service/report_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "analysis/reports/explain.h"
#include "analysis/reports/oom_report.h"
#include "analysis/reports/parse_report.h"
#include "analysis/reports/segment_report.h"
#include "analysis/reports/step_report.h"
#include "analysis/reports/stream_report.h"
#include "analysis/reports/time_report.h"
#include "analysis/reports/whatif.h"
#include "memsnap/error.h"
#include "report/explain_render.h"
#include "report/oom_render.h"
#include "report/parse_render.h"
#include "report/segment_render.h"
#include "report/step_render.h"
#include "report/stream_render.h"
#include "report/time_render.h"
#include "report/whatif_render.h"

namespace memsnap::service {
namespace {

constexpr std::string_view kSnapshotHelp = "Snapshot pickle (.pickle, .gz, .zst, or - for stdin)";

// One result rendered in the format asked for, `top` rows per table: the one
// place --top cuts a report's rows.
template <typename Result>
Answer rendered(const Result& result, Format format, int top,
                std::string (*text)(const Result&, int),
                nlohmann::ordered_json (*json)(const Result&, int)) {
  Answer answer;
  if (format == Format::kJson) {
    answer.json = json(result, top);
  } else {
    answer.text = text(result, top);
  }
  return answer;
}

// ---- the entries' computations, each its analysis then its renderer -------

Answer answer_explain(const FileAnalysis& file, const ReportRequest& request, Format format) {
  return rendered(explain_file(file, ExplainOptions{request.keys}), format, request.top,
                  render_explain_text, render_explain_json);
}

Answer answer_parse(const FileAnalysis& file, const ReportRequest& request, Format format) {
  return rendered(parse_report(file, ParseOptions{request.keys}), format, request.top,
                  render_parse_text, render_parse_json);
}

const Parameter kTime{
    .id = "time",
    .kind = ParameterKind::kSeconds,
    .help = "Seconds after the first event of the device's trace",
    .value_name = "SECONDS",
    .limit_reason = "seconds from the start of the trace",
    .required = true,
};

// A time past the trace's end is clamped to it, and said so.
void note_clamped(const TimeSide& side, const ReportRequest& request, Answer& answer) {
  if (!side.clamped) return;
  answer.notes.push_back(fmt::format("{}: {} {} is past the end of the trace; clamped to {:.6f} s",
                                     side.file, spelled(kTime, request.spelling), side.requested_s,
                                     side.time_s));
}

Answer answer_time(const FileAnalysis& file, const ReportRequest& request, Format format) {
  const TimeSide side = replay_to_time(file, *request.arguments.seconds("time"), request.keys);
  Answer answer = rendered(side, format, request.top, render_time_text, render_time_json);
  note_clamped(side, request, answer);
  return answer;
}

Answer answer_time_pair(const FileAnalysis& a, const FileAnalysis& b, const ReportRequest& request,
                        Format format) {
  const double seconds = *request.arguments.seconds("time");
  TimeSide side_a = replay_to_time(a, seconds, request.keys);
  TimeSide side_b = replay_to_time(b, seconds, request.keys);
  Answer notes;
  note_clamped(side_a, request, notes);
  note_clamped(side_b, request, notes);
  Answer answer = rendered(compare_at_time(std::move(side_a), std::move(side_b)), format,
                           request.top, render_time_pair_text, render_time_pair_json);
  answer.notes = std::move(notes.notes);
  return answer;
}

const Parameter kStep{
    .id = "step",
    .kind = ParameterKind::kWhole,
    .help = "The step to replay (ProfilerStep#N, or an inferred iteration's number)",
    .value_name = "N",
};
const Parameter kAllSteps{
    .id = "all_steps",
    .kind = ParameterKind::kSwitch,
    .help = "Replay every step (one table)",
};

void one_step_or_all(const Arguments& arguments, Spelling spelling) {
  const bool step = arguments.has("step");
  const bool all = arguments.on("all_steps");
  if (step && all) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("{} and {} exclude each other", spelled(kStep, spelling),
                            spelled(kAllSteps, spelling)));
  }
  if (!step && !all) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("replay-step needs {} N or {}", spelled(kStep, spelling),
                            spelled(kAllSteps, spelling)));
  }
}

Answer answer_steps(const FileAnalysis& file, const ReportRequest& request, Format format) {
  const std::optional<int64_t> step =
      request.arguments.on("all_steps") ? std::nullopt : request.arguments.whole("step");
  return rendered(replay_steps(file, step, request.keys), format, request.top, render_steps_text,
                  render_steps_json);
}

const Parameter kAt{
    .id = "at",
    .kind = ParameterKind::kWholeOrWord,
    .help =
        "Which oom entry of the device, counted from 1 (default 1), or 'peak': the same "
        "analysis at the run's absolute peak (a file without an oom entry, or to see how "
        "close a run came)",
    .value_name = "N|peak",
    .minimum = 1,
    .word = "peak",
};

// An oom entry past the device's last: said with the parameter's name (the
// analysis refuses it too, in words of its own).
void check_oom_entry(const FileAnalysis& file, const ReportRequest& request) {
  const OomOptions options = oom_options(request);
  if (options.at_peak || options.at <= 1) return;  // the first exists wherever any does
  // The analysis replays the allocator too: let it run beside the trace's.
  file.start_allocator_history();
  const size_t count = file.trace_analysis().counts.oom_events.size();
  if (count == 0 || static_cast<uint64_t>(options.at) <= count) return;
  throw Error(
      ErrorCode::kBadParameter,
      fmt::format("{} {}: device {} has {} oom entr{} (1-{})", spelled(kAt, request.spelling),
                  options.at, file.device(), count, count == 1 ? "y" : "ies", count));
}

Answer answer_oom(const FileAnalysis& file, const ReportRequest& request, Format format) {
  check_oom_entry(file, request);
  return rendered(analyze_oom(file, oom_options(request)), format, request.top, render_oom_text,
                  render_oom_json);
}

Answer answer_segments(const FileAnalysis& file, const ReportRequest& request, Format format) {
  return rendered(segments_report(file, request.arguments.seconds("time")), format, request.top,
                  render_segments_text, render_segments_json);
}

Answer answer_streams(const FileAnalysis& file, const ReportRequest& request, Format format) {
  return rendered(stream_report(file), format, request.top, render_streams_text,
                  render_streams_json);
}

const Parameter kCheck{
    .id = "check",
    .kind = ParameterKind::kSwitch,
    .help =
        "Run the model under the file's own settings and compare it with what the file "
        "recorded: segments reserved and released at the same entries, each block where "
        "the file placed it, the dump's segments and blocks at the end",
};

const Parameter kWhatIfCapacity{
    .id = "capacity",
    .kind = ParameterKind::kSize,
    .help =
        "What cudaMalloc can reserve in all, such as 80GiB (default: the first oom entry's "
        "free device memory plus what the file had reserved then; without an oom entry, "
        "none: no out-of-memory verdicts, each setting says the capacity it needs)",
    .value_name = "SIZE",
    .minimum = 1,
};

const Parameter kWhatIfSet{
    .id = "set",
    .kind = ParameterKind::kText,
    .help =
        "A configuration to try against the file's own, in PYTORCH_CUDA_ALLOC_CONF's words "
        "(expandable_segments:True,max_split_size_mb:128; also "
        "garbage_collection_threshold, roundup_power2_divisions), with reserved memory over "
        "the trace for both in --json",
    .value_name = "CONF",
};

Answer answer_whatif(const FileAnalysis& file, const ReportRequest& request, Format format) {
  file.start_allocator_history();
  if (request.arguments.on("check")) {
    if (request.arguments.has("capacity") || request.arguments.has("set")) {
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format(
              "{} runs under the file's own settings without a capacity; {} and {} go with the "
              "table of settings",
              spelled(kCheck, request.spelling), spelled(kWhatIfCapacity, request.spelling),
              spelled(kWhatIfSet, request.spelling)));
    }
    return rendered(check_recorded_segments(file), format, request.top, render_whatif_check_text,
                    render_whatif_check_json);
  }
  const uint64_t capacity = request.arguments.bytes("capacity");  // 0: not given
  return rendered(what_if(file, capacity > 0 ? std::optional<uint64_t>(capacity) : std::nullopt,
                          request.arguments.text("set")),
                  format, request.top, render_whatif_text, render_whatif_json);
}

// ---- the table ---------------------------------------------------------------

ReportEntry explain_entry() {
  return {
      .name = "explain",
      .summary =
          "What matters in this snapshot, on one page: the device, the peak and what was "
          "live, the OOM and why, what the file lacks, what to run next (also: memsnap "
          "FILE)",
      .description =
          "Start here with a file you do not know: one page with the device, the "
          "peak and what was live at it (by category and by source), the first OOM "
          "and its verdict, what the file lacks (stacks, times, a trace) and the "
          "commands worth running next.",
      .example = "memsnap explain rank0.pickle",
      .file_help = kSnapshotHelp,
      .default_top = 5,
      .top_rows = "rows per table (the rest are summed)",
      .schema = "explain",
      .answer = answer_explain,
  };
}

ReportEntry parse_entry() {
  return {
      .name = "parse",
      .summary = "What is in this file: settings, segments, baseline, steps, events, top sources",
      .description =
          "Everything the file holds, counted: the allocator's settings, its segments "
          "at the dump, the memory from before the trace, the trace's peak and "
          "actions, its steps, whose stacks its frees carry, and the sources that "
          "allocated most at the peak.",
      .example = "memsnap parse rank0.pickle --json",
      .file_help = kSnapshotHelp,
      .default_top = 15,
      .top_rows = "sources",
      .schema = "parse",
      .answer = answer_parse,
  };
}

ReportEntry replay_to_time_entry() {
  return {
      .name = "replay-to-time",
      .summary = "What was live T seconds after the trace start (one file, or A vs B)",
      .description =
          "The trace replayed up to T seconds after its first entry: what was live "
          "then, by source, with memory from before the trace. With a second file, "
          "both at the same T, sorted by the difference.",
      .example = "memsnap replay-to-time run.pickle --time 12.5",
      .file_help = "Snapshot file (A when a second is given)",
      .parameters = {kTime},
      .default_top = 25,
      .top_rows = "source rows",
      .uses_steps = false,
      .schema = "replay_to_time",
      .answer = answer_time,
      .answer_pair = answer_time_pair,
  };
}

ReportEntry replay_step_entry() {
  return {
      .name = "replay-step",
      .summary = "What happened in profiler step N: throughput, peaks, sources at the peak",
      .description =
          "One step (or every step): how long it took, its peak above the memory it "
          "started with, allocations and frees, and the sources live at its peak. "
          "Steps come from ProfilerStep marks, else from the optimizer's "
          "iterations (--steps).",
      .example = "memsnap replay-step run.pickle --all-steps",
      .file_help = "Snapshot file recorded with the PyTorch profiler",
      .parameters = {kStep, kAllSteps},
      .default_top = 15,
      .top_rows = "source rows",
      .schema = "replay_step",
      .check_together = one_step_or_all,
      .answer = answer_steps,
  };
}

ReportEntry oom_entry() {
  return {
      .name = "oom",
      .summary =
          "Why did this run go out of memory: the request, the allocator then, what was "
          "live, a verdict",
      .description =
          "The failed request, the allocator's state at that moment (reserved, free, "
          "the largest block it could have used), what was live by source and "
          "category, what grew just before, and a verdict: capacity, fragmentation, "
          "a private pool, memory held outside PyTorch, or a spike.",
      .example = "memsnap oom oom_rank3.pickle --capacity 80GiB",
      .file_help =
          "Snapshot pickle(s) (.pickle, .gz, .zst, or - for stdin); a folder or "
          "several files: one row per rank, then the first OOM in time in full",
      .parameters = {kAt,
                     {.id = "window",
                      .kind = ParameterKind::kSeconds,
                      .help = "Seconds before the OOM whose growth is reported (default 1)",
                      .value_name = "SECONDS",
                      .above_minimum = true,
                      .limit_reason = "seconds before the OOM"},
                     {.id = "capacity",
                      .kind = ParameterKind::kSize,
                      .help = "The device's memory, e.g. 80GiB or 81559MiB (nvidia-smi's total), "
                              "to tell memory held outside PyTorch",
                      .value_name = "SIZE"}},
      .default_top = 10,
      .top_rows = "rows per table",
      .schema = "oom",
      .answer = answer_oom,
  };
}

ReportEntry segments_entry() {
  return {
      .name = "segments",
      .summary =
          "What the allocator held at the dump (or at --time T): segments, blocks, free "
          "space, pools, streams",
      .description =
          "The caching allocator's segments and their blocks at the dump, or T "
          "seconds into the trace (replayed from the dump): reserved, allocated, "
          "free inside segments (external fragmentation) and lost to rounding "
          "(internal), by pool and stream, with a fill map per segment.",
      .example = "memsnap segments run.pickle --time 12.5",
      .file_help = kSnapshotHelp,
      .parameters = {{.id = "time",
                      .kind = ParameterKind::kSeconds,
                      .help = "Seconds after the device's first trace entry: the state then, "
                              "replayed from the dump through the trace (default: at the dump)",
                      .value_name = "SECONDS",
                      .limit_reason = "seconds from the start of the trace"}},
      .default_top = 15,
      .top_rows = "segments",
      .uses_keys = false,
      .uses_steps = false,
      .schema = "segments",
      .answer = answer_segments,
  };
}

ReportEntry streams_entry() {
  return {
      .name = "streams",
      .summary =
          "Memory by CUDA stream: what the allocator kept for each at the dump, what the "
          "trace allocated on each and its peak",
      .description =
          "The caching allocator keeps each stream's free blocks for that stream: "
          "memory spread over many streams (NCCL, side streams, data loading) is "
          "memory the others cannot use. Per stream: segments and bytes at the dump, "
          "and the trace's allocations on it with the highest they reached together.",
      .example = "memsnap streams rank0.pickle",
      .file_help = kSnapshotHelp,
      .default_top = 10,
      .top_rows = "streams",
      .uses_keys = false,
      .uses_steps = false,
      .schema = "streams",
      .answer = answer_streams,
  };
}

ReportEntry whatif_entry() {
  return {
      .name = "whatif",
      .summary =
          "What other allocator settings (expandable_segments, max_split_size_mb, ...) would "
          "have done with this trace, by a model of PyTorch's caching allocator",
      .description =
          "The trace's requests and frees through a model of PyTorch's CUDA caching "
          "allocator (rounding, small and large pools, best fit per stream, splitting and "
          "merging, max_split_size, expandable segments, releases before a retried "
          "cudaMalloc), from the allocator's state before the first entry (or, where the "
          "trace has no segment entry, from an empty allocator serving the blocks live then), "
          "within the device's capacity. For the settings people try (the file's own, expandable "
          "segments, max_split_size_mb at the trace's large request sizes, "
          "garbage_collection_threshold, roundup_power2_divisions): peak reserved, reserved at "
          "the OOM, free memory at the peak, cudaMalloc and cudaFree calls, whether each OOM "
          "request would have fit (without a capacity: the capacity each needs); the floor no "
          "setting beats, and the capacity the run needs. "
          "--check runs the model under the file's own settings and says how much of what the "
          "file recorded it reproduces.",
      .example = "memsnap whatif oom.pickle --capacity 80GiB",
      .file_help = kSnapshotHelp,
      .parameters = {kCheck, kWhatIfCapacity, kWhatIfSet},
      .default_top = 10,
      .top_rows = "settings (the file's own first)",
      .uses_keys = false,
      .uses_steps = false,
      .schema = "whatif",  // --check: whatif_check
      .answer = answer_whatif,
  };
}

std::vector<ReportEntry> make_table() {
  return {explain_entry(), parse_entry(),    replay_to_time_entry(), replay_step_entry(),
          oom_entry(),     segments_entry(), streams_entry(),        whatif_entry()};
}

}  // namespace

OomOptions oom_options(const ReportRequest& request) {
  OomOptions options;
  const Arguments& arguments = request.arguments;
  options.at_peak = arguments.word("at") == "peak";
  options.at = static_cast<int>(std::min<int64_t>(arguments.whole("at").value_or(1), INT_MAX));
  options.window_s = arguments.seconds("window").value_or(1.0);
  options.capacity = arguments.bytes("capacity");
  options.keys = request.keys;
  return options;
}

const std::vector<ReportEntry>& report_table() {
  static const std::vector<ReportEntry> table = make_table();
  return table;
}

const ReportEntry* find_report(std::string_view name) {
  for (const ReportEntry& entry : report_table()) {
    if (entry.name == name) return &entry;
    std::string keyword(entry.name);
    std::replace(keyword.begin(), keyword.end(), '-', '_');
    if (keyword == name) return &entry;
  }
  return nullptr;
}

const Parameter& top_parameter() {
  static const Parameter top{
      .id = "top",
      .kind = ParameterKind::kWhole,
      .help = "Rows to show",
      .value_name = "N",
  };
  return top;
}

const Parameter* find_parameter(const ReportEntry& entry, std::string_view id) {
  if (id == top_parameter().id) return &top_parameter();
  for (const Parameter& parameter : entry.parameters) {
    if (parameter.id == id) return &parameter;
  }
  return nullptr;
}

ReportRequest request_for(const ReportEntry& entry,
                          const std::vector<std::pair<std::string, Value>>& given,
                          SourceKeyOptions keys, Spelling spelling) {
  std::vector<Parameter> parameters = entry.parameters;
  parameters.push_back(top_parameter());
  ReportRequest request;
  request.arguments = checked(parameters, given, spelling);
  request.top = static_cast<int>(
      std::min<int64_t>(request.arguments.whole("top").value_or(entry.default_top), INT_MAX));
  request.keys = std::move(keys);
  request.spelling = spelling;
  if (entry.check_together != nullptr) entry.check_together(request.arguments, spelling);
  return request;
}

}  // namespace memsnap::service
