#include "analysis/core/allocator_state.h"
#include "analysis/core/allocator_walk.h"
#include "analysis/core/pytorch_allocator_policy.h"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>
#include <algorithm>
#include <bit>
#include <iterator>

#include "memsnap/bytes.h"

namespace memsnap {

namespace allocator_walk {

RangeMap::iterator range_containing(RangeMap& ranges, uint64_t address) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return address < it->first + it->second.size ? it : ranges.end();
}

uint64_t free_from(const AllocatorState& state, RangeMap::const_iterator range,
                   BlockMap::const_iterator next, uint64_t address) {
  const uint64_t end = range_end(range);
  return (next == state.blocks.end() ? end : std::min(end, next->first)) - address;
}

uint64_t put_back_size(uint64_t requested, uint64_t free_size, const SplitRule& rule) {
  return std::min(pytorch::carved_block_size(requested, free_size, rule), free_size);
}

PoolId entry_pool(const Snapshot& snapshot, uint64_t i) {
  auto it = snapshot.events.pool_id.find(i);
  return it == snapshot.events.pool_id.end() ? PoolId{} : it->second;
}

std::string_view kind_name(std::string_view kind) {
  if (kind == "small") return "small";
  if (kind == "large") return "large";
  return {};
}

bool same_owner(const MappedRange& a, const MappedRange& b) {
  return a.expandable && b.expandable && a.stream == b.stream && a.pool.first == b.pool.first &&
         a.pool.second == b.pool.second;
}

// Adds [address, address + range.size); an expandable range joins the
// expandable ranges it touches, as one segment's mapped pages do.
bool add_range(AllocatorState& state, uint64_t address, MappedRange range) {
  RangeMap& ranges = state.ranges;
  auto next = ranges.lower_bound(address);
  if (next != ranges.end() && next->first < address + range.size) return false;
  if (next != ranges.begin()) {
    auto prev = std::prev(next);
    if (range_end(prev) > address) return false;
  }
  state.reserved += range.size;
  if (next != ranges.end() && next->first == address + range.size &&
      same_owner(range, next->second)) {
    if (range.kind.empty()) range.kind = next->second.kind;
    range.size += next->second.size;
    next = ranges.erase(next);
  }
  if (next != ranges.begin()) {
    auto prev = std::prev(next);
    if (range_end(prev) == address && same_owner(prev->second, range)) {
      prev->second.size += range.size;
      return true;
    }
  }
  ranges.emplace(address, range);
  return true;
}

// Removes [address, address + size) from the range holding it, splitting it
// when the part is in the middle (an expandable segment's unmapped pages).
bool remove_range(AllocatorState& state, uint64_t address, uint64_t size) {
  auto it = range_containing(state.ranges, address);
  if (it == state.ranges.end() || address + size > range_end(it)) return false;
  const uint64_t start = it->first;
  const uint64_t end = range_end(it);
  MappedRange rest = it->second;
  state.ranges.erase(it);
  if (start < address) {
    MappedRange head = rest;
    head.size = address - start;
    state.ranges.emplace(start, head);
  }
  if (address + size < end) {
    rest.size = end - (address + size);
    state.ranges.emplace(address + size, rest);
  }
  state.reserved -= size;
  // Blocks inside the removed part would be a misfit; drop them so the state
  // stays well formed.
  bool clean = true;
  for (auto b = state.blocks.lower_bound(address);
       b != state.blocks.end() && b->first < address + size;) {
    clean = false;
    state.held -= b->second.size;
    b = state.blocks.erase(b);
  }
  return clean;
}

uint64_t free_bytes(const AllocatorState& state) {
  return state.reserved > state.held ? state.reserved - state.held : 0;
}

bool blocks_within_ranges(const AllocatorState& state) {
  return std::all_of(state.blocks.begin(), state.blocks.end(), [&state](const auto& block) {
    auto range = state.range_at(block.first);
    return range != state.ranges.end() && block.second.size <= range_end(range) - block.first;
  });
}

}  // namespace allocator_walk

using namespace allocator_walk;  // NOLINT(google-build-using-namespace): defined here

