#include "analysis/core/optimizer_lifetime.h"

#include <algorithm>
#include <string>

#include "memsnap/replay.h"

namespace memsnap {

bool OptimizerStacks::contains(StackId stack) {
  if (!stack.valid()) return false;
  if (stack.value >= known_.size()) known_.resize(stack.value + 1, 0);
  uint8_t& known = known_[stack.value];
  if (known == 0) known = inside_optimizer(stack) ? 1 : 2;
  return known == 1;
}

bool OptimizerStacks::inside_optimizer(StackId stack) const {
  bool inside = false;
  for (FrameId id : snapshot_.stacks.get(stack)) {
    const Frame& frame = snapshot_.frames.get(id);
    if (snapshot_.strings.get(frame.name) == "zero_grad") return false;
    std::string path(snapshot_.strings.get(frame.filename));
    std::replace(path.begin(), path.end(), '\\', '/');
    if (path.find("torch/optim/") != std::string::npos &&
        path.find("lr_scheduler") == std::string::npos) {
      inside = true;
    }
  }
  return inside;
}

namespace {

constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";

// The Optimizer.step#... marks of one device: sorted START and END times.
struct StepMarks {
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;
  // The step open at `time_us`: its START's ordinal from 1, 0 when none is.
  [[nodiscard]] uint64_t open_at(int64_t time_us) const {
    if (time_us <= 0) return 0;
    const auto started = static_cast<uint64_t>(
        std::upper_bound(starts.begin(), starts.end(), time_us) - starts.begin());
    const auto ended =
        static_cast<uint64_t>(std::upper_bound(ends.begin(), ends.end(), time_us) - ends.begin());
    return started > ended ? started : 0;
  }
};

StepMarks step_marks(const Snapshot& snapshot, int device) {
  StepMarks marks;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device || note.time_us <= 0 ||
        !snapshot.strings.get(note.name).starts_with(kOptimizerStepPrefix)) {
      continue;
    }
    if (note.stage == Stage::kStart) marks.starts.push_back(note.time_us);
    if (note.stage == Stage::kEnd) marks.ends.push_back(note.time_us);
  }
  std::sort(marks.starts.begin(), marks.starts.end());
  std::sort(marks.ends.begin(), marks.ends.end());
  return marks;
}

// A replay observer: follows which step each entry lies in and sorts every
// allocation's life against the steps.
class StepWalk {
 public:
  StepWalk(const Snapshot& snapshot, const DeviceTrace& trace, OptimizerStacks& optimizer,
           absl::flat_hash_map<uint64_t, StepLifetime>& by_allocation,
           absl::flat_hash_set<uint64_t>& before_trace_freed_in_step)
      : events_(snapshot.events),
        marks_(step_marks(snapshot, trace.device)),
        optimizer_(optimizer),
        by_allocation_(by_allocation),
        before_trace_freed_in_step_(before_trace_freed_in_step) {
    for (uint64_t i = trace.begin; i < trace.end && first_time_ == 0; ++i)
      first_time_ = events_.time_us[i];
  }

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    if (by_marks()) {
      enter(marks_.open_at(events_.time_us[event]));
    } else {
      enter(optimizer_.contains(added.stack) ? (step_ != 0 ? step_ : opened_ + 1) : 0);
    }
    if (step_ != 0) step_of_live_[event] = step_;
    after_entry();
  }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) {
    // Its free never came: it outlives whatever step made it.
    if (step_of_live_.erase(replaced.event) != 0)
      by_allocation_[replaced.event] = StepLifetime::kOutlivesItsStep;
  }
  void on_free(uint64_t event, const LiveAllocation& freed) {
    const StackId at_free = events_.stack[event];
    if (by_marks()) {
      enter(marks_.open_at(events_.time_us[event]));
    } else if (at_free.valid() && at_free != freed.stack) {
      // The freeing code's own frames: they say where the code is.
      const bool inside = optimizer_.contains(at_free);
      enter(inside ? (step_ != 0 ? step_ : opened_ + 1) : 0);
    }
    const auto made = step_of_live_.find(freed.event);
    if (made != step_of_live_.end()) {
      by_allocation_[freed.event] =
          made->second == step_ ? StepLifetime::kFreedInItsStep : StepLifetime::kOutlivesItsStep;
      step_of_live_.erase(made);
    } else if (step_ != 0) {
      by_allocation_[freed.event] = StepLifetime::kFreedInLaterStep;
    }
    after_entry();
  }
  void on_unmatched_free(uint64_t event, uint64_t /*size*/) {
    if (by_marks()) {
      enter(marks_.open_at(events_.time_us[event]));
    } else if (optimizer_.contains(events_.stack[event])) {
      enter(step_ != 0 ? step_ : opened_ + 1);
    }
    if (step_ != 0 && step_began_in_trace_) before_trace_freed_in_step_.insert(event);
    after_entry();
  }
  void finish() {
    for (const auto& [event, step] : step_of_live_)
      by_allocation_[event] = StepLifetime::kOutlivesItsStep;
  }
  [[nodiscard]] uint64_t steps() const { return opened_; }

 private:
  [[nodiscard]] bool by_marks() const { return !marks_.starts.empty(); }
  // The entry the walk is at lies in step `step` (0: outside every step).
  void enter(uint64_t step) {
    if (step == step_) return;
    step_ = step;
    if (step == 0) return;
    opened_ = std::max(opened_, step);
    step_began_in_trace_ =
        by_marks() ? marks_.starts[step - 1] > first_time_ && first_time_ > 0 : outside_seen_;
  }
  // After each entry: whether the walk has met an entry outside every step
  // (then a step that opens later began in the trace).
  void after_entry() { outside_seen_ = outside_seen_ || step_ == 0; }

  const EventColumns& events_;
  StepMarks marks_;
  OptimizerStacks& optimizer_;
  absl::flat_hash_map<uint64_t, StepLifetime>& by_allocation_;
  absl::flat_hash_set<uint64_t>& before_trace_freed_in_step_;
  int64_t first_time_ = 0;
  uint64_t step_ = 0;    // the step the walk is in (0: none)
  uint64_t opened_ = 0;  // the steps opened so far, numbered from 1
  bool step_began_in_trace_ = false;
  bool outside_seen_ = false;
  absl::flat_hash_map<uint64_t, uint64_t> step_of_live_;  // live allocation made in a step
};

}  // namespace

OptimizerLifetimes::OptimizerLifetimes(const Snapshot& snapshot) {
  OptimizerStacks optimizer(snapshot);
  for (const DeviceTrace& trace : snapshot.devices) {
    if (trace.end <= trace.begin) continue;
    StepWalk walk(snapshot, trace, optimizer, by_allocation_, before_trace_freed_in_step_);
    Replay replay(snapshot);
    replay.run(trace.begin, trace.end, walk);
    walk.finish();
    steps_ += walk.steps();
  }
}

StepLifetime OptimizerLifetimes::of_allocation(uint64_t alloc_event) const {
  const auto found = by_allocation_.find(alloc_event);
  return found == by_allocation_.end() ? StepLifetime::kNone : found->second;
}

}  // namespace memsnap
