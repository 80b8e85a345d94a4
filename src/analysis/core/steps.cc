#include "analysis/core/steps.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "analysis/core/optimizer_lifetime.h"

namespace memsnap {

namespace {
constexpr std::string_view kStepPrefix = "ProfilerStep#";
}  // namespace

std::vector<ProfilerStep> profiler_steps(const Snapshot& snapshot, int device,
                                         std::vector<int64_t>* ending_before_start) {
  std::map<int64_t, ProfilerStep> steps;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device) continue;
    std::string_view name = snapshot.strings.get(note.name);
    if (name.substr(0, kStepPrefix.size()) != kStepPrefix) continue;
    std::string_view digits = name.substr(kStepPrefix.size());
    int64_t number = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error != std::errc() || end != digits.data() + digits.size()) continue;
    if (note.stage == Stage::kStart) {
      auto [it, inserted] = steps.try_emplace(number);
      if (inserted || it->second.start_us == 0) {
        it->second.number = number;
        it->second.start_us = note.time_us;
      }
    } else if (note.stage == Stage::kEnd && note.time_us > 0) {
      auto it = steps.find(number);
      if (it != steps.end() && !it->second.complete) {
        if (note.time_us < it->second.start_us) {
          if (ending_before_start != nullptr) ending_before_start->push_back(number);
          continue;
        }
        it->second.end_us = note.time_us;
        it->second.complete = true;
      }
    }
  }
  std::vector<ProfilerStep> out;
  out.reserve(steps.size());
  for (auto& [number, step] : steps) out.push_back(step);
  return out;
}

namespace {

constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";
constexpr std::string_view kDataLoaderPrefix = "enumerate(DataLoader)#";

// Whether the trace allocates after `end_us`.
bool allocates_after(const Snapshot& snapshot, const DeviceTrace& trace, int64_t end_us) {
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (snapshot.events.action[i] == Action::kAlloc && snapshot.events.time_us[i] > end_us)
      return true;
  }
  return false;
}

}  // namespace

StepWindows optimizer_steps_from_annotations(const Snapshot& snapshot, const DeviceTrace& trace) {
  StepWindows out;
  const int64_t first_time = trace_start_us(snapshot, trace);
  if (first_time == 0) return out;
  // Only one optimizer's marks count (a GAN steps two per iteration): the
  // name with the most START marks, the first seen on a tie.
  std::vector<const Annotation*> marks;
  absl::flat_hash_map<StringId, uint64_t> starts_by_name;
  std::vector<StringId> names_in_order;
  std::vector<int64_t> loader_starts;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != trace.device || note.time_us <= 0) continue;
    std::string_view name = snapshot.strings.get(note.name);
    if (name.starts_with(kDataLoaderPrefix) && note.stage == Stage::kStart) {
      loader_starts.push_back(note.time_us);
    } else if (name.starts_with(kOptimizerStepPrefix)) {
      marks.push_back(&note);
      if (note.stage == Stage::kStart && starts_by_name[note.name]++ == 0) {
        names_in_order.push_back(note.name);
      }
    }
  }
  if (names_in_order.empty()) return out;
  StringId chosen = names_in_order.front();
  for (StringId name : names_in_order) {
    if (starts_by_name[name] > starts_by_name[chosen]) chosen = name;
  }
  out.origin = StepOrigin::kOptimizerAnnotations;
  out.inferred_from = std::string(snapshot.strings.get(chosen));
  std::stable_sort(marks.begin(), marks.end(), [](const Annotation* a, const Annotation* b) {
    return a->time_us < b->time_us;
  });
  std::sort(loader_starts.begin(), loader_starts.end());

  size_t next_loader = 0;
  int64_t previous_end = 0;  // 0: no iteration has ended yet
  // Where the iteration after `previous_end` begins, given the optimizer's
  // START (INT64_MAX: none).
  const auto iteration_start = [&](int64_t optimizer_start) {
    while (next_loader < loader_starts.size() && previous_end != 0 &&
           loader_starts[next_loader] <= previous_end) {
      ++next_loader;
    }
    if (next_loader < loader_starts.size() && loader_starts[next_loader] <= optimizer_start) {
      return loader_starts[next_loader];
    }
    return previous_end == 0 ? std::min(first_time, optimizer_start) : previous_end + 1;
  };
  int depth = 0;
  int64_t optimizer_start = 0;
  for (const Annotation* note : marks) {
    if (note->name != chosen) continue;
    if (note->stage == Stage::kStart) {
      if (depth++ == 0) optimizer_start = note->time_us;
    } else if (note->stage == Stage::kEnd && depth > 0 && --depth == 0) {
      ProfilerStep step;
      step.number = static_cast<int64_t>(out.steps.size());
      step.start_us = iteration_start(optimizer_start);
      step.end_us = note->time_us;
      step.complete = true;
      out.steps.push_back(step);
      previous_end = note->time_us;
    }
  }
  // Allocations after the last optimizer step: an iteration cut short. Frees
  // alone there (the last step's leftovers let go) are no iteration.
  if (previous_end != 0 && trace_end_us(snapshot, trace) > previous_end &&
      allocates_after(snapshot, trace, previous_end)) {
    ProfilerStep step;
    step.number = static_cast<int64_t>(out.steps.size());
    step.start_us = iteration_start(INT64_MAX);
    out.steps.push_back(step);
  }
  return out;
}

