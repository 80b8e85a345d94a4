// The replay engine over one device's trace: step windows, time positions and
// live memory by source, in two linear passes.
//
// Pass 1 (analyze_trace) walks the trace once with the full-trace replay and
// updates every open step window as it goes: a window's replay seeded with the
// allocations live at its start is exactly the full replay minus the running
// delta at its start, so no window is ever replayed from the trace start.
// Pass 2 (live_by_source) walks again keeping per-source live bytes up to date
// and copies that small table at the requested positions (peaks, a time); the
// live set itself is never copied.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/replay.h"
#include "analysis/source_key.h"
#include "analysis/summary.h"
#include "snapshot/model.h"

namespace memsnap {

// Source keys of one snapshot, numbered densely so that per-source totals are
// a flat array. Source ids are per file: diff by name, never by id.
class SourceIndex {
 public:
  SourceIndex(const Snapshot& snapshot, int frame_depth);
  uint32_t of(StackId stack);
  [[nodiscard]] const std::string& name(uint32_t source) const { return names_[source]; }
  [[nodiscard]] size_t size() const { return names_.size(); }

 private:
  SourceKeys keys_;
  std::vector<uint32_t> by_stack_;  // stack id value -> source id + 1 (0: not yet computed)
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, uint32_t> ids_;
};

struct SourceUsage {
  std::string source;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

struct StepStats {
  ProfilerStep step;
  uint64_t begin = 0;              // first event of the window (model index)
  uint64_t end = 0;                // one past the last
  int64_t start_delta = 0;         // full-trace running delta when the step opens
  int64_t peak_delta = 0;          // window peak, relative to the start; starts at 0
  uint64_t peak_event = kNoEvent;  // kNoEvent: the peak is the window start
  int64_t end_delta = 0;
  uint64_t alloc_count = 0;
  uint64_t alloc_bytes = 0;  // throughput
  uint64_t free_count = 0;
  uint64_t pre_existing_free_count = 0;  // frees of blocks allocated before the step
  uint64_t pre_existing_free_bytes = 0;
  uint64_t unmatched_free_count = 0;  // frees of blocks never seen in the trace
  uint64_t unmatched_free_bytes = 0;
  // Replay position (events applied since the trace start) of the window peak.
  [[nodiscard]] uint64_t peak_position(const DeviceTrace& trace) const {
    return (peak_event == kNoEvent ? begin : peak_event + 1) - trace.begin;
  }
};

struct TraceAnalysis {
  ReplayTotals totals;
  std::vector<StepStats> steps;  // same order as the steps given
};

TraceAnalysis analyze_trace(const Snapshot& snapshot, const DeviceTrace& trace,
                            const std::vector<ProfilerStep>& steps);

// Live bytes by source after `positions[k]` events of the trace were applied
// (positions ascending, each <= trace.count()). Rows sorted by bytes, largest
// first; sources with nothing live are left out.
std::vector<std::vector<SourceUsage>> live_by_source(const Snapshot& snapshot,
                                                     const DeviceTrace& trace, SourceIndex& sources,
                                                     std::span<const uint64_t> positions);

// Trace time origin: time_us of the first event that has one (0: none).
int64_t trace_start_us(const Snapshot& snapshot, const DeviceTrace& trace);
int64_t trace_end_us(const Snapshot& snapshot, const DeviceTrace& trace);

// Events with time_us <= origin + seconds, counted from the trace start (a
// prefix: replay stops at the first later event).
uint64_t position_at_time(const Snapshot& snapshot, const DeviceTrace& trace, double seconds);

// Counts of record_function marks (START) inside [start_us, end_us], by name up
// to '#', ProfilerStep itself excluded.
std::map<std::string, uint64_t> annotations_between(const Snapshot& snapshot, int device,
                                                    int64_t start_us, int64_t end_us);

}  // namespace memsnap
