// One file's analysis on one device: what every command's result is a
// projection of.
//
// A command loads a snapshot, makes one FileAnalysis per (file, device) and
// asks it for the parts its report shows. Each part is computed once, on first
// use, and kept: the segment totals, reserved memory over time, the profiler
// steps, the trace analysis (the one replay of allocations: totals, step
// windows, action counts, times, oom entries), the baseline, and the
// allocator's history (the replay of segments and blocks, the costly one)
// with the fragmentation it implies. Nothing a part needs is computed twice,
// and nothing a command does not show is computed at all.
//
// The parts are computed under std::call_once, so a FileAnalysis may be read
// from several threads; start_allocator_history() begins the allocator replay
// on a thread of its own for a command that will need it, so that it runs
// beside the trace analysis (two cores are the common case).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/device_choice.h"
#include "analysis/core/level_index.h"
#include "analysis/core/segments.h"
#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "analysis/core/trace_time.h"
#include "memsnap/model.h"

namespace memsnap {

class AllocatorWalkAhead;  // walk_ahead.h

// A part of the analysis was computed: its name and how long it took. The
// command line prints these with --timings.
struct PartTiming {
  std::string_view part;  // "segments", "reserved", "steps", "trace", "allocator history", ...
  std::string_view file;  // the FileAnalysis' path
  int device = 0;
  double seconds = 0;
};
using PartObserver = std::function<void(const PartTiming&)>;

class FileAnalysis {
 public:
  // Resolves the device (choose_device) at once: an unknown --device is an
  // error before any work. `observer` (may be empty) hears of every part
  // computed; it must outlive the analysis.
  // `step_source` chooses the step windows (--steps; kAuto: ProfilerStep
  // markers, else the optimizer's iterations). `walk_beside_read` (may be
  // null): the allocator walk that listened to the snapshot's read
  // (walk_ahead.h), taken by the history where it proves to be its own; it
  // must outlive the analysis (service::Session holds both).
  FileAnalysis(std::string path, const Snapshot& snapshot, std::optional<int> device,
               PartObserver observer = {}, StepSource step_source = StepSource::kAuto,
               AllocatorWalkAhead* walk_beside_read = nullptr);
  FileAnalysis(FileAnalysis&&) noexcept;
  FileAnalysis& operator=(FileAnalysis&&) noexcept;
  FileAnalysis(const FileAnalysis&) = delete;
  FileAnalysis& operator=(const FileAnalysis&) = delete;
  ~FileAnalysis();

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const Snapshot& snapshot() const { return *snapshot_; }
  [[nodiscard]] int device() const { return choice_.device; }
  [[nodiscard]] bool device_requested() const {  // --device given
    return choice_.reason == DeviceReason::kRequested;
  }
  [[nodiscard]] const DeviceChoice& device_choice() const { return choice_; }
  [[nodiscard]] const DeviceTrace& trace() const { return trace_; }

  // Parts, each computed on first use.
  [[nodiscard]] const SegmentTotals& segments() const;
  [[nodiscard]] const ReservedHistory& reserved() const;
  // The step windows and where they came from (ProfilerStep markers or the
  // optimizer's iterations).
  [[nodiscard]] const StepWindows& step_windows() const;
  [[nodiscard]] const std::vector<ProfilerStep>& steps() const { return step_windows().steps; }
  [[nodiscard]] StepOrigin step_origin() const { return step_windows().origin; }
  [[nodiscard]] StepSource step_source() const { return step_source_; }  // what was asked
  // Numbers of the ProfilerSteps whose END came before their START (ignored).
  [[nodiscard]] const std::vector<int64_t>& steps_ending_before_start() const {
    return step_windows().ending_before_start;
  }
  [[nodiscard]] const TraceAnalysis& trace_analysis() const;
  [[nodiscard]] const Baseline& baseline() const;
  // Memory from before the trace, unnamed: one replay, however many ways
  // (sources, categories) a command names it.
  [[nodiscard]] const BaselinePieces& baseline_pieces() const;
  // The allocator's state over the trace (without entries: the dump's state,
  // and its check says whether the dump's blocks are known).
  [[nodiscard]] const AllocatorHistory* allocator_history() const;
  [[nodiscard]] const FragmentationHistory& fragmentation() const;
  // The level after every entry, for memory lines at any window (serve);
  // computed only when asked for.
  [[nodiscard]] const LevelIndex& levels() const;
  // Every segment's span, largest first (serve's segment timeline).
  [[nodiscard]] const std::vector<SegmentSpan>& segment_spans() const;
  // Every allocation's span, largest first: built with the levels.
  [[nodiscard]] const AllocationSpans& spans() const;
  // Whether the levels (and spans) are built: a report that can use them
  // instead of a replay asks this, so that only a server pays for them.
  [[nodiscard]] bool has_levels() const;
  // Begins the allocator replay on another thread, if it has not begun.
  void start_allocator_history() const;

  // Projections used by many reports.
  [[nodiscard]] int64_t absolute_peak() const {
    return add_bytes(baseline().baseline_at_start,
                     static_cast<uint64_t>(trace_analysis().totals.peak_delta));
  }
  [[nodiscard]] int64_t step_absolute_peak(const StepStats& stats) const {
    return add_bytes(
        add_bytes(baseline().baseline_at_start, static_cast<uint64_t>(stats.start_delta)),
        static_cast<uint64_t>(stats.peak_delta));
  }
  [[nodiscard]] const StepStats* step(int64_t number) const;
  // Entries applied when the allocations' delta first peaked (0: the start).
  [[nodiscard]] uint64_t full_peak_position() const {
    const ReplayTotals& t = trace_analysis().totals;
    return t.peak_event == kNoEvent ? 0 : t.peak_event + 1 - trace_.begin;
  }
  // The trace's clock: its start and end, where a time falls, the clamp.
  [[nodiscard]] const TraceTime& time() const { return time_; }
  // Seconds from the trace's first timed entry to a model index's entry;
  // nullopt when either has no time.
  [[nodiscard]] std::optional<double> seconds_at(uint64_t event) const {
    return time_.seconds_at(event);
  }

 private:
  struct Parts;
  template <typename Make>
  void compute(std::string_view part, Make&& make) const;

  std::string path_;
  const Snapshot* snapshot_ = nullptr;
  DeviceChoice choice_;
  DeviceTrace trace_;
  TraceTime time_;
  StepSource step_source_ = StepSource::kAuto;
  PartObserver observer_;
  AllocatorWalkAhead* walk_beside_read_ = nullptr;
  std::unique_ptr<Parts> parts_;
};

// The usual entry: FileAnalysis(path, snapshot, device).
FileAnalysis analyze_file(const std::string& path, const Snapshot& snapshot,
                          std::optional<int> device, PartObserver observer = {},
                          StepSource step_source = StepSource::kAuto);

// The device's trace, or an empty one when the device has none.
DeviceTrace trace_or_empty(const Snapshot& snapshot, int device);

// "3-7, 9, 12-14": compact list of step numbers for messages.
std::string step_ranges(const std::vector<int64_t>& numbers);

}  // namespace memsnap