namespace {

// torch_npu rounds request + 32 bytes, so under its rule no block is smaller
// than that rounded up; one such block in the dump rules it out cheaply.
bool npu_rounding_possible(const AllocatorState& dump) {
  return std::all_of(dump.blocks.begin(), dump.blocks.end(), [](const auto& entry) {
    const HeldBlock& block = entry.second;
    return block.requested == 0 ||
           block.size >=
               pytorch::carved_block_size(block.requested, 0, SplitRule{RoundingRule::kNpu});
  });
}

std::string describe_block(uint64_t address, const HeldBlock* block) {
  if (block == nullptr) return fmt::format("no block at {:#x}", address);
  return fmt::format("{} block at {:#x} of {} bytes (requested {})",
                     block->state == BlockState::kActivePendingFree ? "awaiting-free" : "allocated",
                     address, block->size, block->requested);
}

}  // namespace

RangeMap::const_iterator AllocatorState::range_at(uint64_t address) const {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return address < range_end(it) ? it : ranges.end();
}

uint64_t AllocatorState::largest_free() const {
  uint64_t largest = 0;
  for (const auto& [address, range] : ranges) {
    for_each_block(address, range, [&](uint64_t, uint64_t size, const HeldBlock* block) {
      if (block == nullptr) largest = std::max(largest, size);
    });
  }
  return largest;
}

AllocatorState state_at_dump(const Snapshot& snapshot, int device) {
  AllocatorState state;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    MappedRange range;
    range.size = segment.total_size;
    range.stream = segment.stream;
    range.pool = PoolId{segment.pool_id_first, segment.pool_id_second};
    range.kind = kind_name(snapshot.strings.get(segment.segment_type));
    range.expandable = segment.is_expandable;
    state.ranges.emplace(segment.address, range);
    state.reserved += segment.total_size;
    for (const Block& block : snapshot.blocks_of(segment)) {
      if (block.state != BlockState::kActiveAllocated &&
          block.state != BlockState::kActivePendingFree) {
        continue;
      }
      state.blocks[block.address] = HeldBlock{block.size, block.requested_size, block.state, false};
      state.held += block.size;
    }
  }
  return state;
}

struct AllocatorHistory::Settling {
  // A block from before the trace that the trace frees first: where, the
  // size the walk back gives it (the split rule on the free space at that
  // free), and the free's entry (it was held at every position before).
  struct Freed {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t entry = 0;
  };
  std::vector<Freed> freed;
  // Allocations placed just after such a block while it was held: (its
  // address, theirs). One inside its settled size would have shrunk it.
  std::vector<std::pair<uint64_t, uint64_t>> placed_after;
  // The most free memory as this walk counts it (those blocks at size 0),
  // first moment, between one of those frees and the next: the blocks still
  // held then are the same all along, so one correction serves the stretch.
  struct Peak {
    int64_t free = INT64_MIN;
    uint64_t position = 0;
    uint64_t reserved = 0;
  };
  std::vector<Peak> peaks = std::vector<Peak>(1);
  // The allocs that make blocks of the dump, by entry: each must carve the
  // dump's size, or the end differs from the dump (known then, not at the end).
  struct Lasting {
    uint64_t entry = 0;
    uint64_t address = 0;
    uint64_t size = 0;
  };
  std::vector<Lasting> lasting;
  [[nodiscard]] bool lasts_as_dumped(const AllocatorState& state, uint64_t entry,
                                     size_t& next) const {
    for (; next < lasting.size() && lasting[next].entry <= entry; ++next) {
      auto it = state.blocks.find(lasting[next].address);
      if (it == state.blocks.end() || it->second.size != lasting[next].size) return false;
    }
    return true;
  }
  void observe(const AllocatorState& state, uint64_t position) {
    const auto free = static_cast<int64_t>(state.reserved) - static_cast<int64_t>(state.held);
    if (free > peaks.back().free) peaks.back() = Peak{free, position, state.reserved};
  }
};

void AllocatorHistory::Walker::set_block_state(AllocatorState& state, uint64_t address,
                                               BlockState to) {
  auto it = state.blocks.find(address);
  if (it == state.blocks.end()) {
    ++misfits;
  } else {
    it->second.state = to;
  }
}

