// The pieces of the allocator replay that the history's walks share with the
// start discovery (start_discovery.cc): the split rule applied to a state,
// ranges added and removed, and the first entries at a block address from
// which the start state is derived. Internal to src/analysis/core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "analysis/core/allocator_state.h"

namespace memsnap::allocator_walk {

inline uint64_t range_end(RangeMap::const_iterator range) {
  return range->first + range->second.size;
}
RangeMap::iterator range_containing(RangeMap& ranges, uint64_t address);
// Bytes free from `address` to the next held block (`next`, the first at or
// after it) or the end of its range.
uint64_t free_from(const AllocatorState& state, RangeMap::const_iterator range,
                   BlockMap::const_iterator next, uint64_t address);
// The size the walk back gives a block it puts back where `free_size` bytes
// are free: the split rule's, never past the free space.
uint64_t put_back_size(uint64_t requested, uint64_t free_size, const SplitRule& rule);
// The entry's pool (the default pool where the entry names none).
PoolId entry_pool(const Snapshot& snapshot, uint64_t i);
// The kind as a static string, so ranges need not point into a snapshot.
std::string_view kind_name(std::string_view kind);
// Adds [address, address + range.size); false (nothing added) when it
// overlaps a range. An expandable range joins the expandable ranges it
// touches, as one segment's mapped pages do.
bool add_range(AllocatorState& state, uint64_t address, MappedRange range);
// Removes [address, address + size) from the range holding it, splitting it
// when the part is in the middle (an expandable segment's unmapped pages);
// false when no range holds it or blocks were inside (dropped).
bool remove_range(AllocatorState& state, uint64_t address, uint64_t size);
// Reserved bytes no block holds.
uint64_t free_bytes(const AllocatorState& state);
// Whether every block lies inside a range. A start state where one does not
// is no walk back's (undoing the segment_alloc of the range the block is in
// later would find the block there: a misfit).
bool blocks_within_ranges(const AllocatorState& state);
// The replayed end against the dump, ranges then blocks, in address order:
// how many differ, and the first.
void compare_with_dump(const AllocatorState& dump, const AllocatorState& end, HistoryCheck& check);

// The first two alloc and free entries at one block address, in trace
// order, and whether the last is an alloc: what the start state needs to
// know of an address (AllocatorHistory::derive_start).
struct FirstEntries {
  Action first = Action::kOther;
  Action second = Action::kOther;
  uint64_t first_entry = 0;
  uint64_t second_entry = 0;
  bool twice = false;                // there is a second
  uint64_t last_alloc = UINT64_MAX;  // the last entry at the address, when it is an alloc
};

// The block an address holds before the trace, as the walk back leaves it:
// the dump's block where no entry names the address (`firsts` null) or only
// its free is requested; a block the trace frees before it allocates it,
// with size 0 (the walk back's size is known at that free) and the request
// of that free; else none (false).
bool held_at_start(const FirstEntries* firsts, const HeldBlock* dumped, const EventColumns& events,
                   HeldBlock& held);

}  // namespace memsnap::allocator_walk
