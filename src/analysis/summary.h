// What `memsnap parse` reports: plain result structs, no formatting.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/replay.h"
#include "snapshot/model.h"

namespace memsnap {

struct SegmentTotals {
  uint64_t count = 0;
  uint64_t total_size = 0;  // reserved
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t awaiting_free_size = 0;  // active - allocated
  uint64_t inactive_size = 0;       // reserved - active
  double fragmentation = 0;         // inactive / reserved
  uint64_t expandable_count = 0;
  uint64_t private_pool_count = 0;  // CUDA graph or user MemPool segments
  uint64_t block_count = 0;
};
SegmentTotals segment_totals(const Snapshot& snapshot, int device);

struct Baseline {
  int64_t baseline_at_start = 0;
  uint64_t segments_active = 0;
  uint64_t pre_existing_freed = 0;    // bytes of unmatched frees
  uint64_t profiling_still_live = 0;  // bytes of traced allocs live at the end
};
Baseline compute_baseline(const SegmentTotals& segments, const ReplayTotals& replay);

struct ProfilerStep {
  int64_t number = 0;
  int64_t start_us = 0;
  int64_t end_us = 0;  // 0 when incomplete
  bool complete = false;
  [[nodiscard]] double duration_ms() const {
    return complete ? static_cast<double>(end_us - start_us) / 1000.0 : 0.0;
  }
};
// ProfilerStep#N START/END annotations of one device, by step number.
std::vector<ProfilerStep> profiler_steps(const Snapshot& snapshot, int device);

struct SourceThroughput {
  std::string source;
  uint64_t throughput_bytes = 0;
  uint64_t alloc_count = 0;
};

struct OomReport {
  uint64_t event = 0;
  uint64_t requested = 0;
  std::optional<uint64_t> device_free;
  int64_t time_us = 0;
};

struct DeviceOverview {
  int device = 0;
  uint64_t event_count = 0;
  uint64_t alloc_count = 0;
  SegmentTotals segments;
  int64_t peak_delta = 0;
  uint64_t unmatched_free_count = 0;
  int64_t baseline_at_start = 0;
};

// The implicit move is noexcept; clang-tidy cannot see through
// nlohmann::json's invariant assertions.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ParseResult {
  std::string file;
  uint64_t file_size_bytes = 0;
  uint64_t pickle_bytes = 0;
  std::string compression;  // "none", "gzip", "zstd"
  int pickle_protocol = 0;
  int device = 0;
  std::vector<int> devices;  // in use
  uint64_t device_trace_lists = 0;
  bool top_level_list = false;
  bool legacy_format = false;
  nlohmann::ordered_json allocator_settings;
  SegmentTotals segments;
  Baseline baseline;
  ReplayTotals replay;  // peak_event counts within the device's trace
  std::vector<ProfilerStep> steps;
  uint64_t event_count = 0;
  std::map<std::string, uint64_t> actions;
  bool has_time = false;
  double trace_duration_s = 0;
  std::vector<SourceThroughput> top_sources;
  uint64_t distinct_sources = 0;
  std::vector<DeviceOverview> per_device;
  std::vector<OomReport> ooms;
  uint64_t annotation_count = 0;
  std::map<std::string, uint64_t> annotation_kinds;  // name up to '#', START marks only
  uint64_t distinct_frames = 0;
  uint64_t distinct_stacks = 0;
  DecodeAnomalies anomalies;
  std::vector<std::string> warnings;
  std::string steps_hint;  // set when there are no steps
};

struct ParseOptions {
  std::optional<int> device;
  int top = 10;
  int frame_depth = 1;
};

ParseResult summarize(const Snapshot& snapshot, const std::string& file,
                      const ParseOptions& options);

// Resolves --device against the snapshot; throws a clear Error listing the
// devices in use when the ordinal is absent.
int choose_device(const Snapshot& snapshot, std::optional<int> requested);

}  // namespace memsnap