StepWindows optimizer_steps_from_frames(const Snapshot& snapshot, const DeviceTrace& trace) {
  StepWindows out;
  int64_t start = trace_start_us(snapshot, trace);
  if (start == 0) return out;
  const EventColumns& events = snapshot.events;
  OptimizerStacks optimizer(snapshot);
  const auto add_step = [&](int64_t end_us, bool complete) {
    ProfilerStep step;
    step.number = static_cast<int64_t>(out.steps.size());
    step.start_us = start;
    step.end_us = complete ? std::max(end_us, start) : 0;
    step.complete = complete;
    out.steps.push_back(step);
  };
  bool in_phase = false;
  bool entries_since_boundary = false;
  int64_t last_time = start;  // the latest timestamp seen (entries without one keep it)
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const int64_t time = events.time_us[i] > 0 ? events.time_us[i] : last_time;
    if (events.action[i] == Action::kAlloc) {
      if (optimizer.contains(events.stack[i])) {
        if (!in_phase && out.steps.empty() && out.inferred_from.empty()) {
          out.inferred_from = "allocations inside torch/optim/";
        }
        in_phase = true;
      } else if (in_phase) {
        add_step(last_time, true);
        start = time;
        in_phase = false;
        entries_since_boundary = false;
      }
    }
    entries_since_boundary = true;
    last_time = time;
  }
  if (in_phase) {
    add_step(last_time, true);
  } else if (!out.steps.empty() && entries_since_boundary) {
    add_step(0, false);
  }
  if (!out.steps.empty()) out.origin = StepOrigin::kOptimizerFrames;
  return out;
}

StepWindows find_steps(const Snapshot& snapshot, const DeviceTrace& trace, StepSource source) {
  StepWindows windows;
  if (source == StepSource::kNone) return windows;
  if (source != StepSource::kOptimizer) {
    windows.steps = profiler_steps(snapshot, trace.device, &windows.ending_before_start);
    if (!windows.steps.empty()) windows.origin = StepOrigin::kProfiler;
    if (!windows.steps.empty() || source == StepSource::kProfiler) return windows;
  }
  windows = optimizer_steps_from_annotations(snapshot, trace);
  if (windows.steps.empty()) windows = optimizer_steps_from_frames(snapshot, trace);
  return windows;
}

StepMarks count_step_marks(const Snapshot& snapshot, const DeviceTrace& trace) {
  StepMarks marks;
  marks.timed = trace_start_us(snapshot, trace) != 0;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != trace.device) continue;
    const std::string_view name = snapshot.strings.get(note.name);
    if (name.starts_with(kStepPrefix)) {
      marks.profiler_steps += note.stage == Stage::kStart ? 1 : 0;
    } else if (name.starts_with(kOptimizerStepPrefix)) {
      marks.optimizer_starts += note.stage == Stage::kStart ? 1 : 0;
      marks.optimizer_ends += note.stage == Stage::kEnd ? 1 : 0;
    }
  }
  return marks;
}

