// One file's chosen device, replayed once: what every report starts from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/allocator_state.h"
#include "analysis/segments.h"
#include "analysis/steps.h"
#include "memsnap/model.h"

namespace memsnap {

struct FileAnalysis {
  std::string path;
  const Snapshot* snapshot = nullptr;
  int device = 0;
  bool device_requested = false;  // chosen with --device rather than by default
  DeviceTrace trace;
  SegmentTotals segments;
  ReservedHistory reserved;
  FragmentationHistory fragmentation;
  // The allocator's state over the trace, replayed once (fragmentation above,
  // then oom's block facts and plot's allocator panel); null without entries.
  std::shared_ptr<const AllocatorHistory> history;
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

// Resolves --device against the snapshot; throws a clear Error listing the
// devices in use when the ordinal is absent.
int choose_device(const Snapshot& snapshot, std::optional<int> requested);

// The device's trace, or an empty one when the device has none.
DeviceTrace trace_or_empty(const Snapshot& snapshot, int device);

// "3-7, 9, 12-14": compact list of step numbers for messages.
std::string step_ranges(const std::vector<int64_t>& numbers);

}  // namespace memsnap