bool AllocatorHistory::Walker::erase_block(AllocatorState& state, uint64_t address,
                                           bool& was_inferred) {
  auto it = state.blocks.find(address);
  if (it == state.blocks.end()) {
    ++misfits;
    return false;
  }
  was_inferred = it->second.size_inferred;
  state.held -= it->second.size;
  state.blocks.erase(it);
  return true;
}

void AllocatorHistory::Walker::add_entry_range(AllocatorState& state, uint64_t i, bool expandable) {
  const EventColumns& events = snapshot.events;
  MappedRange range;
  range.size = events.size[i];
  range.stream = events.stream[i];
  range.pool = entry_pool(snapshot, i);
  range.expandable = expandable;
  if (!expandable) range.kind = pytorch::segment_type_of(range.size);
  if (!add_range(state, events.addr[i], range)) ++misfits;
}

void AllocatorHistory::Walker::remove_entry_range(AllocatorState& state, uint64_t i,
                                                  bool whole_segment) {
  const EventColumns& events = snapshot.events;
  const uint64_t address = events.addr[i];
  const uint64_t size = events.size[i];
  auto it = state.ranges.find(address);
  const bool whole = it != state.ranges.end() && it->second.size == size;
  if (whole_segment && !whole) ++misfits;
  if (!remove_range(state, address, size)) ++misfits;
}

bool AllocatorHistory::Walker::forward(AllocatorState& state, uint64_t i) {
  const EventColumns& events = snapshot.events;
  const uint64_t address = events.addr[i];
  const uint64_t size = events.size[i];
  switch (events.action[i]) {
    case Action::kAlloc: {
      auto range = state.range_at(address);
      if (range == state.ranges.end()) {
        ++misfits;
        return true;
      }
      auto next = state.blocks.lower_bound(address);
      if (next != state.blocks.begin()) {
        auto prev = std::prev(next);
        if (settling != nullptr && prev->second.size_inferred) {
          settling->placed_after.emplace_back(prev->first, address);
        }
        if (prev->first + prev->second.size > address) {
          // A block allocated before the trace whose size was inferred ends
          // here: the allocator carved this one where the free space began.
          if (prev->second.size_inferred && prev->first < address) {
            state.held -= prev->second.size - (address - prev->first);
            prev->second.size = address - prev->first;
          } else {
            ++misfits;
            return true;
          }
        }
      }
      if (next != state.blocks.end() && next->first == address) {
        ++misfits;
        return true;
      }
      // The free space ends at the next held block (`next`: none sits at
      // the address) or at the range's end; one search serves both.
      const uint64_t free_size = free_from(state, range, next, address);
      HeldBlock block{pytorch::carved_block_size(size, free_size, rule), size,
                      BlockState::kActiveAllocated, false};
      if (block.size > free_size) ++misfits;
      state.blocks.emplace_hint(next, address, block);
      state.held += block.size;
      return true;
    }
    case Action::kFreeRequested:
      set_block_state(state, address, BlockState::kActivePendingFree);
      return true;
    case Action::kFreeCompleted: {
      if (settling != nullptr) {
        free_checking_back_size(state, i);
        return true;
      }
      bool inferred = false;
      erase_block(state, address, inferred);
      return true;
    }
    case Action::kSegmentAlloc:
    case Action::kSegmentMap:
      add_entry_range(state, i, events.action[i] == Action::kSegmentMap);
      return true;
    case Action::kSegmentFree:
    case Action::kSegmentUnmap:
      remove_entry_range(state, i, events.action[i] == Action::kSegmentFree);
      return true;
    default: return false;
  }
}

void AllocatorHistory::Walker::free_checking_back_size(AllocatorState& state, uint64_t i) {
  const uint64_t address = snapshot.events.addr[i];
  auto it = state.blocks.find(address);
  if (it == state.blocks.end()) {
    ++misfits;
    return;
  }
  const uint64_t size = it->second.size;
  const bool before_trace = it->second.size_inferred;
  state.held -= size;
  auto next = state.blocks.erase(it);
  // The walk back puts the block back here with the split rule's size on
  // the free space it now leaves (as backward() does, from the same state).
  auto range = state.range_at(address);
  if (range == state.ranges.end()) {
    ++back_sizes_above;
    return;
  }
  const uint64_t back_size =
      put_back_size(snapshot.events.size[i], free_from(state, range, next, address), rule);
  if (before_trace) {
    settling->freed.push_back(Settling::Freed{address, back_size, i});
  } else if (back_size > size) {
    ++back_sizes_above;
  }
}