namespace {

// Why the optimizer gave no iterations.
std::string no_iterations_reason(const StepMarks& marks) {
  constexpr std::string_view kNoFrames = "no allocation inside torch.optim to infer them from";
  if (marks.optimizer_starts == 0) {
    return "no Optimizer.step marks or torch.optim allocations to infer iterations from";
  }
  const uint64_t n = marks.optimizer_starts;
  const std::string_view s = n == 1 ? "" : "s";
  if (!marks.timed) {
    return fmt::format(
        "its {} Optimizer.step mark{} cannot be placed: the trace entries carry no time_us", n, s);
  }
  if (marks.optimizer_ends == 0) {
    return fmt::format(
        "its {} Optimizer.step mark{} {} a START and no END, so no iteration is complete, and {}",
        n, s, n == 1 ? "has" : "have", kNoFrames);
  }
  return fmt::format(
      "none of its {} Optimizer.step mark{} is closed by an END after its START, and {}", n, s,
      kNoFrames);
}

}  // namespace

std::string no_steps_reason(StepSource source, const StepMarks& marks) {
  switch (source) {
    case StepSource::kNone: return "--steps none turns step detection off";
    case StepSource::kProfiler:
      if (marks.optimizer_starts > 0 && marks.timed) {
        return fmt::format(
            "no ProfilerStep annotations (--steps profiler); --steps optimizer or auto (the "
            "default) infers iterations from its {} Optimizer.step mark{}",
            marks.optimizer_starts, marks.optimizer_starts == 1 ? "" : "s");
      }
      return "no ProfilerStep annotations (--steps profiler)";
    case StepSource::kOptimizer: {
      std::string reason = "--steps optimizer: " + no_iterations_reason(marks);
      if (marks.profiler_steps > 0) {
        reason += fmt::format(
            "; --steps profiler or auto (the default) reads steps from its {} ProfilerStep "
            "annotation{}",
            marks.profiler_steps, marks.profiler_steps == 1 ? "" : "s");
      }
      return reason;
    }
    case StepSource::kAuto: break;
  }
  return "no ProfilerStep annotations, and " + no_iterations_reason(marks);
}

int64_t trace_start_us(const Snapshot& snapshot, const DeviceTrace& trace) {
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (snapshot.events.time_us[i] > 0) return snapshot.events.time_us[i];
  }
  return 0;
}

int64_t trace_end_us(const Snapshot& snapshot, const DeviceTrace& trace) {
  for (uint64_t i = trace.end; i > trace.begin; --i) {
    if (snapshot.events.time_us[i - 1] > 0) return snapshot.events.time_us[i - 1];
  }
  return 0;
}

namespace {

// Totals over the events applied so far. A window's counts are the totals
// at its end minus the totals at its start, so no event is visited once per
// window: time stays linear however many windows overlap.
struct RunningCounts {
  uint64_t alloc_count = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_count = 0;
  uint64_t matched_free_bytes = 0;
  uint64_t unmatched_free_count = 0;
  uint64_t unmatched_free_bytes = 0;
};

// Fenwick tree of (count, bytes) of the frees seen so far, keyed by the rank
// of the freed block's allocation among the window begins. "Frees inside a
// window of blocks also allocated inside it" is a suffix sum at the window's
// close; the pre-existing frees are the window's other frees.
class FreesByAllocationRank {
 public:
  explicit FreesByAllocationRank(size_t ranks) : count_(ranks + 1), bytes_(ranks + 1) {}
  void add(size_t rank, uint64_t bytes) {
    ++total_count_;
    total_bytes_ += bytes;
    for (size_t i = rank + 1; i < count_.size(); i += i & (~i + 1)) {
      ++count_[i];
      bytes_[i] += bytes;
    }
  }
  // (count, bytes) of the frees whose rank is >= rank.
  [[nodiscard]] std::pair<uint64_t, uint64_t> at_or_above(size_t rank) const {
    uint64_t count = 0;
    uint64_t bytes = 0;
    for (size_t i = rank; i > 0; i -= i & (~i + 1)) {
      count += count_[i];
      bytes += bytes_[i];
    }
    return {total_count_ - count, total_bytes_ - bytes};
  }

