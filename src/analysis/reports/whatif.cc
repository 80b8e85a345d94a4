#include "analysis/reports/whatif.h"

#include <algorithm>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/caching_allocator.h"

namespace memsnap {
namespace {

using Parting = SegmentCheck::Parting;

// Addresses for segments the file did not record: above every address a
// 64-bit device pointer takes, so that they never meet a recorded one.
class UnrecordedAddresses {
 public:
  uint64_t next(uint64_t span) {
    const uint64_t address = next_;
    next_ += (span + kAlign - 1) / kAlign * kAlign;
    return address;
  }

 private:
  static constexpr uint64_t kAlign = uint64_t{2} << 20;
  uint64_t next_ = uint64_t{0xF} << 60;
};

// The trace's pool of an entry (recent PyTorch writes it on each entry).
PoolId pool_of(const EventColumns& events, uint64_t i) {
  auto found = events.pool_id.find(i);
  return found == events.pool_id.end() ? PoolId{} : found->second;
}

// Segments and blocks on one side only (or of another size there).
template <typename Map>
uint64_t differing(const Map& a, const Map& b) {
  uint64_t count = 0;
  for (const auto& [address, value] : a) {
    auto found = b.find(address);
    if (found == b.end() || found->second.size != value.size) ++count;
  }
  for (const auto& [address, value] : b) {
    if (!a.contains(address)) ++count;
  }
  return count;
}

// Whether the device's allocator used expandable segments: the file's
// settings, or for files written before allocator_settings existed, its
// pages (a mapped range in the dump or in the trace).
bool uses_expandable_segments(const FileAnalysis& file) {
  const Snapshot& snapshot = file.snapshot();
  return snapshot.allocator_settings.expandable_segments.value_or(false) ||
         std::any_of(
             snapshot.segments.begin(), snapshot.segments.end(),
             [&](const Segment& s) { return s.device == file.device() && s.is_expandable; }) ||
         snapshot.count_of(file.trace(), Action::kSegmentMap) > 0;
}

// One walk of the trace with the model beside it: each entry applied to the
// model as the file says it happened, and what the model did compared.
class Checker {
 public:
  Checker(const FileAnalysis& file, const AllocatorHistory& history, RoundingRule rounding)
      : file_(file), events_(file.snapshot().events), model_(settings(history, rounding)) {
    for (const auto& [address, block] : model_.load(history.start())) live_[address] = block;
    recorded_reserved_ = model_.reserved();
    out_.peak_reserved_recorded = recorded_reserved_;
    out_.peak_reserved_model = model_.reserved();
  }

  SegmentCheck run() {
    const DeviceTrace& trace = file_.trace();
    for (uint64_t i = trace.begin; i < trace.end; ++i) {
      const uint64_t position = i - trace.begin;
      switch (events_.action[i]) {
        case Action::kSegmentAlloc:
        case Action::kSegmentMap: reserved(i); break;
        case Action::kSegmentFree:
        case Action::kSegmentUnmap: released(i, position); break;
        case Action::kAlloc: allocated(i, position); break;
        case Action::kFreeCompleted: freed(i); break;
        case Action::kOom: unexplained(position); break;
        default: break;
      }
    }
    unexplained(trace.count());
    const AllocatorState end = model_.state();
    const AllocatorState dump = state_at_dump(file_.snapshot(), file_.device());
    out_.end_segments_differing = differing(end.ranges, dump.ranges);
    out_.end_blocks_differing = differing(end.blocks, dump.blocks);
    return std::move(out_);
  }

 private:
  struct Recorded {
    uint64_t address;
    uint64_t size;
    bool used;
  };

  AllocatorModelSettings settings(const AllocatorHistory& history, RoundingRule rounding) {
    const Snapshot& snapshot = file_.snapshot();
    out_.file = file_.path();
    out_.device = file_.device();
    out_.possible = true;
    out_.rounding = rounding;
    out_.segments_at_start = history.check().ranges_at_start;
    out_.blocks_at_start = history.check().blocks_at_start;
    out_.inferred_sizes = history.check().inferred_sizes;
    AllocatorModelSettings settings;
    settings.split = split_rule_from_settings(snapshot.allocator_settings);
    settings.split.rounding = rounding;
    out_.max_split_size = settings.split.max_split_size;
    out_.expandable = uses_expandable_segments(file_);
    settings.split.expandable = out_.expandable;
    return settings;
  }

  void diverge(const SegmentCheck::Divergence& divergence) {
    if (out_.divergences++ == 0) out_.first_divergence = divergence;
  }

  // A segment the file reserved: the model's next request must make it.
  void reserved(uint64_t i) {
    ++out_.recorded_reserves;
    recorded_reserved_ += events_.size[i];
    out_.peak_reserved_recorded = std::max(out_.peak_reserved_recorded, recorded_reserved_);
    pending_.push_back({events_.addr[i], events_.size[i], false});
  }