bool AllocatorHistory::Walker::backward(AllocatorState& state, uint64_t i, uint64_t& inferred) {
  const EventColumns& events = snapshot.events;
  const uint64_t address = events.addr[i];
  const uint64_t size = events.size[i];
  switch (events.action[i]) {
    case Action::kAlloc: {
      bool was_inferred = false;
      if (erase_block(state, address, was_inferred) && was_inferred) --inferred;
      return true;
    }
    case Action::kFreeRequested:
      set_block_state(state, address, BlockState::kActiveAllocated);
      return true;
    case Action::kFreeCompleted: {
      // The block comes back, awaiting free; its size is the split rule's on
      // the free space it sat in (its own alloc, when the trace has it,
      // replaces this on the way forward).
      auto range = state.range_at(address);
      auto next = state.blocks.lower_bound(address);
      bool overlaps = next != state.blocks.end() && next->first == address;
      if (next != state.blocks.begin()) {
        auto prev = std::prev(next);
        overlaps = overlaps || prev->first + prev->second.size > address;
      }
      if (range == state.ranges.end() || overlaps) {
        ++misfits;
        return true;
      }
      HeldBlock block{put_back_size(size, free_from(state, range, next, address), rule), size,
                      BlockState::kActivePendingFree, true};
      state.blocks.emplace_hint(next, address, block);
      state.held += block.size;
      ++inferred;
      return true;
    }
    case Action::kSegmentAlloc:
    case Action::kSegmentMap:
      remove_entry_range(state, i, events.action[i] == Action::kSegmentAlloc);
      return true;
    case Action::kSegmentFree:
    case Action::kSegmentUnmap:
      add_entry_range(state, i, events.action[i] == Action::kSegmentUnmap);
      return true;
    default: return false;
  }
}

AllocatorHistory::AllocatorHistory(const Snapshot& snapshot, int device, StartDerivation derivation,
                                   StartDiscovery* discovery)
    : snapshot_(&snapshot),
      derivation_(derivation),
      rule_(split_rule_from_settings(snapshot.allocator_settings)) {
  trace_ = DeviceTrace{device, 0, 0};
  if (const DeviceTrace* trace = snapshot.trace_of(device)) trace_ = *trace;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    if (segment.is_expandable) rule_.expandable = true;
    if (segment.block_count == 0 && check_.impossible_reason.empty()) {
      check_.impossible_reason = fmt::format(
          "segment {:#x} lists no blocks, so the dump's blocks are not known", segment.address);
    }
  }
  for (uint64_t i = trace_.begin; i < trace_.end; ++i) {
    const Action action = snapshot.events.action[i];
    if (action == Action::kSegmentMap || action == Action::kSegmentUnmap) rule_.expandable = true;
  }
  if (snapshot.legacy_block_history) {
    check_.impossible_reason = "the dump's blocks have no addresses (PyTorch 2.0 block history)";
  }
  const AllocatorState dump = state_at_dump(snapshot, device);
  check_.possible = check_.impossible_reason.empty();
  if (discovery != nullptr && check_.possible && adopt(*discovery, dump)) return;
  replay(dump, RoundingRule::kCuda);
  if (check_.possible && !check_.exact && npu_rounding_possible(dump)) {
    // Not CUDA's rounding, perhaps: try torch_npu's and keep the better.
    HistoryCheck cuda = check_;
    AllocatorState cuda_start = start_;
    PeakFree cuda_peak = peak_free_;
    const bool cuda_derived = derived_forward_;
    std::vector<Checkpoint> cuda_checkpoints = std::move(checkpoints_);
    replay(dump, RoundingRule::kNpu);
    const auto misses = [](const HistoryCheck& h) {
      return h.differences + h.misfits_back + h.misfits_forward;
    };
    if (misses(check_) >= misses(cuda)) {
      check_ = std::move(cuda);
      start_ = std::move(cuda_start);
      peak_free_ = cuda_peak;
      derived_forward_ = cuda_derived;
      checkpoints_ = std::move(cuda_checkpoints);
    }
  }
  rule_.rounding = check_.rounding;  // the walks after this one use the rule that won
}

