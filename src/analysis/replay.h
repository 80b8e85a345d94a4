// Replay of one device's trace: one linear pass over the event columns.
#pragma once

#include <cstdint>
#include <limits>

#include <absl/container/flat_hash_map.h>

#include "snapshot/model.h"

namespace memsnap {

// Two's complement arithmetic for byte counts that hostile files may push
// past int64: wraps instead of being undefined.
inline int64_t add_bytes(int64_t total, uint64_t bytes) {
  return static_cast<int64_t>(static_cast<uint64_t>(total) + bytes);
}
inline int64_t sub_bytes(int64_t total, uint64_t bytes) {
  return static_cast<int64_t>(static_cast<uint64_t>(total) - bytes);
}

constexpr uint64_t kNoEvent = std::numeric_limits<uint64_t>::max();

struct LiveAllocation {
  uint64_t size = 0;
  StackId stack;
  uint64_t event = 0;  // index of the alloc in the model's columns
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

// The DESIGN.md replay: alloc adds and records by address (replacing a live
// one), free_completed subtracts the recorded size or, if unknown, its own size
// and counts as unmatched; other actions leave the delta alone.
class Replay {
 public:
  explicit Replay(const Snapshot& snapshot) : snapshot_(snapshot) {}

  // Applies events [from, to) of the model's columns.
  void apply(uint64_t from, uint64_t to);
  void apply_one(uint64_t index);

  [[nodiscard]] const ReplayTotals& totals() const { return totals_; }
  [[nodiscard]] const LiveSet& live() const { return live_; }
  [[nodiscard]] int64_t delta() const { return totals_.end_delta; }

 private:
  const Snapshot& snapshot_;
  LiveSet live_;
  ReplayTotals totals_;
};

// Replays a whole device trace.
ReplayTotals replay_device(const Snapshot& snapshot, const DeviceTrace& trace);

}  // namespace memsnap