 private:
  std::vector<uint64_t> count_;
  std::vector<uint64_t> bytes_;
  uint64_t total_count_ = 0;
  uint64_t total_bytes_ = 0;
};

struct PeakCandidate {
  int64_t delta;
  uint64_t event;
};

// Feeds the running counts, the peak candidates and the frees tree from the
// one replay of the trace.
struct SweepObserver {
  const Replay& replay;
  const EventColumns& events;
  const std::vector<uint64_t>& sorted_begins;
  RunningCounts& counts;
  // The running delta after each alloc, kept only while no later alloc
  // reached a strictly higher one: deltas non-increasing, events ascending.
  // The highest delta at or after event b is then the first candidate whose
  // event is >= b (and the earliest of equal highs, as a forward scan finds).
  std::vector<PeakCandidate>& candidates;
  FreesByAllocationRank& frees;
  FreeFrameEvidence& free_frames;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    ++counts.alloc_count;
    counts.alloc_bytes += added.size;
    const int64_t delta = replay.delta();
    while (!candidates.empty() && candidates.back().delta < delta) candidates.pop_back();
    candidates.push_back({delta, event});
  }
  void on_free(uint64_t event, const LiveAllocation& freed) {
    free_frames.tally(events, event, freed);
    ++counts.free_count;
    counts.matched_free_bytes += freed.size;
    auto rank = static_cast<size_t>(
        std::upper_bound(sorted_begins.begin(), sorted_begins.end(), freed.event) -
        sorted_begins.begin());
    frees.add(rank, freed.size);
  }
  void on_unmatched_free(uint64_t /*event*/, uint64_t size) {
    ++counts.free_count;
    ++counts.unmatched_free_count;
    counts.unmatched_free_bytes += size;
  }
};

}  // namespace

namespace {

// Window bounds: start <= time_us <= end; an incomplete step runs to the end
// of the trace. Each found by one merge over the steps sorted by that bound
// (times that go backwards cannot make this scan quadratic).
void find_window_bounds(const EventColumns& events, const DeviceTrace& trace,
                        const std::vector<ProfilerStep>& steps, TraceAnalysis& analysis) {
  std::vector<size_t> by_start(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) by_start[k] = k;
  std::sort(by_start.begin(), by_start.end(),
            [&](size_t a, size_t b) { return steps[a].start_us < steps[b].start_us; });
  {
    uint64_t i = trace.begin;
    for (size_t k : by_start) {
      while (i < trace.end && events.time_us[i] < steps[k].start_us) ++i;
      analysis.steps[k].begin = i;
    }
  }
  std::vector<size_t> by_end_time(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) by_end_time[k] = k;
  std::sort(by_end_time.begin(), by_end_time.end(),
            [&](size_t a, size_t b) { return steps[a].end_us < steps[b].end_us; });
  {
    uint64_t i = trace.begin;
    for (size_t k : by_end_time) {
      StepStats& stats = analysis.steps[k];
      if (!stats.step.complete) {
        stats.end = trace.end;
        continue;
      }
      while (i < trace.end && events.time_us[i] <= stats.step.end_us) ++i;
      stats.end = std::max(stats.begin, i);
    }
  }
}

// A window that closes: its counts since it opened, the matched frees of
// blocks from before it, and its peak among the candidates.
void finish_window(StepStats& stats, const RunningCounts& start, const RunningCounts& counts,
                   int64_t delta, const std::vector<uint64_t>& sorted_begins,
                   const FreesByAllocationRank& frees,
                   const std::vector<PeakCandidate>& candidates) {
  stats.end_delta = sub_bytes(delta, static_cast<uint64_t>(stats.start_delta));
  stats.alloc_count = counts.alloc_count - start.alloc_count;
  stats.alloc_bytes = counts.alloc_bytes - start.alloc_bytes;
  stats.free_count = counts.free_count - start.free_count;
  stats.unmatched_free_count = counts.unmatched_free_count - start.unmatched_free_count;
  stats.unmatched_free_bytes = counts.unmatched_free_bytes - start.unmatched_free_bytes;
  // Matched frees in the window, less those of blocks allocated in it.
  auto first_rank = static_cast<size_t>(
      std::lower_bound(sorted_begins.begin(), sorted_begins.end(), stats.begin) -
      sorted_begins.begin());
  auto [inside_count, inside_bytes] = frees.at_or_above(first_rank + 1);
  uint64_t matched_frees = stats.free_count - stats.unmatched_free_count;
  stats.pre_existing_free_count = matched_frees - inside_count;
  stats.pre_existing_free_bytes =
      counts.matched_free_bytes - start.matched_free_bytes - inside_bytes;
  auto highest = std::lower_bound(
      candidates.begin(), candidates.end(), stats.begin,
      [](const PeakCandidate& candidate, uint64_t begin) { return candidate.event < begin; });
  if (highest != candidates.end()) {
    int64_t window_delta = sub_bytes(highest->delta, static_cast<uint64_t>(stats.start_delta));
    if (window_delta > 0) {
      stats.peak_delta = window_delta;
      stats.peak_event = highest->event;
    }
  }
}

// The labels of the actions memsnap skips, counted by interned label: a
// label is copied and compared once, not per entry (one 1 MiB label shared
// by every entry once cost its length each time).
class OtherActionCounter {
 public:
  void add(const Snapshot& snapshot, uint64_t i) {
    const auto found = snapshot.events.other_action.find(i);
    if (found == snapshot.events.other_action.end()) {
      ++unnamed_;
    } else {
      ++by_label_[found->second];
    }
  }
  void write(const Snapshot& snapshot, std::map<std::string, uint64_t>& out) const {
    for (const auto& [label, count] : by_label_)
      out[std::string(snapshot.strings.get(label))] += count;
    if (unnamed_ > 0) out[std::string(action_name(Action::kOther))] += unnamed_;
  }