void allocator_walk::compare_with_dump(const AllocatorState& dump, const AllocatorState& end,
                                       HistoryCheck& check) {
  auto note = [&](const std::string& what) {
    if (check.differences++ == 0) check.first_difference = what;
  };
  for (const auto& [address, range] : dump.ranges) {
    auto it = end.ranges.find(address);
    if (it == end.ranges.end()) {
      note(fmt::format("segment at {:#x} ({} bytes) is in the dump but not replayed", address,
                       range.size));
    } else if (it->second.size != range.size) {
      note(fmt::format("segment at {:#x} is {} bytes replayed, {} in the dump", address,
                       it->second.size, range.size));
    }
  }
  for (const auto& [address, range] : end.ranges) {
    if (!dump.ranges.contains(address)) {
      note(fmt::format("segment at {:#x} ({} bytes) is replayed but not in the dump", address,
                       range.size));
    }
  }
  for (const auto& [address, block] : dump.blocks) {
    auto it = end.blocks.find(address);
    const HeldBlock* replayed = it == end.blocks.end() ? nullptr : &it->second;
    if (replayed == nullptr || replayed->size != block.size ||
        replayed->requested != block.requested || replayed->state != block.state) {
      note(fmt::format("dump: {}; replayed: {}", describe_block(address, &block),
                       describe_block(address, replayed)));
    }
  }
  for (const auto& [address, block] : end.blocks) {
    if (!dump.blocks.contains(address)) {
      note(fmt::format("dump: {}; replayed: {}", describe_block(address, nullptr),
                       describe_block(address, &block)));
    }
  }
}

void AllocatorHistory::replay(const AllocatorState& dump, RoundingRule rounding) {
  const bool possible = check_.possible;
  const std::string reason = check_.impossible_reason;
  const auto fresh_check = [&] {
    check_ = HistoryCheck{};
    check_.possible = possible;
    check_.impossible_reason = reason;
    check_.rounding = rounding;
  };
  fresh_check();
  rule_.rounding = rounding;
  derived_forward_ = derivation_ == StartDerivation::kForwardFirst && possible &&
                     !rule_.expandable && derive_start(dump);
  if (derived_forward_) return;
  fresh_check();
  // Back from the dump to the start.
  start_ = dump;
  Walker back{*snapshot_, rule_};
  uint64_t inferred = 0;
  for (uint64_t i = trace_.end; i > trace_.begin; --i) {
    if (back.backward(start_, i - 1, inferred)) ++check_.entries;
  }
  check_.misfits_back = back.misfits;
  check_.ranges_at_start = start_.ranges.size();
  check_.blocks_at_start = start_.blocks.size();
  check_.inferred_sizes = inferred;
  walk_forward(dump, nullptr);
}

bool allocator_walk::held_at_start(const FirstEntries* firsts, const HeldBlock* dumped,
                                   const EventColumns& events, HeldBlock& held) {
  if (firsts == nullptr || (firsts->first == Action::kFreeRequested && !firsts->twice)) {
    if (dumped == nullptr) return false;
    held = *dumped;  // no entry names it, or only its free was requested: allocated then
    if (firsts != nullptr) held.state = BlockState::kActiveAllocated;
    return true;
  }
  uint64_t completed = UINT64_MAX;
  BlockState state = BlockState::kActivePendingFree;
  if (firsts->first == Action::kFreeCompleted) completed = firsts->first_entry;
  if (firsts->first == Action::kFreeRequested && firsts->twice &&
      firsts->second == Action::kFreeCompleted) {
    completed = firsts->second_entry;
    state = BlockState::kActiveAllocated;
  }
  if (completed == UINT64_MAX) return false;
  held = HeldBlock{0, events.size[completed], state, true};
  return true;
}

