#include "analysis/reports/run_summary.h"

#include <fmt/format.h>
#include <algorithm>

#include "analysis/core/file_analysis.h"
#include "analysis/core/steps.h"
#include "analysis/reports/parse_report.h"
#include "memsnap/error.h"
#include "util/pattern.h"
#include "util/utf8.h"

namespace memsnap {

namespace {

// A source name cut to kSummarySourceBytes, at the start of a UTF-8 character.
std::string clipped(std::string name) {
  if (name.size() <= kSummarySourceBytes) return name;
  return std::string(utf8_prefix(name, kSummarySourceBytes - 3)) + "...";
}

// Keeps the first kSummarySources rows; returns the sums over all of them.
void keep_top(std::vector<SourceUsage>& rows, uint64_t& distinct, uint64_t& bytes) {
  distinct = rows.size();
  bytes = 0;
  for (const SourceUsage& row : rows) bytes += row.bytes;
  if (rows.size() > kSummarySources) rows.resize(kSummarySources);
  for (SourceUsage& row : rows) row.source = clipped(std::move(row.source));
}

SummaryDoubts doubts_of(const ParseReport& parsed, const DecodeAnomalies& anomalies,
                        int64_t absolute_peak) {
  SummaryDoubts doubts;
  if (anomalies.malformed_segments != 0 || anomalies.malformed_blocks != 0) {
    const doubt::SkippedDump skipped{anomalies.malformed_segments, anomalies.malformed_blocks};
    doubts.reserved = doubts.fragmentation = doubts.absolute = skipped;
  }
  if (anomalies.malformed_entries != 0) {
    doubts.trace = doubt::SkippedEntries{anomalies.malformed_entries};
    if (holds(doubts.absolute)) doubts.absolute = doubts.trace;
  }
  if (parsed.baseline.baseline_at_start < 0) {
    // The replay walks back from the dump: a dump holding less than the trace
    // leaves live puts the start below zero, and every level with it.
    const doubt::DumpBelowTrace mismatch{-parsed.baseline.baseline_at_start};
    if (holds(doubts.absolute)) doubts.absolute = mismatch;
    if (holds(doubts.fragmentation)) doubts.fragmentation = mismatch;
  }
  if (holds(doubts.reserved) && parsed.reserved.start < 0) {
    doubts.reserved = doubt::TraceReleasesMore{-parsed.reserved.start};
  }
  if (holds(doubts.reserved) && holds(doubts.absolute) && absolute_peak > 0 &&
      parsed.reserved.peak < static_cast<uint64_t>(absolute_peak)) {
    doubts.reserved = doubt::ReservedBelowAbsolute{parsed.reserved.peak, absolute_peak};
  }
  return doubts;
}

}  // namespace

namespace {

// Per step: the absolute peak, from the trace analysis parse read; the
// highest kSummarySteps where there are more.
void add_summary_steps(const FileAnalysis& file, RunSummary& out) {
  const TraceAnalysis& analysis = file.trace_analysis();
  for (const StepStats& stats : analysis.steps) {
    const ProfilerStep& step = stats.step;
    out.steps.push_back(SummaryStep{
        step.number, step.complete,
        step.complete ? static_cast<double>(step.end_us - step.start_us) / 1e3 : 0.0,
        add_bytes(add_bytes(out.facts.baseline, static_cast<uint64_t>(stats.start_delta)),
                  static_cast<uint64_t>(stats.peak_delta)),
        stats.peak_delta});
  }
  out.step_count = out.steps.size();
  out.steps_origin = file.step_windows().inference();
  out.step_source = file.step_source();
  if (out.steps.empty()) out.step_marks = count_step_marks(file.snapshot(), file.trace());
  if (out.steps.size() > kSummarySteps) {
    std::stable_sort(out.steps.begin(), out.steps.end(),
                     [](const SummaryStep& a, const SummaryStep& b) {
                       return a.absolute_peak > b.absolute_peak;
                     });
    out.steps.resize(kSummarySteps);
    std::sort(out.steps.begin(), out.steps.end(),
              [](const SummaryStep& a, const SummaryStep& b) { return a.number < b.number; });
  }
}

// What was live at the peak, by source (the trace's allocations, as
// compare's drill-down counts them) and by category (every byte live then,
// memory from before the trace included, as explain and oom count it). A
// file without a trace peaks at its dump: its blocks name what was live.
void add_live_at_peak(const FileAnalysis& file, const SummaryOptions& options, RunSummary& out) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const uint64_t position = out.facts.peak_event ? *out.facts.peak_event + 1 : 0;
  SourceIndex sources(snapshot, options.keys);
  SourceKeyOptions by_category = options.keys;
  by_category.group = GroupBy::kCategory;
  SourceIndex categories(snapshot, by_category);
  if (trace.count() == 0) {
    out.live_at_peak = live_at_dump_by_source(snapshot, out.device, sources);
    out.live_at_peak_by_category = live_at_dump_by_source(snapshot, out.device, categories);
  } else {
    out.live_at_peak = live_at(snapshot, trace, sources, position).sources;
    const BaselineSources before_trace =
        baseline_sources(snapshot, file.baseline_pieces(), categories);
    out.live_at_peak_by_category =
        live_at(snapshot, trace, categories, position, &before_trace).sources;
  }
}

}  // namespace

