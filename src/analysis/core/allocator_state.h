// The allocator's segments and blocks at any moment of one device's trace.
//
// The dump gives the state at its end; the trace says what changed. Walking
// the trace backwards from the dump gives the state before the first entry;
// walking forwards from there gives the state after any entry. Free blocks are
// never stored: the caching allocator merges a freed block with free
// neighbours, so free space is exactly the gaps between the non-free blocks of
// a mapped range, and the state is the ranges plus the non-free blocks.
//
// Trace entries carry the requested size, not the block's: a block's size is
// the dump's where the block is live at the dump, and otherwise what the
// allocator's split rule gives (round the request up to 512 bytes; keep the
// whole free block when the rest is too small to split off). The forward walk
// re-derives every traced allocation this way, so comparing its end with the
// dump checks the rule and the trace together (HistoryCheck).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/btree_map.h>

#include "analysis/core/pytorch_allocator_policy.h"
#include "memsnap/model.h"

namespace memsnap {

// One mapped range: a segment (cudaMalloc'd), or a contiguous mapped part of
// an expandable segment. The dump lists exactly these.
struct MappedRange {
  uint64_t size = 0;
  uint64_t stream = 0;
  PoolId pool;
  // "small" or "large": the dump's segment_type, or for a segment the trace
  // made, the allocator's rule (small-pool segments are 2 MiB, large ones
  // never are); empty for an expandable range the dump lacks.
  std::string_view kind;
  bool expandable = false;
};

// A block that is not free: allocated, or freed with stream work outstanding.
struct HeldBlock {
  uint64_t size = 0;
  uint64_t requested = 0;
  BlockState state = BlockState::kActiveAllocated;
  bool size_inferred = false;  // allocated before the trace and freed in it: size by the split rule
};

// B-trees rather than std::map: the replay walks millions of entries, each a
// lookup and often an insert or erase, and a node per element made it the
// largest part of parse (std::map's node allocations and pointer chasing).
// No code holds an iterator across an insert or erase (B-tree iterators do
// not survive them).
using RangeMap = absl::btree_map<uint64_t, MappedRange>;
using BlockMap = absl::btree_map<uint64_t, HeldBlock>;

struct AllocatorState {
  RangeMap ranges;        // by address
  BlockMap blocks;        // by address
  uint64_t reserved = 0;  // sum of range sizes
  uint64_t held = 0;      // sum of block sizes (active bytes)

  // The range containing address, or ranges.end().
  [[nodiscard]] RangeMap::const_iterator range_at(uint64_t address) const;
  // The largest gap between held blocks in any range: the largest free block.
  [[nodiscard]] uint64_t largest_free() const;
  // Every block of the range at `address`, in address order, the gaps
  // between held blocks included as the free blocks they are:
  // visit(block_address, size, held) with held null for a free block.
  template <typename Visit>
  void for_each_block(uint64_t address, const MappedRange& range, Visit&& visit) const {
    const uint64_t end = address + range.size;
    uint64_t cursor = address;
    for (auto it = blocks.lower_bound(address); it != blocks.end() && it->first < end; ++it) {
      if (it->first > cursor) visit(cursor, it->first - cursor, nullptr);
      visit(it->first, it->second.size, &it->second);
      cursor = std::max(cursor, it->first + it->second.size);
    }
    if (end > cursor) visit(cursor, end - cursor, nullptr);
  }
};

// How well the trace explains the dump (the round trip dump -> back -> forward).
struct HistoryCheck {
  bool possible = false;  // the dump lists every range's blocks with their addresses
  std::string impossible_reason;
  uint64_t entries = 0;  // allocator entries walked (alloc, free_*, segment_*)
  // Entries that did not fit the state they were applied to (a free of a
  // block that is not there, an alloc outside every range, ...): a wrapped
  // ring buffer or a trace from another allocator. Back and forward walks.
  uint64_t misfits_back = 0;
  uint64_t misfits_forward = 0;
  // Before the first entry: what was already there (recording started after
  // these were made, or the ring buffer wrapped) and how many of its blocks
  // have a size from the split rule rather than from the dump or the trace.
  uint64_t ranges_at_start = 0;
  uint64_t blocks_at_start = 0;
  uint64_t inferred_sizes = 0;
  RoundingRule rounding = RoundingRule::kCuda;
  // The forward walk's end against the dump, ranges and blocks.
  bool exact = false;
  uint64_t differences = 0;
  std::string first_difference;  // empty when exact
};

// How the history finds the state before the trace's first entry.
enum class StartDerivation : uint8_t {
  // Forward first: the dump's ranges walked back over the segment entries
  // alone, the dump's blocks that no entry names, and the blocks the trace
  // frees before it allocates them, sized at that free; taken only where the
  // forward walk from there proves it the walk back's (see derive_start),
  // else the walk back below.
  kForwardFirst,
  // Always the walk back over every entry from the dump (the tests' reference).
  kWalkBack,
};

class StartDiscovery;

class AllocatorHistory {
 public:
  // With a discovery that walked the device's trace while it was read
  // (start_discovery.h), its walk is taken where it proves to be the
  // derived one; otherwise, and without one, the history walks itself.
  AllocatorHistory(const Snapshot& snapshot, int device,
                   StartDerivation derivation = StartDerivation::kForwardFirst,
                   StartDiscovery* discovery = nullptr);