// The start state without walking every entry back (issue 41): the dump's
// ranges walked back over the segment entries alone; the dump's blocks at
// addresses no alloc or free names (and those whose one entry requests
// their free: allocated then); and the blocks the trace frees before it
// allocates them, held from the start with the size the walk back gives
// them at that first free_completed (the split rule on the free space the
// free leaves), which the forward walk learns only when it gets there: it
// holds them at size 0 until then and settle() puts the sizes in.
//
// It is the walk back's start when the forward walk from it (1) meets no
// misfit, (2) ends on the dump exactly, (3) frees no other block that the
// walk back would put back larger than the block was, and (4) has nothing
// begin inside a block from before the trace at its settled size while the
// block is held (checked on the block next to it at the start and on each
// alloc placed just after it), and (5) starts with every block inside a
// range (a block the dump holds in a range the trace makes is not; F would
// not see it, since adding a range looks at ranges only, and the walk back
// would misfit undoing that segment_alloc). Proof, by induction from the
// dump back to the start: the walk back's state B after undoing entries t+1.. and the
// forward state F after entry t (the blocks from before the trace at their
// settled sizes) hold the same ranges (address and size) and the same block
// addresses, each B block no larger than its F block. At the dump B = F by
// (2). Undoing an alloc erases a block F just made; a free_requested finds
// its block; a free_completed finds its range (F's blocks lie in ranges, by
// (1)) and no block at or over its address (same addresses; the block
// before is no larger than in F, where nothing overlaps, by (1) and (4)),
// and puts the block back with the split rule on the same free space as F's
// state after the free: no larger than F's block by (3), or exactly the
// settled size of a block from before the trace; undoing a segment_alloc
// removes the range F made, with no block in it (F's blocks lie in ranges,
// by (1) and (5)), and undoing a segment_free
// puts back a range F had, overlapping none. So the walk back meets no
// misfit and ends with F's start: ranges as the segment-only walk gives
// them (the same operations on the same ranges), the blocks it puts back
// and never erases (those the trace frees first), and the dump's blocks no
// entry touched. (4) also means the forward walk never shrinks a block from
// before the trace, so the walk at size 0 carved and placed as the settled
// one does; only the held bytes differ, by the sizes of those still held,
// which settle() takes off the peak of free memory (per stretch between
// their frees) and adds to the checkpoints. Expandable segments (ranges
// that join and split) are left to the walk back.
bool AllocatorHistory::derive_start(const AllocatorState& dump) {
  const EventColumns& events = snapshot_->events;
  absl::flat_hash_map<uint64_t, FirstEntries> named;  // every block address an entry names
  start_ = AllocatorState{};
  start_.ranges = dump.ranges;
  start_.reserved = dump.reserved;
  Walker back{*snapshot_, rule_};
  uint64_t unused_inferred = 0;
  for (uint64_t i = trace_.end; i > trace_.begin; --i) {
    const Action action = events.action[i - 1];
    switch (action) {
      case Action::kAlloc:
      case Action::kFreeRequested:
      case Action::kFreeCompleted: {
        ++check_.entries;
        auto [it, fresh] = named.try_emplace(events.addr[i - 1]);
        FirstEntries& firsts = it->second;
        if (fresh && action == Action::kAlloc) firsts.last_alloc = i - 1;
        if (!fresh) {
          firsts.second = firsts.first;
          firsts.second_entry = firsts.first_entry;
          firsts.twice = true;
        }
        firsts.first = action;
        firsts.first_entry = i - 1;
        break;
      }
      default:
        if (back.backward(start_, i - 1, unused_inferred)) ++check_.entries;
    }
  }
  if (back.misfits != 0) return false;
  Settling settling;
  for (const auto& [address, block] : dump.blocks) {
    auto it = named.find(address);
    const FirstEntries* firsts = it == named.end() ? nullptr : &it->second;
    if (firsts != nullptr && firsts->last_alloc != UINT64_MAX) {
      settling.lasting.push_back(Settling::Lasting{firsts->last_alloc, address, block.size});
    }
    HeldBlock held;
    if (held_at_start(firsts, &block, events, held) && !held.size_inferred) {
      start_.blocks.emplace(address, held);
      start_.held += held.size;
    }
  }
  // Blocks from before the trace that it frees first: held until then, with
  // the size the walk back gives them there (size 0 until the walk gets there).
  for (const auto& [address, firsts] : named) {
    HeldBlock held;
    if (!held_at_start(&firsts, nullptr, events, held)) continue;
    if (!start_.blocks.emplace(address, held).second) return false;
    ++check_.inferred_sizes;
  }
  if (!blocks_within_ranges(start_)) return false;
  check_.ranges_at_start = start_.ranges.size();
  check_.blocks_at_start = start_.blocks.size();
  std::sort(settling.lasting.begin(), settling.lasting.end(),
            [](const auto& a, const auto& b) { return a.entry < b.entry; });
  return walk_forward(dump, &settling);
}