 private:
  absl::flat_hash_map<StringId, uint64_t> by_label_;
  uint64_t unnamed_ = 0;
};

// The entry's action and time, counted.
inline void count_entry(const Snapshot& snapshot, uint64_t i, TraceCounts& counted,
                        OtherActionCounter& other_actions, int64_t& last_time) {
  const EventColumns& events = snapshot.events;
  const Action action = events.action[i];
  if (action == Action::kOther) {
    other_actions.add(snapshot, i);
  } else {
    ++counted.actions[static_cast<size_t>(action)];
    if (action == Action::kOom) counted.oom_events.push_back(i);
  }
  if (const int64_t t = events.time_us[i]; t > 0) {
    if (counted.first_time_us == 0) {
      counted.first_time_us = counted.earliest_time_us = counted.latest_time_us = t;
    }
    if (t < last_time) ++counted.times_backwards;
    counted.earliest_time_us = std::min(counted.earliest_time_us, t);
    counted.latest_time_us = std::max(counted.latest_time_us, t);
    last_time = t;
  }
}

}  // namespace

TraceAnalysis analyze_trace(const Snapshot& snapshot, const DeviceTrace& trace,
                            const std::vector<ProfilerStep>& steps) {
  const EventColumns& events = snapshot.events;
  TraceAnalysis analysis;
  analysis.steps.resize(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) analysis.steps[k].step = steps[k];

  find_window_bounds(events, trace, steps, analysis);

  // Events at which windows open and close, in event order.
  std::vector<size_t> opening(steps.size());
  std::vector<size_t> closing(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) opening[k] = closing[k] = k;
  std::sort(opening.begin(), opening.end(),
            [&](size_t a, size_t b) { return analysis.steps[a].begin < analysis.steps[b].begin; });
  std::sort(closing.begin(), closing.end(),
            [&](size_t a, size_t b) { return analysis.steps[a].end < analysis.steps[b].end; });
  std::vector<uint64_t> sorted_begins(steps.size());
  for (size_t n = 0; n < opening.size(); ++n) sorted_begins[n] = analysis.steps[opening[n]].begin;

  Replay replay(snapshot);
  RunningCounts counts;
  std::vector<RunningCounts> counts_at_start(steps.size());
  std::vector<PeakCandidate> candidates;
  FreesByAllocationRank frees(steps.size());
  SweepObserver sweep{
      replay, events, sorted_begins, counts, candidates, frees, analysis.counts.free_frames};
  size_t next_open = 0;
  size_t next_close = 0;
  size_t open_windows = 0;

  // At each event: open the windows that start here (their start delta is
  // the delta before this event), close the windows that ended before it,
  // then apply it. Empty windows open and close at once: end delta 0.
  auto open_until = [&](uint64_t index) {
    while (next_open < opening.size() && analysis.steps[opening[next_open]].begin <= index) {
      size_t k = opening[next_open++];
      analysis.steps[k].start_delta = replay.delta();
      counts_at_start[k] = counts;
      ++open_windows;
    }
  };
  auto close_until = [&](uint64_t index) {
    while (next_close < closing.size() && analysis.steps[closing[next_close]].end <= index) {
      size_t k = closing[next_close++];
      --open_windows;
      finish_window(analysis.steps[k], counts_at_start[k], counts, replay.delta(), sorted_begins,
                    frees, candidates);
    }
    // Every window still to open begins at or after this event.
    if (open_windows == 0) candidates.clear();
  };
  TraceCounts& counted = analysis.counts;
  OtherActionCounter other_actions;
  int64_t last_time = 0;
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    open_until(i);
    close_until(i);
    replay.apply(i, sweep);
    count_entry(snapshot, i, counted, other_actions, last_time);
  }
  other_actions.write(snapshot, counted.other_actions);
  // Windows that start after the last event open (and close) at the final delta.
  open_until(UINT64_MAX);
  close_until(UINT64_MAX);
  analysis.totals = replay.totals();
  return analysis;
}

