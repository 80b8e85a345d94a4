// What `memsnap parse` reports: a projection of the file's analysis, plain
// result structs, no formatting.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/file_analysis.h"
#include "analysis/core/findings.h"
#include "analysis/core/segments.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "memsnap/model.h"
#include "memsnap/replay.h"

namespace memsnap {

struct SourceThroughput {
  std::string source;
  uint64_t throughput_bytes = 0;
  uint64_t alloc_count = 0;
};

struct OomEntry {
  uint64_t event = 0;  // index within its device's trace (the model's index less trace.begin)
  uint64_t requested = 0;
  std::optional<uint64_t> device_free;
  int64_t time_us = 0;
};

// The analysed device's peak and its trace's counts: what parse reports first
// and what a summary keeps (RunSummary::facts), one struct so that the two
// cannot drift.
struct PeakFacts {
  uint64_t event_count = 0;  // the device's trace entries
  uint64_t alloc_count = 0;
  uint64_t unmatched_free_count = 0;
  uint64_t unmatched_free_bytes = 0;
  bool has_time = false;
  double trace_duration_s = 0;  // 0 without times
  int64_t baseline = 0;         // live before the trace's first entry
  int64_t peak_delta = 0;
  int64_t absolute_peak = 0;           // baseline + peak_delta
  std::optional<uint64_t> peak_event;  // within the device's trace; none: the peak is its start
  std::optional<double> peak_time_s;   // seconds from the trace start, when entries have time_us
  uint64_t reserved_peak = 0;
  std::optional<double> reserved_peak_time_s;  // when the peak came from a timed entry
};

struct DeviceOverview {
  int device = 0;
  uint64_t event_count = 0;
  uint64_t alloc_count = 0;
  SegmentTotals segments;
  int64_t peak_delta = 0;
  uint64_t unmatched_free_count = 0;
  int64_t baseline_at_start = 0;
  int64_t absolute_peak = 0;  // baseline_at_start + peak_delta
  uint64_t oom_count = 0;     // oom entries in the device's trace
};

// The implicit move is noexcept; clang-tidy cannot see through
// nlohmann::json's invariant assertions.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ParseReport {
  GroupBy group = GroupBy::kSource;  // what the source rows stand for
  std::string file;
  uint64_t file_size_bytes = 0;
  uint64_t pickle_bytes = 0;
  std::string compression;  // "none", "gzip", "zstd"
  int pickle_protocol = 0;
  int device = 0;
  bool device_requested = false;  // --device given
  std::vector<int> devices;       // in use
  bool top_level_list = false;
  bool legacy_format = false;
  nlohmann::ordered_json allocator_settings;  // null when the file has none
  SegmentTotals segments;
  PeakFacts facts;
  ReservedHistory reserved;
  FragmentationHistory fragmentation;
  std::optional<double> peak_free_time_s;  // when the most free memory came from a timed entry
  Baseline baseline;
  ReplayTotals replay;            // peak_event counts within the device's trace
  FreeFrameEvidence free_frames;  // whose stack the frees carry
  std::vector<ProfilerStep> steps;
  StepsInference steps_origin;
  // With no steps: what was asked (--steps) and the marks there are, for
  // the sentence that says why.
  StepSource step_source = StepSource::kAuto;
  StepMarks step_marks;
  std::map<std::string, uint64_t> actions;
  std::vector<SourceThroughput> throughput;  // every source, most allocated bytes first
  // Live at the dump by source from the segments' blocks, when the trace
  // does not cover the live memory (no trace, or much allocated before it);
  // every source, largest first.
  std::vector<SourceUsage> live_at_dump;
  std::vector<DeviceOverview> per_device;
  std::vector<OomEntry> ooms;
  uint64_t annotation_count = 0;
  std::map<std::string, uint64_t> annotation_kinds;  // name up to '#', START marks only
  uint64_t distinct_frames = 0;
  uint64_t distinct_stacks = 0;
  DecodeAnomalies anomalies;
  uint64_t times_backwards = 0;  // entries earlier than the timed entry before
  std::vector<int64_t> steps_ending_before_start;
  std::vector<Finding> warnings;  // what a user needs before trusting the numbers
};

struct ParseOptions {
  SourceKeyOptions keys;  // how allocations are named
};

// Reads the file's segments, reserved history, trace analysis, baseline and
// fragmentation (starting the allocator replay first, so that it runs beside
// the trace analysis).
ParseReport parse_report(const FileAnalysis& file, const ParseOptions& options);

}  // namespace memsnap