bool AllocatorHistory::walk_forward(const AllocatorState& dump, Settling* settling) {
  // Forward to the dump, deriving every traced block's size anew, and
  // keeping checkpoints on the way.
  AllocatorState end = start_;
  Walker forth{*snapshot_, rule_};
  const bool deriving = settling != nullptr;
  size_t lasting = 0;  // the next of settling->lasting
  if (deriving) {
    forth.settling = settling;
    settling->observe(end, 0);
  }
  peak_free_ = PeakFree{free_bytes(end), 0, end.reserved};
  checkpoints_.clear();
  const uint64_t every = std::max(kMinCheckpointEvery, trace_.count() / kMaxCheckpoints);
  // Held blocks and ranges the checkpoints may copy in all: an eighth of an
  // element per trace entry, about 8 bytes per entry beside the 37 of its columns.
  uint64_t budget = trace_.count() / 8 + kMinCheckpointEvery;
  uint64_t until_checkpoint = every;
  for (uint64_t i = trace_.begin; i < trace_.end; ++i) {
    const bool applied = forth.forward(end, i);
    const uint64_t position = i + 1 - trace_.begin;
    if (deriving) {
      if (forth.misfits != 0 || forth.back_sizes_above != 0 ||
          !settling->lasts_as_dumped(end, i, lasting)) {
        return false;
      }
      // A block from before the trace freed: the next stretch of the peak.
      if (settling->freed.size() == settling->peaks.size()) settling->peaks.emplace_back();
      if (applied) settling->observe(end, position);
    } else if (applied && free_bytes(end) > peak_free_.bytes) {
      peak_free_ = PeakFree{free_bytes(end), position, end.reserved};
    }
    if (--until_checkpoint == 0) {
      until_checkpoint = every;
      const uint64_t elements = end.ranges.size() + end.blocks.size();
      if (elements <= budget) {
        budget -= elements;
        checkpoints_.push_back(Checkpoint{position, end});
      }
    }
  }
  check_.misfits_forward = forth.misfits;
  compare_with_dump(dump, end, check_);
  check_.exact = check_.possible && check_.differences == 0;
  return deriving ? check_.exact && settle(*settling) : check_.exact;
}