RunSummary run_summary(const FileAnalysis& file, const SummaryOptions& options) {
  const Snapshot& snapshot = file.snapshot();
  const std::string& path = file.path();
  ParseReport parsed = parse_report(file, ParseOptions{options.keys});
  RunSummary out;
  out.path = path;
  out.size_bytes = parsed.file_size_bytes;
  out.compression = parsed.compression;
  out.rank = options.rank;
  out.device = parsed.device;
  out.devices = parsed.devices;
  out.group = parsed.group;
  out.allocator_settings = parsed.allocator_settings;
  out.segments = parsed.segments;
  out.facts = parsed.facts;
  out.throughput_sources = parsed.throughput.size();
  out.doubts = doubts_of(parsed, snapshot.anomalies, out.facts.absolute_peak);
  out.findings = parsed.warnings;
  for (const SourceThroughput& row :
       std::span(parsed.throughput).first(std::min(parsed.throughput.size(), kSummarySources))) {
    out.throughput.push_back({clipped(row.source), row.throughput_bytes, row.alloc_count});
  }
  // parse counts an OOM's entry within the device's trace, as the summary does.
  const DeviceTrace& trace = file.trace();
  for (const OomEntry& oom :
       std::span(parsed.ooms).first(std::min(parsed.ooms.size(), kSummaryOoms))) {
    out.ooms.push_back(SummaryOom{oom.event, oom.requested, oom.device_free,
                                  file.seconds_at(trace.begin + oom.event)});
  }
  out.oom_count = parsed.ooms.size();

  add_summary_steps(file, out);
  add_live_at_peak(file, options, out);
  keep_top(out.live_at_peak, out.live_at_peak_sources, out.live_at_peak_bytes);
  return out;
}

namespace {

Pattern rank_pattern(const std::string& pattern, std::string_view name) {
  Pattern regex(pattern, name);
  if (regex.capture_groups() < 1) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format("{} '{}' has no capture group: put the rank's digits in ( )", name, pattern));
  }
  return regex;
}

}  // namespace

void check_rank_pattern(const std::string& pattern, std::string_view name) {
  rank_pattern(pattern, name);
}

std::optional<int64_t> rank_from_name(const std::string& path, const std::string& pattern) {
  const Pattern regex = rank_pattern(pattern, "rank pattern");
  const size_t slash = path.find_last_of("/\\");
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::optional<std::string_view> group = regex.first_group(name);
  if (!group) return std::nullopt;
  const std::string_view digits = *group;
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(std::string(digits));
}

}  // namespace memsnap