  [[nodiscard]] const HistoryCheck& check() const { return check_; }
  // Whether the start state came from derive_start, not the walk back.
  [[nodiscard]] bool derived_forward() const { return derived_forward_; }
  // Whether it is the discovery's walk (then derived forward too).
  [[nodiscard]] bool discovered() const { return discovered_; }
  // Entries of the device's trace (the unit of `position`).
  [[nodiscard]] uint64_t trace_entries() const { return trace_.count(); }
  // The state after the first `position` entries of the device's trace
  // (0: before the first; trace_entries(): at the dump, as walked forward).
  [[nodiscard]] AllocatorState at(uint64_t position) const;
  [[nodiscard]] const AllocatorState& start() const { return start_; }
  // One forward walk that calls at(position, state) for each position of the
  // ascending list, with the state after that many entries (from the latest
  // checkpoint where that is nearer than walking on), until at() returns
  // false.
  template <typename At>
  void states_at(const std::vector<uint64_t>& positions, At&& at) const {
    AllocatorState state = start_;
    Walker walker{*snapshot_, rule_};
    uint64_t applied = 0;
    for (uint64_t position : positions) {
      const uint64_t target = std::min(position, trace_.count());
      if (const Checkpoint* nearest = checkpoint_before(target);
          nearest != nullptr && nearest->position > applied) {
        state = nearest->state;
        applied = nearest->position;
      }
      for (; applied < target; ++applied) walker.forward(state, trace_.begin + applied);
      if (!at(position, state)) return;
    }
  }
  // Whether `position` (entries applied) is one that walk() observes: the
  // start, or just after an allocator entry.
  [[nodiscard]] bool observed(uint64_t position) const;

  // Walks forward from the start, calling observe(position, state) after each
  // allocator entry up to `last_position`, for facts over time in one pass.
  template <typename Observe>
  void walk(uint64_t last_position, Observe&& observe) const {
    AllocatorState state = start_;
    Walker walker{*snapshot_, rule_};
    const uint64_t stop = trace_.begin + std::min(last_position, trace_.count());
    for (uint64_t i = trace_.begin; i < stop; ++i) {
      if (walker.forward(state, i)) observe(i + 1 - trace_.begin, state);
    }
  }
  // The most free (reserved, not held) memory at any moment of the forward
  // walk that checked the dump: bytes, the position, and reserved then.
  struct PeakFree {
    uint64_t bytes = 0;
    uint64_t position = 0;
    uint64_t reserved = 0;
  };
  [[nodiscard]] const PeakFree& peak_free() const { return peak_free_; }

 private:
  friend class StartDiscovery;
  // What the forward walk from a derived start keeps to settle the blocks
  // from before the trace that the trace frees first (allocator_state.cc).
  struct Settling;
  struct Walker {
    const Snapshot& snapshot;
    SplitRule rule;
    uint64_t misfits = 0;
    // Set while walking from a derived start (derive_start): each
    // free_completed also asks what size the walk back would give the block
    // it frees (the split rule on the free space the free leaves) and counts
    // those above the block's own size; the blocks from before the trace,
    // held with size 0 until then, get theirs so.
    Settling* settling = nullptr;
    uint64_t back_sizes_above = 0;
    // Returns whether entry i is an allocator entry (and was applied).
    bool forward(AllocatorState& state, uint64_t i);
    bool backward(AllocatorState& state, uint64_t i, uint64_t& inferred);

