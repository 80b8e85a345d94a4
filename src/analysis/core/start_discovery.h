// The allocator history's forward walk, begun before the trace is whole
// (issue 41, item 1).
//
// AllocatorHistory::derive_start needs the whole trace before its forward
// walk: which addresses the trace frees before it allocates them, and the
// dump's segments walked back over the segment entries. This walk needs
// neither. It starts from nothing and learns the state before the trace as
// the entries show it: a segment of the dump when an entry first lands in it
// (PyTorch writes the segments before the trace), a segment the trace frees
// that it never made, a block the trace frees before it allocates it. What
// it learns late, it would have needed earlier in one way only: a block held
// from before the trace bounds the free space that earlier allocations were
// carved from. So every carve, and every size the walk back would give a
// freed block, records the addresses at which a block would have changed it
// (`sensitive_`); a block from before the trace found there means the walk
// is not the derived one, and the history walks as before.
//
// When the trace ends, AllocatorHistory::adopt completes the start, the
// checkpoints and the end with what was learnt late (sizes and ranges held
// all along), checks that the start is the derived one, and takes the walk's
// peak of free memory with the same corrections.
#pragma once

#include <absl/container/btree_map.h>
#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/allocator_walk.h"
#include "memsnap/load.h"

namespace memsnap {

class StartDiscovery {
 public:
  // `dump`: the device's state at the dump; `rule`: the split rule assumed
  // (the file's settings come after its trace; adopt() checks them);
  // `begin`: the column index of the trace's first entry.
  StartDiscovery(AllocatorState dump, const SplitRule& rule, uint64_t begin);

  // Walks the rows not walked yet of those the columns hold. Does nothing
  // once the walk has given up. (The entries' pools are read when the
  // trace has ended: the reader may still be adding to their map.)
  void walk(const TraceColumns& columns);
  // Walks the trace of a model read whole (tests).
  void walk(const Snapshot& snapshot, uint64_t end);
  [[nodiscard]] bool given_up() const { return given_up_; }
  [[nodiscard]] uint64_t walked_to() const { return next_; }

 private:
  friend class AllocatorHistory;

  // A segment from before the trace, learnt at `entry`.
  struct RangeReveal {
    uint64_t entry = 0;
    uint64_t address = 0;
    MappedRange range;
  };
  // A block from before the trace, learnt at its first free (`revealed`);
  // `freed`: the free_completed that freed it (UINT64_MAX: held to the end,
  // with the dump's size), with the size the walk back gives it there.
  struct BlockReveal {
    uint64_t address = 0;
    uint64_t revealed = 0;
    uint64_t freed = UINT64_MAX;
    uint64_t size = 0;
    uint64_t requested = 0;
    HeldBlock at_start;  // as the walk back leaves it (settle())
  };
  // What the walk lacks at every position before `entry` is applied: bytes
  // reserved and held there that it learnt at that entry.
  struct Delta {
    uint64_t entry = 0;
    uint64_t reserved = 0;
    uint64_t held = 0;
  };
  // The most free memory the walk counted between two entries that taught
  // it something (the correction is the same all along such a stretch).
  struct Stretch {
    int64_t free = INT64_MIN;
    uint64_t position = 0;
    uint64_t reserved = 0;
  };
  struct Removal {
    uint64_t entry = 0;
    uint64_t address = 0;
    uint64_t size = 0;
  };
  struct Checkpoint {
    uint64_t position = 0;
    AllocatorState state;
  };

  void step(const TraceColumns& columns, uint64_t i);
  void alloc(uint64_t address, uint64_t requested, uint64_t i);
  void free_requested(uint64_t address, uint64_t i);
  void free_completed(uint64_t address, uint64_t requested, uint64_t i);
  void segment_alloc(const TraceColumns& columns, uint64_t i);
  void segment_free(const TraceColumns& columns, uint64_t i);
  // Records the entry at a block address; true when it is the first.
  bool name(uint64_t address, Action action, uint64_t i);
  // Where the segment holding address ends (at the latest): the walk's,
  // or one of the dump's learnt there, or one not met yet; false when the
  // walk has given up.
  bool locate(uint64_t address, uint64_t i, uint64_t& range_end);
  void reveal_range(uint64_t i, uint64_t address, const MappedRange& range);
  // Where the free space from address ends: the next held block, or `range_end`.
  [[nodiscard]] uint64_t free_end(uint64_t address, uint64_t range_end) const;
  // A block from before the trace, first named by a free at entry i.
  [[nodiscard]] bool may_reveal_block(uint64_t address, Action first, uint64_t i);
  // The walk is not the derived one for want of a block (or a segment) from
  // before the trace: it starts again holding that one too, a few times at
  // most (may_restart() says whether once more; else it gives up).
  void restart(uint64_t address, Action first);
  [[nodiscard]] bool may_restart();
  [[nodiscard]] bool stopped() const { return given_up_ || restart_pending_; }
  // Before a restart: every block and segment from before the trace that
  // the rows read so far show, so that one restart learns them all.
  void learn_ahead(const TraceColumns& columns);
  // Everything walked forgotten, what the restarts learnt held.
  void begin_walk();
  // The split rule chose `chosen` bytes for a request of `requested` at
  // `address` with free space up to `free_end`: where a block would have
  // chosen otherwise.
  void mark_sensitive(uint64_t address, uint64_t requested, uint64_t free_end, uint64_t chosen);
  void add_sensitive(uint64_t low, uint64_t high);
  [[nodiscard]] bool sensitive(uint64_t address) const;
  // Whether an address in (address, address + size) was named.
  [[nodiscard]] bool named_inside(uint64_t address, uint64_t size) const;
  void observe(uint64_t position);
  void checkpoint(uint64_t position);
  void give_up() { given_up_ = true; }

