// Results of compare, replay-to-time and replay-step: plain structs built from
// the replay engine, read by the renderers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/summary.h"
#include "analysis/trace_analysis.h"

namespace memsnap {

// One file's device, replayed once: what every report starts from.
struct FileAnalysis {
  std::string path;
  const Snapshot* snapshot = nullptr;
  int device = 0;
  DeviceTrace trace;
  SegmentTotals segments;
  Baseline baseline;
  std::vector<ProfilerStep> steps;
  TraceAnalysis analysis;

  [[nodiscard]] int64_t absolute_peak() const {
    return add_bytes(baseline.baseline_at_start, static_cast<uint64_t>(analysis.totals.peak_delta));
  }
  [[nodiscard]] int64_t step_absolute_peak(const StepStats& stats) const {
    return add_bytes(
        add_bytes(baseline.baseline_at_start, static_cast<uint64_t>(stats.start_delta)),
        static_cast<uint64_t>(stats.peak_delta));
  }
  [[nodiscard]] const StepStats* step(int64_t number) const;
  [[nodiscard]] uint64_t full_peak_position() const {
    const ReplayTotals& t = analysis.totals;
    return t.peak_event == kNoEvent ? 0 : t.peak_event + 1 - trace.begin;
  }
};

FileAnalysis analyze_file(const std::string& path, const Snapshot& snapshot,
                          std::optional<int> device);

// ---- replay-step ----
struct StepReport {
  StepStats stats;
  double duration_ms = 0;
  int64_t absolute_peak = 0;
  std::vector<SourceUsage> top_sources_at_peak;
  uint64_t sources_at_peak = 0;  // before --top
  std::map<std::string, uint64_t> annotations;
};
struct ReplayStepResult {
  std::string file;
  int device = 0;
  int64_t baseline = 0;
  std::vector<StepReport> steps;
};
// Throws Error with the DESIGN.md explanation when there are no steps, and
// with the list of steps when `step` is unknown. step == nullopt: all steps.
ReplayStepResult replay_steps(FileAnalysis& file, std::optional<int64_t> step, int top,
                              int frame_depth);

// ---- replay-to-time ----
struct TimeSide {
  std::string file;
  int device = 0;
  double time_s = 0;  // after clamping
  double trace_duration_s = 0;
  bool clamped = false;
  int64_t baseline = 0;
  int64_t delta = 0;
  int64_t absolute = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  std::vector<SourceUsage> sources;  // all, largest first
};
TimeSide replay_to_time(FileAnalysis& file, double seconds, int frame_depth);

struct SourceDiff {
  std::string source;
  uint64_t bytes_a = 0, count_a = 0, bytes_b = 0, count_b = 0;
  [[nodiscard]] int64_t delta() const {
    return static_cast<int64_t>(bytes_b) - static_cast<int64_t>(bytes_a);
  }
};
// Rows of both sides joined by source name, sorted by |B - A|.
std::vector<SourceDiff> diff_sources(const std::vector<SourceUsage>& a,
                                     const std::vector<SourceUsage>& b);

struct OnlyOnOneSide {
  uint64_t sources = 0;
  uint64_t bytes = 0;
};
constexpr uint64_t kOnlyOneSideMinBytes = uint64_t{1} << 20;
OnlyOnOneSide only_in_a(const std::vector<SourceDiff>& rows);
OnlyOnOneSide only_in_b(const std::vector<SourceDiff>& rows);

// ---- compare ----
struct StepComparison {
  int64_t step = 0;
  int64_t peak_delta_a = 0, peak_delta_b = 0;
  int64_t absolute_peak_a = 0, absolute_peak_b = 0;
  uint64_t alloc_count_a = 0, alloc_count_b = 0;
  uint64_t throughput_a = 0, throughput_b = 0;
};
struct FullTraceComparison {
  int64_t peak_delta_a = 0, peak_delta_b = 0;
  int64_t absolute_peak_a = 0, absolute_peak_b = 0;
  uint64_t throughput_a = 0, throughput_b = 0;
  uint64_t alloc_count_a = 0, alloc_count_b = 0;
  uint64_t unmatched_frees_a = 0, unmatched_frees_b = 0;
  uint64_t unmatched_free_bytes_a = 0, unmatched_free_bytes_b = 0;
};
struct SettingDiff {
  std::string key;
  nlohmann::ordered_json a, b;  // null when absent
};
struct CompareResult {
  std::string file_a, file_b;
  int device_a = 0, device_b = 0;
  std::vector<SettingDiff> config_diffs;
  bool settings_a = false, settings_b = false;
  SegmentTotals segments_a, segments_b;
  Baseline baseline_a, baseline_b;
  std::vector<int64_t> matching_steps;
  std::vector<StepComparison> step_results;
  std::vector<int64_t> steps_only_a, steps_only_b, incomplete_a, incomplete_b;
  FullTraceComparison full_trace;
  std::optional<int64_t> drill_step;           // nullopt: drill-down over the full trace
  int64_t drill_peak_a = 0, drill_peak_b = 0;  // absolute peaks of the drill-down scope
  std::vector<SourceDiff> drill_sources;       // all rows, sorted by |delta|
  OnlyOnOneSide drill_only_a, drill_only_b;
  std::vector<std::string> observations;
};
CompareResult compare_files(FileAnalysis& a, FileAnalysis& b, std::optional<int64_t> step,
                            int frame_depth);

}  // namespace memsnap