AnnotationCounter::AnnotationCounter(const Snapshot& snapshot, int device) : snapshot_(&snapshot) {
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device || note.stage != Stage::kStart) continue;
    if (snapshot.strings.get(note.name).starts_with(kStepPrefix)) continue;
    by_time_.emplace_back(note.time_us, note.name);
  }
  std::sort(by_time_.begin(), by_time_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  absl::flat_hash_map<StringId, size_t> slot_of;
  for (const auto& [time_us, name] : by_time_) {
    auto [it, inserted] = slot_of.try_emplace(name, names_.size());
    if (inserted) {
      names_.push_back(name);
      times_by_name_.emplace_back();
    }
    times_by_name_[it->second].push_back(time_us);
  }
}

std::map<std::string, uint64_t> AnnotationCounter::between(int64_t start_us, int64_t end_us) const {
  std::map<std::string, uint64_t> counts;
  const auto by_first = [](const std::pair<int64_t, StringId>& mark, int64_t t) {
    return mark.first < t;
  };
  auto first = std::lower_bound(by_time_.begin(), by_time_.end(), start_us, by_first);
  auto last = std::upper_bound(
      first, by_time_.end(), end_us,
      [](int64_t t, const std::pair<int64_t, StringId>& mark) { return t < mark.first; });
  if (static_cast<size_t>(last - first) <= names_.size()) {
    // Fewer marks in the range than names: count them one by one.
    for (auto mark = first; mark != last; ++mark) {
      ++counts[std::string(snapshot_->strings.get(mark->second))];
    }
    return counts;
  }
  // Many marks of few names (a mark per layer per step): two binary searches
  // per name.
  for (size_t n = 0; n < names_.size(); ++n) {
    const std::vector<int64_t>& times = times_by_name_[n];
    auto count = static_cast<uint64_t>(std::upper_bound(times.begin(), times.end(), end_us) -
                                       std::lower_bound(times.begin(), times.end(), start_us));
    if (count > 0) counts[std::string(snapshot_->strings.get(names_[n]))] = count;
  }
  return counts;
}

TraceCut trace_cut(uint64_t entry_count) {
  constexpr uint64_t kRound = 1000;
  const bool round =
      entry_count >= kRound && (entry_count % kRound == 0 || std::has_single_bit(entry_count));
  return round ? TraceCut::kRingBuffer : TraceCut::kLateStart;
}

bool trace_looks_truncated(const ReplayTotals& replay) {
  constexpr uint64_t kUnmatchedCount = 10;
  constexpr double kUnmatchedShare = 0.05;
  return replay.unmatched_free_count >= kUnmatchedCount &&
         static_cast<double>(replay.unmatched_free_count) >=
             kUnmatchedShare * static_cast<double>(std::max<uint64_t>(replay.free_count, 1));
}

namespace {
constexpr std::array<std::pair<StepOrigin, std::string_view>, 4> kStepOriginNames{{
    {StepOrigin::kNone, "none"},
    {StepOrigin::kProfiler, "profiler"},
    {StepOrigin::kOptimizerAnnotations, "optimizer_annotations"},
    {StepOrigin::kOptimizerFrames, "optimizer_frames"},
}};
}  // namespace

std::optional<StepSource> step_source_named(std::string_view name) {
  constexpr std::array<std::pair<std::string_view, StepSource>, 4> kNames{{
      {"auto", StepSource::kAuto},
      {"profiler", StepSource::kProfiler},
      {"optimizer", StepSource::kOptimizer},
      {"none", StepSource::kNone},
  }};
  for (const auto& [word, source] : kNames) {
    if (word == name) return source;
  }
  return std::nullopt;
}

std::string_view step_origin_name(StepOrigin origin) {
  for (const auto& [value, name] : kStepOriginNames) {
    if (value == origin) return name;
  }
  return "none";
}

std::optional<StepOrigin> step_origin_from_name(std::string_view name) {
  for (const auto& [value, word] : kStepOriginNames) {
    if (word == name) return value;
  }
  return std::nullopt;
}

}  // namespace memsnap
