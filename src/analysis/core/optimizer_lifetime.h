// The trace's allocations against the optimizer's steps: which were made in
// a step and freed in it (the step's temporaries, such as the foreach
// intermediates of torch's Adam), which were made in a step and outlive it
// (optimizer state), and which lived across a step's start and were freed
// inside it (state that the step replaces, as a user's optimizer does when it
// assigns new moments each step).
//
// A step is a window of trace entries:
// - where the device has `Optimizer.step#...` annotations (PyTorch's
//   optimizer hooks record one per step() while a profiler or Bridge's
//   external annotations run), the entries timed between a START and its END;
// - else a run of entries inside torch/optim's code (OptimizerStacks, so a
//   user's subclass run through Optimizer.step's wrapper counts): it begins
//   at the first allocation whose stack passes through torch/optim/ and
//   ends at the next allocation that does not, or at a free whose frames are
//   the freeing code's (they differ from its allocation's) outside it. Frees
//   whose frames may be their allocation's say nothing of where the code was
//   and leave the window as it is.
// One replay of each device's trace finds them all, on first need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "memsnap/model.h"

namespace memsnap {

// A stack that passes through torch.optim's code, zero_grad aside (it frees
// gradients; it does not update anything), lr_scheduler aside (it runs
// between steps).
class OptimizerStacks {
 public:
  explicit OptimizerStacks(const Snapshot& snapshot)
      : snapshot_(snapshot), known_(snapshot.stacks.size() + 1, 0) {}
  bool contains(StackId stack);

 private:
  [[nodiscard]] bool inside_optimizer(StackId stack) const;
  const Snapshot& snapshot_;
  std::vector<uint8_t> known_;  // by stack id: 0 not looked at, 1 inside, 2 not
};

// How an allocation's life meets the optimizer's steps.
enum class StepLifetime : uint8_t {
  kNone,              // made and freed outside every step, or no step at all
  kFreedInItsStep,    // made in a step, freed in the same step
  kOutlivesItsStep,   // made in a step, freed after it ended (or never, in the trace)
  kFreedInLaterStep,  // made before a step began, freed inside it
};

class OptimizerLifetimes {
 public:
  explicit OptimizerLifetimes(const Snapshot& snapshot);
  // Whether any device's trace has a step.
  [[nodiscard]] bool any_step() const { return steps_ > 0; }
  // The allocation made by trace entry `alloc_event`.
  [[nodiscard]] StepLifetime of_allocation(uint64_t alloc_event) const;
  // Whether trace entry `free_event`, a free of memory from before the trace,
  // lies inside a step that began after the trace's first entry: the memory
  // lived across the step's start.
  [[nodiscard]] bool freed_across_step_start(uint64_t free_event) const {
    return before_trace_freed_in_step_.contains(free_event);
  }

 private:
  uint64_t steps_ = 0;
  absl::flat_hash_map<uint64_t, StepLifetime> by_allocation_;  // only where not kNone
  absl::flat_hash_set<uint64_t> before_trace_freed_in_step_;
};

}  // namespace memsnap
