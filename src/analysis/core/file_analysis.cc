#include "analysis/core/file_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <utility>

#include "analysis/core/walk_ahead.h"
#include "memsnap/error.h"

namespace memsnap {

// Each part: a once_flag and its value. The allocator history runs on a
// thread of its own once started; its future is shared by every reader.
struct FileAnalysis::Parts {
  std::once_flag segments_once;
  SegmentTotals segments;
  std::once_flag reserved_once;
  ReservedHistory reserved;
  std::once_flag steps_once;
  StepWindows steps;
  std::once_flag trace_once;
  TraceAnalysis trace;
  std::once_flag baseline_once;
  Baseline baseline;
  std::once_flag baseline_pieces_once;
  BaselinePieces baseline_pieces;
  std::once_flag history_started;
  std::shared_future<std::shared_ptr<const AllocatorHistory>> history;
  std::once_flag fragmentation_once;
  FragmentationHistory fragmentation;
  std::once_flag levels_once;
  std::atomic<bool> levels_built{false};
  LevelIndex levels;
  AllocationSpans spans;
  std::once_flag segment_spans_once;
  std::vector<SegmentSpan> segment_spans;
};

FileAnalysis::FileAnalysis(std::string path, const Snapshot& snapshot, std::optional<int> device,
                           PartObserver observer, StepSource step_source,
                           AllocatorWalkAhead* walk_beside_read)
    : path_(std::move(path)),
      snapshot_(&snapshot),
      choice_(choose_device(snapshot, device)),
      trace_(trace_or_empty(snapshot, choice_.device)),
      time_(snapshot, trace_),
      step_source_(step_source),
      observer_(std::move(observer)),
      walk_beside_read_(walk_beside_read),
      parts_(std::make_unique<Parts>()) {}

FileAnalysis::FileAnalysis(FileAnalysis&&) noexcept = default;
FileAnalysis& FileAnalysis::operator=(FileAnalysis&&) noexcept = default;

FileAnalysis::~FileAnalysis() {
  // A started allocator replay reads the snapshot: let it finish first.
  if (parts_ && parts_->history.valid()) parts_->history.wait();
}

template <typename Make>
void FileAnalysis::compute(std::string_view part, Make&& make) const {
  if (!observer_) {
    make();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  make();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  observer_(PartTiming{part, path_, choice_.device, took.count()});
}

const SegmentTotals& FileAnalysis::segments() const {
  std::call_once(parts_->segments_once, [this] {
    compute("segments", [this] { parts_->segments = segment_totals(*snapshot_, choice_.device); });
  });
  return parts_->segments;
}

const ReservedHistory& FileAnalysis::reserved() const {
  const uint64_t at_dump = segments().total_size;
  std::call_once(parts_->reserved_once, [this, at_dump] {
    compute("reserved", [&] { parts_->reserved = reserved_history(*snapshot_, trace_, at_dump); });
  });
  return parts_->reserved;
}

const StepWindows& FileAnalysis::step_windows() const {
  std::call_once(parts_->steps_once, [this] {
    compute("steps", [this] { parts_->steps = find_steps(*snapshot_, trace_, step_source_); });
  });
  return parts_->steps;
}

const TraceAnalysis& FileAnalysis::trace_analysis() const {
  const std::vector<ProfilerStep>& windows = steps();
  std::call_once(parts_->trace_once, [this, &windows] {
    compute("trace", [&] { parts_->trace = analyze_trace(*snapshot_, trace_, windows); });
  });
  return parts_->trace;
}

const LevelIndex& FileAnalysis::levels() const {
  std::call_once(parts_->levels_once, [this] {
    compute("levels", [&] { parts_->levels = LevelIndex(*snapshot_, trace_, parts_->spans); });
    parts_->levels_built.store(true, std::memory_order_release);
  });
  return parts_->levels;
}

bool FileAnalysis::has_levels() const {
  return parts_->levels_built.load(std::memory_order_acquire);
}

const std::vector<SegmentSpan>& FileAnalysis::segment_spans() const {
  std::call_once(parts_->segment_spans_once, [this] {
    compute("segment spans", [this] {
      parts_->segment_spans = memsnap::segment_spans(*snapshot_, trace_, choice_.device);
    });
  });
  return parts_->segment_spans;
}

const AllocationSpans& FileAnalysis::spans() const {
  static_cast<void>(levels());  // builds the spans in the same replay
  return parts_->spans;
}

const Baseline& FileAnalysis::baseline() const {
  const SegmentTotals& totals = segments();
  const TraceAnalysis& analysis = trace_analysis();
  std::call_once(parts_->baseline_once, [this, &totals, &analysis] {
    compute("baseline", [&] { parts_->baseline = compute_baseline(totals, analysis.totals); });
  });
  return parts_->baseline;
}

const BaselinePieces& FileAnalysis::baseline_pieces() const {
  std::call_once(parts_->baseline_pieces_once, [this] {
    compute("baseline pieces", [&] {
      parts_->baseline_pieces =
          memsnap::baseline_pieces(*snapshot_, trace_, trace_analysis().counts.free_frames.kind());
    });
  });
  return parts_->baseline_pieces;
}

void FileAnalysis::start_allocator_history() const {
  std::call_once(parts_->history_started, [this] {
    // The thread gets copies, never `this`: the analysis may move meanwhile.
    // The model it reads outlives the analysis.
    // A walk begun while the file was read (walk_ahead.h) is the history's
    // when it proves to be; it outlives the analysis.
    AllocatorWalkAhead* const walk_ahead = walk_beside_read_;
    parts_->history =
        std::async(std::launch::async,
                   [snapshot = snapshot_, trace = trace_, observer = observer_, path = path_,
                    walk_ahead]() -> std::shared_ptr<const AllocatorHistory> {
                     const auto start = std::chrono::steady_clock::now();
                     const std::unique_ptr<StartDiscovery> walked =
                         walk_ahead != nullptr ? walk_ahead->take(trace.device) : nullptr;
                     auto history = std::make_shared<const AllocatorHistory>(
                         *snapshot, trace.device, StartDerivation::kForwardFirst, walked.get());
                     if (observer) {
                       const std::chrono::duration<double> took =
                           std::chrono::steady_clock::now() - start;
                       observer(PartTiming{history->discovered()
                                               ? "allocator history (walked beside the read)"
                                               : "allocator history",
                                           path, trace.device, took.count()});
                     }
                     return history;
                   })
            .share();
  });
}

const AllocatorHistory* FileAnalysis::allocator_history() const {
  start_allocator_history();
  // The replay runs beside the other parts; what this thread then waits for
  // it is time a command spends on it too (--timings says so).
  if (observer_ && parts_->history.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const auto start = std::chrono::steady_clock::now();
    parts_->history.wait();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    observer_(PartTiming{"waiting for the allocator history", path_, choice_.device, took.count()});
  }
  return parts_->history.get().get();
}

const FragmentationHistory& FileAnalysis::fragmentation() const {
  const AllocatorHistory* history = allocator_history();
  const uint64_t peak_position =
      history != nullptr ? reserved_peak_position(reserved(), trace_) : 0;
  std::call_once(parts_->fragmentation_once, [this, history, peak_position] {
    if (history == nullptr) return;
    compute("fragmentation",
            [&] { parts_->fragmentation = fragmentation_history(*history, peak_position); });
  });
  return parts_->fragmentation;
}

const StepStats* FileAnalysis::step(int64_t number) const {
  // profiler_steps gives the steps in ascending number, one per number.
  const std::vector<StepStats>& stats = trace_analysis().steps;
  auto found = std::lower_bound(
      stats.begin(), stats.end(), number,
      [](const StepStats& step, int64_t wanted) { return step.step.number < wanted; });
  return found != stats.end() && found->step.number == number ? &*found : nullptr;
}

FileAnalysis analyze_file(const std::string& path, const Snapshot& snapshot,
                          std::optional<int> device, PartObserver observer,
                          StepSource step_source) {
  return FileAnalysis(path, snapshot, device, std::move(observer), step_source);
}

DeviceTrace trace_or_empty(const Snapshot& snapshot, int device) {
  const DeviceTrace* trace = snapshot.trace_of(device);
  return trace != nullptr ? *trace : DeviceTrace{device, 0, 0};
}

std::string step_ranges(const std::vector<int64_t>& numbers) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(numbers[i])
                           : fmt::format("{}-{}", numbers[i], numbers[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace memsnap