  // When the trace has ended, first (AllocatorHistory::adopt): whether the
  // walk's end can be the dump, block for block (cheap: a trace whose
  // allocator the split rule does not explain is refused here).
  [[nodiscard]] bool ends_on_the_dumps_blocks(const AllocatorState& dump) const;
  // Then what was held all
  // along (late_ranges_, late_blocks_, the reveals' sizes at the start);
  // false where the segments or blocks met are not derive_start's.
  [[nodiscard]] bool settle(const Snapshot& snapshot);
  // Then whether the walk is the one from derive_start's start, which it
  // writes into `start` (the checks that cost the most, after the end).
  [[nodiscard]] bool start_is_derived(AllocatorState& start) const;
  // The ranges and blocks learnt late into a state the walk passed at
  // `position` (entries applied), and the pools of the segments the trace
  // made: it then is the derived walk's.
  void complete(AllocatorState& state, uint64_t position) const;
  // No segment the trace frees, while a block from before it is held, held that block.
  [[nodiscard]] bool held_blocks_outlive_their_segments(const AllocatorState& start) const;
  // The most free memory with every stretch corrected; false when negative.
  [[nodiscard]] bool peak_free(AllocatorHistory::PeakFree& peak) const;

  AllocatorState dump_;
  SplitRule rule_;
  uint64_t begin_ = 0;
  uint64_t next_ = 0;
  bool given_up_ = false;
  // What the restarts learnt: blocks from before the trace with their first
  // entry, and segments with the entry that showed them.
  std::vector<std::pair<uint64_t, Action>> restart_blocks_;
  std::vector<RangeReveal> restart_ranges_;
  size_t restarts_ = 0;
  bool restart_pending_ = false;
  uint64_t rewalked_ = 0;  // entries walked by walks given up for a restart
  static constexpr size_t kMaxRestarts = 8;
  static constexpr uint64_t kMaxRewalked = uint64_t{1} << 21;
  AllocatorState state_;    // what the walk knows: ranges and blocks met so far
  AllocatorState initial_;  // its state at the trace's start: what restarts learnt
  uint64_t entries_ = 0;    // allocator entries walked
  // Every block address an entry names, with its first entries as
  // derive_start counts them (a hash: most entries name one named before).
  absl::flat_hash_map<uint64_t, allocator_walk::FirstEntries> named_;
  absl::btree_set<uint64_t> named_in_order_;  // the same addresses, ordered (named_inside)
  absl::btree_set<uint64_t> segment_named_;   // addresses a segment entry names
  // Block addresses met in no segment the walk knew, not in one learnt since.
  absl::btree_set<uint64_t> floating_;
  std::vector<uint64_t> segment_entries_;
  // The segment_alloc entries at each address, ascending, with their pools
  // (settle()): a segment the walk holds at a position is the latest before it.
  absl::flat_hash_map<uint64_t, std::vector<std::pair<uint64_t, PoolId>>> made_;
  std::vector<Removal> removals_;
  std::vector<RangeReveal> range_reveals_;
  std::vector<BlockReveal> block_reveals_;
  absl::flat_hash_map<uint64_t, size_t> held_reveals_;  // address -> block_reveals_, while held
  std::vector<Delta> deltas_;                           // ascending entries
  std::vector<Stretch> stretches_ = std::vector<Stretch>(1);
  bool stretch_ends_ = false;  // the entry being walked ends the stretch
  // Disjoint half-open [low, high) address intervals, by low.
  absl::btree_map<uint64_t, uint64_t> sensitive_;
  std::vector<Checkpoint> checkpoints_;
  uint64_t checkpoint_every_ = 0;
  uint64_t until_checkpoint_ = 0;
  uint64_t checkpointed_elements_ = 0;
  // Known when the trace has ended (settle()): held all along, never met.
  std::vector<std::pair<uint64_t, MappedRange>> late_ranges_;
  std::vector<std::pair<uint64_t, HeldBlock>> late_blocks_;
};

}  // namespace memsnap
