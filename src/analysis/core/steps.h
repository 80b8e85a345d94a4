// Profiler steps and positions in time over one device's trace.
//
// analyze_trace walks the trace once with the replay core and updates every
// open step window as it goes: a window's replay seeded with the allocations
// live at its start is exactly the full replay minus the running delta at its
// start, so no window is ever replayed from the trace start.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/free_frames.h"
#include "memsnap/model.h"
#include "memsnap/replay.h"

namespace memsnap {

struct ProfilerStep {
  int64_t number = 0;
  int64_t start_us = 0;
  int64_t end_us = 0;  // 0 when incomplete
  bool complete = false;
  [[nodiscard]] double duration_ms() const {
    return complete ? static_cast<double>(end_us - start_us) / 1000.0 : 0.0;
  }
};
// ProfilerStep#N START/END annotations of one device, by step number. An END
// earlier than its START is ignored (the step counts as incomplete) and the
// step's number goes to *ending_before_start when given.
std::vector<ProfilerStep> profiler_steps(const Snapshot& snapshot, int device,
                                         std::vector<int64_t>* ending_before_start = nullptr);

// Which step windows a command uses (--steps): ProfilerStep markers, the
// iterations inferred from the optimizer, none, or (kAuto) the markers where
// the file has them, else the optimizer's iterations.
enum class StepSource : uint8_t { kAuto, kProfiler, kOptimizer, kNone };

// Where the windows a file's analysis uses came from.
enum class StepOrigin : uint8_t {
  kNone,                  // no windows
  kProfiler,              // ProfilerStep#N START/END marks
  kOptimizerAnnotations,  // one iteration per Optimizer.step#... mark (Megatron Bridge, Lightning)
  kOptimizerFrames,       // one iteration per run of allocations inside torch.optim
};

// Where a report's steps came from, for the line that says they are inferred.
struct StepsInference {
  StepOrigin origin = StepOrigin::kNone;
  std::string from;  // StepWindows::inferred_from
};

struct StepWindows {
  std::vector<ProfilerStep> steps;  // ascending number, one per number
  StepOrigin origin = StepOrigin::kNone;
  // What the inferred iterations end at: the optimizer mark's name
  // ("Optimizer.step#FusedAdam.step") or the frame ("step@adam.py"); empty
  // for ProfilerStep markers.
  std::string inferred_from;
  std::vector<int64_t> ending_before_start;  // ProfilerStep numbers whose END precedes START
  [[nodiscard]] StepsInference inference() const { return {origin, inferred_from}; }
};

// A step source by its name (auto, profiler, optimizer, none), as every
// front end spells it; nullopt for any other word.
std::optional<StepSource> step_source_named(std::string_view name);

// The JSON word for an origin (`steps_source.kind`: none, profiler,
// optimizer_annotations, optimizer_frames) and back, for summaries read from
// disk; an unknown word is nullopt.
std::string_view step_origin_name(StepOrigin origin);
std::optional<StepOrigin> step_origin_from_name(std::string_view name);
[[nodiscard]] inline bool steps_are_inferred(StepOrigin origin) {
  return origin == StepOrigin::kOptimizerAnnotations || origin == StepOrigin::kOptimizerFrames;
}

// Training iterations of a trace without ProfilerStep markers, numbered from
// 0. Iteration k ends at the END of the k-th Optimizer.step#... mark of the
// device (PyTorch's optimizer hooks record one per step()); it begins at the
// first enumerate(DataLoader)#... START after iteration k-1 ended and before
// the optimizer began (the loop fetching its batch), else just after
// iteration k-1 ended; iteration 0 begins at that mark or at the trace's first
// entry. After the last optimizer mark, the entries left form an incomplete
// iteration. Empty when the device has no optimizer marks.
StepWindows optimizer_steps_from_annotations(const Snapshot& snapshot, const DeviceTrace& trace);
// The same from frames, for files without annotations: an optimizer phase is
// a run of allocations whose stacks pass through torch/optim/ (zero_grad
// aside), ended by the next allocation that does not; iteration k ends at
// the last entry before that allocation, and the next begins with it.
// Iteration 0 begins at the trace's first entry. Needs timestamps.
StepWindows optimizer_steps_from_frames(const Snapshot& snapshot, const DeviceTrace& trace);
// The windows `source` asks for on one device.
StepWindows find_steps(const Snapshot& snapshot, const DeviceTrace& trace, StepSource source);

// What one device's marks hold that steps come from, for the sentence that
// says why a step source found none: a file with ProfilerStep marks read with
// --steps optimizer, or Optimizer.step marks that never END, must not read
// as a file without marks.
struct StepMarks {
  uint64_t profiler_steps = 0;    // ProfilerStep#N START marks
  uint64_t optimizer_starts = 0;  // Optimizer.step#... START marks
  uint64_t optimizer_ends = 0;    // ... END marks
  bool timed = false;             // the trace has a time_us to place marks by
};
StepMarks count_step_marks(const Snapshot& snapshot, const DeviceTrace& trace);
// Why `source` found no step windows on a device with these marks, as a
// clause after "FILE has no steps: " (no final period).
std::string no_steps_reason(StepSource source, const StepMarks& marks);
// Whether the file's own advice (run the loop under the profiler) applies:
// false where ProfilerStep marks are there and another source was asked.
[[nodiscard]] inline bool profiler_advice_applies(const StepMarks& marks) {
  return marks.profiler_steps == 0;
}

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

// What the trace holds, counted in the same pass as the replay.
struct TraceCounts {
  std::array<uint64_t, kActionCount> actions{};   // by Action; kOther's by label below
  std::map<std::string, uint64_t> other_actions;  // labels of the actions memsnap skips
  int64_t first_time_us = 0;     // the first timed entry's (0: no entry has a time)
  int64_t earliest_time_us = 0;  // the least and greatest times (they may go backwards)
  int64_t latest_time_us = 0;
  uint64_t times_backwards = 0;      // entries earlier than the timed entry before
  std::vector<uint64_t> oom_events;  // model indices of the oom entries
  FreeFrameEvidence free_frames;     // whose stack the frees carry
};

struct TraceAnalysis {
  ReplayTotals totals;
  std::vector<StepStats> steps;  // same order as the steps given
  TraceCounts counts;
};

// Whether the trace looks cut short: at least 10 frees without their alloc
// and at least 5% of all frees (a ring buffer that wrapped, or recording that
// started mid-run). parse warns on it; explain lists it among what is missing.
bool trace_looks_truncated(const ReplayTotals& replay);
// Which cut a truncated trace shows. A ring buffer that wrapped holds
// exactly max_entries entries, and people set round numbers (100_000,
// 1_000_000, 2**17): a count that is a multiple of 1,000 or a power of two
// (from 1,024) reads as one. Any other
// count means recording began after the allocations whose frees it holds
// (a late start), where raising max_entries changes nothing.
enum class TraceCut : uint8_t { kRingBuffer, kLateStart };
TraceCut trace_cut(uint64_t entry_count);

TraceAnalysis analyze_trace(const Snapshot& snapshot, const DeviceTrace& trace,
                            const std::vector<ProfilerStep>& steps);

// Trace time origin: time_us of the first event that has one (0: none).
int64_t trace_start_us(const Snapshot& snapshot, const DeviceTrace& trace);
int64_t trace_end_us(const Snapshot& snapshot, const DeviceTrace& trace);

// Counts of one device's record_function marks (START) inside a time range,
// by full name as the reference scripts count them (Optimizer.step#AdamW.step
// stays whole), ProfilerStep itself excluded. Indexed once, so that counting
// inside every step window costs about the size of each answer, not the
// number of marks times the number of windows.
class AnnotationCounter {
 public:
  AnnotationCounter(const Snapshot& snapshot, int device);
  // Marks with start_us <= time_us <= end_us.
  [[nodiscard]] std::map<std::string, uint64_t> between(int64_t start_us, int64_t end_us) const;

 private:
  const Snapshot* snapshot_;
  std::vector<std::pair<int64_t, StringId>> by_time_;  // sorted by time
  std::vector<StringId> names_;                        // distinct names
  std::vector<std::vector<int64_t>> times_by_name_;    // sorted, parallel to names_
};

}  // namespace memsnap
