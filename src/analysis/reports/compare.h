// compare: why does B peak higher than A. Deltas are always B - A.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/file_analysis.h"
#include "analysis/core/findings.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"

namespace memsnap {

enum class PeakPhase : uint8_t {
  kForward,        // an activation: inside a module's forward
  kBackward,       // a gradient or a backward node's output
  kOptimizerStep,  // optimizer state or the step's temporaries
  kDataLoading,    // an input
  kOther,          // parameters, communication, workspace, temporaries
  kUnknown,        // no rule names the allocation
};

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
// One allocator setting that differs.
struct SettingDiff {
  std::string key;
  nlohmann::ordered_json a, b;  // null when absent
};
struct CompareResult {
  GroupBy group = GroupBy::kSource;  // what the source rows stand for
  std::string file_a, file_b;
  int device_a = 0, device_b = 0;
  bool device_requested = false;  // --device given: printed command lines repeat it
  std::vector<SettingDiff> config_diffs;
  bool settings_a = false, settings_b = false;
  SegmentTotals segments_a, segments_b;
  ReservedHistory reserved_a, reserved_b;
  FragmentationHistory fragmentation_a, fragmentation_b;
  Baseline baseline_a, baseline_b;
  StepsInference steps_origin_a, steps_origin_b;
  std::vector<int64_t> matching_steps;
  std::vector<StepComparison> step_results;
  std::vector<int64_t> steps_only_a, steps_only_b, incomplete_a, incomplete_b;
  FullTraceComparison full_trace;
  std::optional<int64_t> drill_step;           // nullopt: drill-down over the full trace
  int64_t drill_peak_a = 0, drill_peak_b = 0;  // absolute peaks of the drill-down scope
  int64_t drill_peak_delta_a = 0, drill_peak_delta_b = 0;  // peak deltas of the same scope
  // When the peaks happened, in seconds from each trace's start (no time_us: none).
  std::optional<double> drill_peak_time_a, drill_peak_time_b;
  SourceComparison drill;              // live sets at the two peaks, joined
  SourceComparison drill_by_category;  // the same live sets by category
  // What each side was doing when it peaked: from the category of the
  // allocation that reached the peak (nullopt: the peak is the scope's start,
  // or the live sets are the dumps').
  std::optional<PeakPhase> peak_phase_a, peak_phase_b;
  bool drill_from_blocks = false;  // neither trace shows its peak: live at the dump, from blocks
  std::vector<Finding> findings;
};
// From the category of the allocation that reached a peak.
PeakPhase phase_of(Category category);

CompareResult compare_files(const FileAnalysis& a, const FileAnalysis& b,
                            std::optional<int64_t> step, const SourceKeyOptions& key_options);

}  // namespace memsnap