  // A segment the file released (empty_cache, or before a retry): followed.
  void released(uint64_t i, uint64_t position) {
    ++out_.recorded_releases;
    recorded_reserved_ -= std::min(recorded_reserved_, events_.size[i]);
    made_.clear();
    const bool followed = events_.action[i] == Action::kSegmentFree
                              ? model_.release_segment(events_.addr[i], made_)
                              : model_.unmap_range(events_.addr[i], events_.size[i], made_);
    if (followed) {
      ++out_.followed_releases;
    } else {
      diverge({.parting = Parting::kRelease,
               .position = position,
               .size = events_.size[i],
               .file_address = events_.addr[i]});
    }
  }

  // Segments the file reserved since the last request that the model did not.
  void unexplained(uint64_t position) {
    for (const Recorded& r : pending_) {
      if (!r.used) {
        diverge({.parting = Parting::kFileReserves,
                 .position = position,
                 .size = r.size,
                 .file_address = r.address});
      }
    }
    pending_.clear();
  }

  // The model's segment events for a request against the file's.
  void compare_reserves(uint64_t i, uint64_t position) {
    for (const ModelSegmentEvent& event : made_) {
      if (!event.reserved) continue;
      ++out_.model_reserves;
      auto recorded = std::find_if(pending_.begin(), pending_.end(), [&](const Recorded& r) {
        return !r.used && r.address == event.address && r.size == event.size;
      });
      if (recorded != pending_.end()) {
        recorded->used = true;
        ++out_.matched_reserves;
      } else {
        diverge({.parting = Parting::kModelReserves,
                 .position = position,
                 .size = event.size,
                 .request = events_.size[i]});
      }
    }
    unexplained(position);
  }

  void allocated(uint64_t i, uint64_t position) {
    ++out_.allocs;
    made_.clear();
    // A new segment takes the address of a segment the file reserved for
    // this request with the same size.
    const auto address_of = [&](uint64_t size, uint64_t span) {
      for (const Recorded& r : pending_) {
        if (!r.used && r.size == size) return r.address;
      }
      return unrecorded_.next(span);
    };
    const uint64_t stream = events_.stream[i];
    const PoolId pool = pool_of(events_, i);
    std::optional<ModelBlockId> block =
        model_.malloc(events_.size[i], stream, pool, address_of, made_);
    compare_reserves(i, position);
    out_.peak_reserved_model = std::max(out_.peak_reserved_model, model_.reserved());
    if (!block) return;  // no capacity limit in the check: never
    if (model_.address_of(*block) == events_.addr[i]) {
      ++out_.allocs_at_recorded_address;
    } else {
      diverge({.parting = Parting::kAddress,
               .position = position,
               .size = events_.size[i],
               .file_address = events_.addr[i],
               .model_address = model_.address_of(*block)});
      // Follow the file where it can, so that one placement the model got
      // otherwise (from a state before the trace that was inferred, say)
      // does not part everything after it.
      if (made_.empty()) {
        model_.free(*block);
        block = model_.take_at(events_.addr[i], events_.size[i], stream, pool);
        if (block) {
          ++out_.followed_placements;
        } else {
          block = model_.malloc(events_.size[i], stream, pool, address_of, made_);
        }
      }
    }
    if (!block) return;
    live_.insert_or_assign(events_.addr[i], *block);  // a reused live address loses the old one
  }

  void freed(uint64_t i) {
    auto found = live_.find(events_.addr[i]);
    if (found == live_.end()) {
      ++out_.unknown_frees;
      return;
    }
    model_.free(found->second);
    live_.erase(found);
  }

  const FileAnalysis& file_;
  const EventColumns& events_;
  SegmentCheck out_;
  AllocatorModel model_;
  absl::flat_hash_map<uint64_t, ModelBlockId> live_;  // trace address -> the model's block
  std::vector<Recorded> pending_;  // segments the file reserved since the last request
  std::vector<ModelSegmentEvent> made_;
  UnrecordedAddresses unrecorded_;
  uint64_t recorded_reserved_ = 0;
};

}  // namespace

SegmentCheck check_recorded_segments(const FileAnalysis& file) {
  const AllocatorHistory* history = file.allocator_history();
  if (history == nullptr || !history->check().possible) {
    SegmentCheck out;
    out.file = file.path();
    out.device = file.device();
    out.impossible_reason = history == nullptr ? "the file has no trace for this device"
                                               : history->check().impossible_reason;
    return out;
  }
  // The rounding the history found first; when the model parts from the
  // file under it, the other one too (torch_npu's allocator pads each
  // request by 32 bytes, which a dump does not always show), keeping the
  // closer.
  SegmentCheck found = Checker(file, *history, history->check().rounding).run();
  if (found.divergences == 0) return found;
  const RoundingRule other =
      history->check().rounding == RoundingRule::kCuda ? RoundingRule::kNpu : RoundingRule::kCuda;
  SegmentCheck second = Checker(file, *history, other).run();
  return second.divergences < found.divergences ? second : found;
}

}  // namespace memsnap