bool AllocatorHistory::settle(const Settling& settling) {
  absl::flat_hash_map<uint64_t, uint64_t> settled;  // address -> size, of each block from before
  for (const Settling::Freed& freed : settling.freed) settled.emplace(freed.address, freed.size);
  if (settled.size() != settling.freed.size() || settled.size() != check_.inferred_sizes) {
    return false;
  }
  // Nothing the block was beside, at the start or placed after it while it
  // was held, may begin inside its settled size: the walk back would meet it
  // there (a misfit) or the walk forward would shrink the block.
  std::vector<std::pair<uint64_t, uint64_t>> beside = settling.placed_after;
  for (auto it = start_.blocks.begin(); it != start_.blocks.end(); ++it) {
    if (!it->second.size_inferred) continue;
    if (auto next = std::next(it); next != start_.blocks.end()) {
      beside.emplace_back(it->first, next->first);
    }
    if (it != start_.blocks.begin()) {
      const auto prev = std::prev(it);
      if (!prev->second.size_inferred && prev->first + prev->second.size > it->first) return false;
    }
  }
  for (const auto& [block, next] : beside) {
    const auto size = settled.find(block);
    if (size == settled.end() || next < block + size->second) return false;
  }
  // The start and each checkpoint hold those not freed by then.
  const auto settle_state = [&](AllocatorState& state, uint64_t position) {
    for (const Settling::Freed& freed : settling.freed) {
      if (freed.entry + 1 - trace_.begin <= position) continue;
      auto it = state.blocks.find(freed.address);
      if (it == state.blocks.end()) continue;  // not held there (a misfit would have said so)
      it->second.size = freed.size;
      state.held += freed.size;
    }
  };
  settle_state(start_, 0);
  for (Checkpoint& checkpoint : checkpoints_) settle_state(checkpoint.state, checkpoint.position);
  // The peak of free memory: each stretch's less the sizes still held in it.
  int64_t still_held = 0;
  for (const Settling::Freed& freed : settling.freed)
    still_held += static_cast<int64_t>(freed.size);
  int64_t best = INT64_MIN;
  for (size_t k = 0; k < settling.peaks.size(); ++k) {
    const Settling::Peak& peak = settling.peaks[k];
    if (peak.free != INT64_MIN && peak.free - still_held > best) {
      best = peak.free - still_held;
      peak_free_ =
          PeakFree{static_cast<uint64_t>(std::max<int64_t>(best, 0)), peak.position, peak.reserved};
    }
    if (k < settling.freed.size()) still_held -= static_cast<int64_t>(settling.freed[k].size);
  }
  return best >= 0;
}

const AllocatorHistory::Checkpoint* AllocatorHistory::checkpoint_before(uint64_t position) const {
  auto after = std::upper_bound(
      checkpoints_.begin(), checkpoints_.end(), position,
      [](uint64_t wanted, const Checkpoint& checkpoint) { return wanted < checkpoint.position; });
  return after == checkpoints_.begin() ? nullptr : &*std::prev(after);
}

AllocatorState AllocatorHistory::at(uint64_t position) const {
  const uint64_t target = std::min(position, trace_.count());
  const Checkpoint* nearest = checkpoint_before(target);
  AllocatorState state = nearest != nullptr ? nearest->state : start_;
  Walker walker{*snapshot_, rule_};
  const uint64_t stop = trace_.begin + target;
  for (uint64_t i = trace_.begin + (nearest != nullptr ? nearest->position : 0); i < stop; ++i) {
    walker.forward(state, i);
  }
  return state;
}

bool AllocatorHistory::observed(uint64_t position) const {
  if (position == 0) return true;
  if (position > trace_.count()) return false;
  switch (snapshot_->events.action[trace_.begin + position - 1]) {
    case Action::kAlloc:
    case Action::kFreeRequested:
    case Action::kFreeCompleted:
    case Action::kSegmentAlloc:
    case Action::kSegmentMap:
    case Action::kSegmentFree:
    case Action::kSegmentUnmap: return true;
    default: return false;
  }
}

FragmentationHistory fragmentation_history(const AllocatorHistory& history,
                                           uint64_t reserved_peak_position) {
  FragmentationHistory out;
  const HistoryCheck& check = history.check();
  if (!check.possible || check.entries == 0) return out;
  out.known = true;
  out.exact = check.exact;
  const AllocatorHistory::PeakFree& peak = history.peak_free();
  out.peak_free = peak.bytes;
  out.peak_free_position = peak.position;
  out.reserved_at_peak_free = peak.reserved;
  // The largest free block is a scan of every block, so only at the two
  // moments, each from the checkpoint before it. (Both are moments after an
  // allocator entry; a position that is not one is not a moment of the walk
  // and stays unknown, 0.)
  if (history.observed(reserved_peak_position)) {
    const AllocatorState state = history.at(reserved_peak_position);
    out.reserved_peak = state.reserved;
    out.free_at_reserved_peak = free_bytes(state);
    out.largest_free_at_reserved_peak = state.largest_free();
    if (peak.position == reserved_peak_position) {
      out.largest_free_at_peak_free = out.largest_free_at_reserved_peak;
      return out;
    }
  }
  if (history.observed(peak.position)) {
    out.largest_free_at_peak_free = history.at(peak.position).largest_free();
  }
  return out;
}

}  // namespace memsnap
