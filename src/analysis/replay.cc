#include "analysis/replay.h"

namespace memsnap {

void Replay::apply_one(uint64_t index) {
  const EventColumns& events = snapshot_.events;
  switch (events.action[index]) {
    case Action::kAlloc: {
      uint64_t size = events.size[index];
      uint64_t addr = events.addr[index];
      ++totals_.alloc_count;
      totals_.alloc_bytes += size;
      totals_.end_delta = add_bytes(totals_.end_delta, size);
      auto [it, inserted] = live_.try_emplace(addr);
      if (!inserted) {
        // Address reuse without a free in the trace: the new block replaces it.
        totals_.live_bytes_at_end -= it->second.size;
      }
      it->second = LiveAllocation{size, events.stack[index], index};
      totals_.live_bytes_at_end += size;
      if (totals_.end_delta > totals_.peak_delta) {
        totals_.peak_delta = totals_.end_delta;
        totals_.peak_event = index;
      }
      break;
    }
    case Action::kFreeCompleted: {
      ++totals_.free_count;
      auto found = live_.find(events.addr[index]);
      if (found != live_.end()) {
        totals_.end_delta = sub_bytes(totals_.end_delta, found->second.size);
        totals_.live_bytes_at_end -= found->second.size;
        live_.erase(found);
      } else {
        totals_.end_delta = sub_bytes(totals_.end_delta, events.size[index]);
        ++totals_.unmatched_free_count;
        totals_.unmatched_free_bytes += events.size[index];
      }
      break;
    }
    default: break;
  }
  totals_.live_count_at_end = live_.size();
}

void Replay::apply(uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i) apply_one(i);
}

ReplayTotals replay_device(const Snapshot& snapshot, const DeviceTrace& trace) {
  Replay replay(snapshot);
  replay.apply(trace.begin, trace.end);
  return replay.totals();
}

}  // namespace memsnap
