// The replay core: one linear pass over one device's trace, the only place
// where allocs and frees are matched. Everything that needs to know what was
// live when (totals, step windows, live memory by source, the timeline,
// allocator state) observes this one loop instead of writing its own.
#pragma once

#include <cstdint>
#include <limits>

#include <absl/container/flat_hash_map.h>

#include "memsnap/bytes.h"
#include "memsnap/model.h"

namespace memsnap {

constexpr uint64_t kNoEvent = std::numeric_limits<uint64_t>::max();

struct LiveAllocation {
  uint64_t size = 0;
  StackId stack;
  uint64_t event = 0;    // index of its alloc in the model's columns
  uint64_t ordinal = 0;  // its alloc was this replay's n-th (from 0)
};

using LiveSet = absl::flat_hash_map<uint64_t, LiveAllocation>;

struct ReplayTotals {
  uint64_t alloc_count = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_count = 0;  // free_completed entries
  uint64_t unmatched_free_count = 0;
  uint64_t unmatched_free_bytes = 0;
  int64_t end_delta = 0;
  int64_t peak_delta = 0;          // starts at 0
  uint64_t peak_event = kNoEvent;  // model index of the event that reached the peak
  uint64_t live_count_at_end = 0;
  uint64_t live_bytes_at_end = 0;
};

// The replay of docs/design.md ("Semantics"): alloc adds and records by address (replacing a live
// one), free_completed subtracts the recorded size or, if unknown, its own size
// and counts as unmatched; other actions leave the delta alone.
//
// Observers are plain objects with any subset of these members, called after
// the replay has applied the event (delta() is the delta after it):
//   on_alloc(uint64_t event, const LiveAllocation& added)
//   on_replace(uint64_t event, const LiveAllocation& replaced)  // before on_alloc of
//                                        // an alloc at an address that was still live
//   on_free(uint64_t event, const LiveAllocation& freed)
//   on_unmatched_free(uint64_t event, uint64_t size)
//   on_other(uint64_t event)             // every other action: segments, oom, ...
// They are template parameters, so a missing member costs nothing and the
// calls inline into the loop.
class Replay {
 public:
  explicit Replay(const Snapshot& snapshot) : snapshot_(&snapshot) {}

  template <typename... Observers>
  void apply(uint64_t index, Observers&... observers);

  // Applies events [from, to) of the model's columns.
  template <typename... Observers>
  void run(uint64_t from, uint64_t to, Observers&... observers) {
    for (uint64_t i = from; i < to; ++i) apply(i, observers...);
  }

  [[nodiscard]] ReplayTotals totals() const {
    ReplayTotals totals = totals_;
    totals.live_count_at_end = live_.size();
    return totals;
  }
  [[nodiscard]] const LiveSet& live() const { return live_; }
  [[nodiscard]] int64_t delta() const { return totals_.end_delta; }

 private:
  const Snapshot* snapshot_;
  LiveSet live_;
  ReplayTotals totals_;
};

// Replays a whole device trace.
ReplayTotals replay_device(const Snapshot& snapshot, const DeviceTrace& trace);

template <typename... Observers>
void Replay::apply(uint64_t index, Observers&... observers) {
  const EventColumns& events = snapshot_->events;
  switch (events.action[index]) {
    case Action::kAlloc: {
      uint64_t size = events.size[index];
      LiveAllocation added{size, events.stack[index], index, totals_.alloc_count};
      ++totals_.alloc_count;
      totals_.alloc_bytes += size;
      totals_.end_delta = add_bytes(totals_.end_delta, size);
      auto [it, inserted] = live_.try_emplace(events.addr[index], added);
      if (!inserted) {
        // Address reuse without a free in the trace: the new block replaces it.
        LiveAllocation replaced = it->second;
        it->second = added;
        totals_.live_bytes_at_end -= replaced.size;
        (
            [&] {
              if constexpr (requires { observers.on_replace(index, replaced); })
                observers.on_replace(index, replaced);
            }(),
            ...);
      }
      totals_.live_bytes_at_end += size;
      if (totals_.end_delta > totals_.peak_delta) {
        totals_.peak_delta = totals_.end_delta;
        totals_.peak_event = index;
      }
      (
          [&] {
            if constexpr (requires { observers.on_alloc(index, added); })
              observers.on_alloc(index, added);
          }(),
          ...);
      break;
    }
    case Action::kFreeCompleted: {
      ++totals_.free_count;
      auto found = live_.find(events.addr[index]);
      if (found != live_.end()) {
        LiveAllocation freed = found->second;
        live_.erase(found);
        totals_.end_delta = sub_bytes(totals_.end_delta, freed.size);
        totals_.live_bytes_at_end -= freed.size;
        (
            [&] {
              if constexpr (requires { observers.on_free(index, freed); })
                observers.on_free(index, freed);
            }(),
            ...);
      } else {
        uint64_t size = events.size[index];
        totals_.end_delta = sub_bytes(totals_.end_delta, size);
        ++totals_.unmatched_free_count;
        totals_.unmatched_free_bytes += size;
        (
            [&] {
              if constexpr (requires { observers.on_unmatched_free(index, size); })
                observers.on_unmatched_free(index, size);
            }(),
            ...);
      }
      break;
    }
    default:
      (
          [&] {
            if constexpr (requires { observers.on_other(index); }) observers.on_other(index);
          }(),
          ...);
      break;
  }
}

}  // namespace memsnap