   private:
    // Each entry that does not fit the state counts as a misfit and is skipped.
    void set_block_state(AllocatorState& state, uint64_t address, BlockState to);
    // free_completed going forward, with a settling.
    void free_checking_back_size(AllocatorState& state, uint64_t i);
    // Removes the held block at address; returns whether it was there.
    bool erase_block(AllocatorState& state, uint64_t address, bool& was_inferred);
    // The segment or mapped range a segment entry adds, or removes.
    void add_entry_range(AllocatorState& state, uint64_t i, bool expandable);
    void remove_entry_range(AllocatorState& state, uint64_t i, bool whole_segment);
  };

  // The start state and the forward walk with its comparison, under one
  // rule: derived forward first when the derivation allows, else back from
  // the dump and forward again.
  void replay(const AllocatorState& dump, RoundingRule rounding);
  // The start state without the walk back over every entry (the proof that
  // it equals the walk back's is at its definition); false when the forward
  // walk from it does not bear it out, check_ then to be filled anew.
  bool derive_start(const AllocatorState& dump);
  // From start_: peak free, checkpoints, misfits and the comparison with the
  // dump. With a settling (a derived start), gives up (false) at the first
  // misfit, block the walk back would size above its own size, or block of
  // the dump carved to another size.
  bool walk_forward(const AllocatorState& dump, Settling* settling);
  // The derived walk's end: the sizes of the blocks from before the trace
  // into the start, the checkpoints and the peak of free memory; false when
  // the walk back would have shrunk one of them (an allocation inside it).
  bool settle(const Settling& settling);
  // The discovery's walk as this history's, where it is derive_start's
  // (start_discovery.cc); false, and nothing to keep, where not.
  bool adopt(StartDiscovery& discovery, const AllocatorState& dump);

  // Copies of the state the checking walk passed, every so many entries, so
  // that at(position) walks from the nearest one before it rather than from
  // the start: the fragmentation facts, oom, segments --time and replay
  // reports ask for states deep in the trace, and each walk from the start
  // cost as much as the replay itself. At most kMaxCheckpoints, and no more
  // held blocks and ranges in all than a few bytes per trace entry.
  struct Checkpoint {
    uint64_t position = 0;  // entries applied
    AllocatorState state;
  };
  static constexpr uint64_t kMaxCheckpoints = 32;
  static constexpr uint64_t kMinCheckpointEvery = uint64_t{1} << 14;
  // The latest checkpoint at or before `position`, or null.
  [[nodiscard]] const Checkpoint* checkpoint_before(uint64_t position) const;

  const Snapshot* snapshot_;
  StartDerivation derivation_;
  DeviceTrace trace_;
  SplitRule rule_;  // the file's settings; rounding as the history found it (check_.rounding)
  AllocatorState start_;
  HistoryCheck check_;
  bool derived_forward_ = false;
  bool discovered_ = false;
  PeakFree peak_free_;
  std::vector<Checkpoint> checkpoints_;  // ascending positions
};

// Free (inactive) memory over the trace: reserved bytes no block holds.
struct FragmentationHistory {
  bool known = false;  // the state could be replayed (the dump lists blocks, the trace has entries)
  bool exact = false;  // ... and the replay reproduced the dump block for block
  // When reserved memory peaked (its first moment at the peak):
  uint64_t reserved_peak = 0;
  uint64_t free_at_reserved_peak = 0;
  uint64_t largest_free_at_reserved_peak = 0;
  // The most free memory at any moment, and the state then:
  uint64_t peak_free = 0;
  uint64_t peak_free_position = 0;  // entries of the device's trace applied (0: before the first)
  uint64_t reserved_at_peak_free = 0;
  uint64_t largest_free_at_peak_free = 0;
};
// reserved_peak_position: entries applied when reserved memory first peaked.
FragmentationHistory fragmentation_history(const AllocatorHistory& history,
                                           uint64_t reserved_peak_position);

// The dump's ranges and held blocks of one device.
AllocatorState state_at_dump(const Snapshot& snapshot, int device);

}  // namespace memsnap
