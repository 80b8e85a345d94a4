#include "analysis/core/start_discovery.h"
#include "analysis/core/pytorch_allocator_policy.h"

#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace memsnap {

using namespace allocator_walk;  // NOLINT(google-build-using-namespace): the walk's own pieces

StartDiscovery::StartDiscovery(AllocatorState dump, const SplitRule& rule, uint64_t begin)
    : dump_(std::move(dump)),
      rule_(rule),
      begin_(begin),
      next_(begin),
      checkpoint_every_(AllocatorHistory::kMinCheckpointEvery),
      until_checkpoint_(AllocatorHistory::kMinCheckpointEvery) {
  observe(0);
}

void StartDiscovery::walk(const TraceColumns& columns) {
  while (next_ < columns.count && !given_up_) {
    step(columns, next_);
    if (restart_pending_) {
      restart_pending_ = false;
      learn_ahead(columns);
      begin_walk();
    } else if (!given_up_) {
      ++next_;
    }
  }
}

void StartDiscovery::walk(const Snapshot& snapshot, uint64_t end) {
  const EventColumns& events = snapshot.events;
  walk(TraceColumns{events.action.data(), events.addr.data(), events.size.data(),
                    events.stream.data(), std::min<uint64_t>(end, events.count())});
}

void StartDiscovery::step(const TraceColumns& columns, uint64_t i) {
  switch (columns.action[i]) {
    case Action::kAlloc: alloc(columns.addr[i], columns.size[i], i); break;
    case Action::kFreeRequested: free_requested(columns.addr[i], i); break;
    case Action::kFreeCompleted: free_completed(columns.addr[i], columns.size[i], i); break;
    case Action::kSegmentAlloc: segment_alloc(columns, i); break;
    case Action::kSegmentFree: segment_free(columns, i); break;
    case Action::kSegmentMap:
    case Action::kSegmentUnmap: give_up(); break;  // expandable segments: the walk back's
    default: checkpoint(i + 1 - begin_); return;
  }
  if (given_up_) return;
  ++entries_;
  const uint64_t position = i + 1 - begin_;
  if (stretch_ends_) {
    stretches_.emplace_back();
    stretch_ends_ = false;
  }
  observe(position);
  checkpoint(position);
}

bool StartDiscovery::name(uint64_t address, Action action, uint64_t i) {
  auto [it, fresh] = named_.try_emplace(address);
  FirstEntries& firsts = it->second;
  if (fresh) {
    named_in_order_.insert(address);
    firsts.first = action;
    firsts.first_entry = i;
  } else if (!firsts.twice) {
    firsts.second = action;
    firsts.second_entry = i;
    firsts.twice = true;
  }
  firsts.last_alloc = action == Action::kAlloc ? i : UINT64_MAX;
  return fresh;
}

bool StartDiscovery::locate(uint64_t address, uint64_t i, uint64_t& range_end) {
  auto range = state_.range_at(address);
  if (range == state_.ranges.end()) {
    // Not a range the walk knows: one of the dump's held since before the
    // trace, if no segment entry has named it (settle() checks it was).
    auto dumped = dump_.range_at(address);
    if (dumped != dump_.ranges.end() && !segment_named_.contains(dumped->first)) {
      if (!add_range(state_, dumped->first, dumped->second)) {
        give_up();
        return false;
      }
      reveal_range(i, dumped->first, dumped->second);
      if (stopped()) return false;
      range = state_.range_at(address);
    }
  }
  if (range != state_.ranges.end()) {
    range_end = allocator_walk::range_end(range);
    return true;
  }
  // Else a segment from before the trace that it frees later (no segment of
  // the dump): where it ends is learnt then (reveal_range); until then it
  // ends at the latest where the next segment the walk knows begins.
  floating_.insert(address);
  auto next = state_.ranges.upper_bound(address);
  range_end = next == state_.ranges.end() ? UINT64_MAX : next->first;
  return true;
}

void StartDiscovery::reveal_range(uint64_t i, uint64_t address, const MappedRange& range) {
  // Its end is where a block would have ended the free space of a carve
  // made without it (the walk then starts again knowing it); the addresses
  // met in it before are in a segment now.
  const uint64_t end = address + range.size;
  if (sensitive(end)) {
    if (may_restart()) restart_ranges_.push_back(RangeReveal{i, address, range});
    return;
  }
  floating_.erase(floating_.lower_bound(address), floating_.lower_bound(end));
  range_reveals_.push_back(RangeReveal{i, address, range});
  deltas_.push_back(Delta{i, range.size, 0});
  stretch_ends_ = true;
}

bool StartDiscovery::may_reveal_block(uint64_t address, Action first, uint64_t i) {
  uint64_t unused_end = 0;
  if (!locate(address, i, unused_end)) return false;
  // Held since before the trace, so at every carve walked so far: where one
  // would have chosen otherwise with it there, the walk starts again
  // knowing it.
  if (sensitive(address)) {
    restart(address, first);
    return false;
  }
  return true;
}

bool StartDiscovery::may_restart() {
  if (restarts_ == kMaxRestarts || rewalked_ + (next_ - begin_) > kMaxRewalked) {
    give_up();
    return false;
  }
  ++restarts_;
  rewalked_ += next_ - begin_;
  restart_pending_ = true;
  return true;
}

void StartDiscovery::restart(uint64_t address, Action first) {
  if (may_restart()) restart_blocks_.emplace_back(address, first);
}

void StartDiscovery::learn_ahead(const TraceColumns& columns) {
  // What else the rows read so far show was there before the trace: blocks
  // they free before they allocate, segments they free before they make.
  // (Entries are facts of the trace, whatever the walk made of them.)
  absl::flat_hash_set<uint64_t> blocks;
  absl::flat_hash_set<uint64_t> segments;
  for (const auto& [address, first] : restart_blocks_) blocks.insert(address);
  for (const RangeReveal& range : restart_ranges_) segments.insert(range.address);
  absl::flat_hash_set<uint64_t> named;
  absl::flat_hash_set<uint64_t> segment_named;
  for (uint64_t i = begin_; i < columns.count; ++i) {
    const Action action = columns.action[i];
    const uint64_t address = columns.addr[i];
    switch (action) {
      case Action::kFreeRequested:
      case Action::kFreeCompleted:
        if (named.insert(address).second && !blocks.contains(address)) {
          restart_blocks_.emplace_back(address, action);
        }
        break;
      case Action::kAlloc: named.insert(address); break;
      case Action::kSegmentAlloc: segment_named.insert(address); break;
      case Action::kSegmentFree:
        if (segment_named.insert(address).second && !segments.contains(address)) {
          restart_ranges_.push_back(
              RangeReveal{i, address,
                          MappedRange{columns.size[i], columns.stream[i], PoolId{},
                                      pytorch::segment_type_of(columns.size[i]), false}});
        }
        break;
      default: break;
    }
  }
}

void StartDiscovery::begin_walk() {
  state_ = AllocatorState{};
  entries_ = 0;
  named_.clear();
  named_in_order_.clear();
  segment_named_.clear();
  floating_.clear();
  segment_entries_.clear();
  removals_.clear();
  range_reveals_.clear();
  block_reveals_.clear();
  held_reveals_.clear();
  deltas_.clear();
  stretches_.assign(1, Stretch{});
  stretch_ends_ = false;
  sensitive_.clear();
  checkpoints_.clear();
  checkpoint_every_ = AllocatorHistory::kMinCheckpointEvery;
  until_checkpoint_ = checkpoint_every_;
  checkpointed_elements_ = 0;
  // What made a walk start again: segments held from the start, and
  // blocks at size 0 (as derive_start holds them), freed as revealed ones are.
  for (const RangeReveal& range : restart_ranges_) {
    if (!add_range(state_, range.address, range.range)) give_up();  // overlapping: no allocator's
  }
  for (const auto& [address, first] : restart_blocks_) {
    const BlockState state = first == Action::kFreeCompleted ? BlockState::kActivePendingFree
                                                             : BlockState::kActiveAllocated;
    state_.blocks.emplace(address, HeldBlock{0, 0, state, true});
    held_reveals_.emplace(address, block_reveals_.size());
    block_reveals_.push_back(BlockReveal{address, begin_});
  }
  initial_ = state_;
  next_ = begin_;
  observe(0);
}

uint64_t StartDiscovery::free_end(uint64_t address, uint64_t range_end) const {
  auto next = state_.blocks.lower_bound(address);
  return next == state_.blocks.end() ? range_end : std::min(range_end, next->first);
}

void StartDiscovery::alloc(uint64_t address, uint64_t requested, uint64_t i) {
  name(address, Action::kAlloc, i);
  uint64_t range_end = 0;
  if (!locate(address, i, range_end)) return;
  auto next = state_.blocks.lower_bound(address);
  const bool taken = next != state_.blocks.end() && next->first == address;
  const bool overlaps = next != state_.blocks.begin() &&
                        std::prev(next)->first + std::prev(next)->second.size > address;
  if (taken || overlaps) return give_up();
  const uint64_t free_size = free_end(address, range_end) - address;
  const HeldBlock block{pytorch::carved_block_size(requested, free_size, rule_), requested,
                        BlockState::kActiveAllocated, false};
  if (block.size > free_size) return give_up();
  state_.blocks.emplace_hint(next, address, block);
  state_.held += block.size;
  mark_sensitive(address, requested, address + free_size, block.size);
}

void StartDiscovery::free_requested(uint64_t address, uint64_t i) {
  const bool first = name(address, Action::kFreeRequested, i);
  auto it = state_.blocks.find(address);
  if (it != state_.blocks.end()) {
    it->second.state = BlockState::kActivePendingFree;
    return;
  }
  if (!first) return give_up();  // freed, and not allocated again
  if (!may_reveal_block(address, Action::kFreeRequested, i)) return;
  // Size 0 until its free completes (or, held to the end, the dump's).
  state_.blocks.emplace(address, HeldBlock{0, 0, BlockState::kActivePendingFree, true});
  held_reveals_.emplace(address, block_reveals_.size());
  block_reveals_.push_back(BlockReveal{address, i});
}

void StartDiscovery::free_completed(uint64_t address, uint64_t requested, uint64_t i) {
  const bool first = name(address, Action::kFreeCompleted, i);
  size_t reveal = SIZE_MAX;  // a block from before the trace
  uint64_t size = 0;
  if (auto it = state_.blocks.find(address); it != state_.blocks.end()) {
    size = it->second.size;
    if (it->second.size_inferred) {
      auto held = held_reveals_.find(address);
      reveal = held->second;
      held_reveals_.erase(held);
    }
    state_.held -= size;
    state_.blocks.erase(it);
  } else if (!first) {
    return give_up();
  } else if (may_reveal_block(address, Action::kFreeCompleted, i)) {
    reveal = block_reveals_.size();
    block_reveals_.push_back(BlockReveal{address, i});
  } else {
    return;
  }
  // The size the walk back gives the block here (free_checking_back_size).
  uint64_t range_end = 0;
  if (!locate(address, i, range_end)) return;
  const uint64_t free_size = free_end(address, range_end) - address;
  const uint64_t back_size = put_back_size(requested, free_size, rule_);
  mark_sensitive(address, requested, address + free_size, back_size);
  if (reveal == SIZE_MAX) {
    if (back_size > size) give_up();
    return;
  }
  // Held from before the trace until now at back_size: nothing named so
  // far (held at some moment since) may begin inside it.
  if (named_inside(address, back_size)) return give_up();
  BlockReveal& block = block_reveals_[reveal];
  block.freed = i;
  block.size = back_size;
  block.requested = requested;
  deltas_.push_back(Delta{i, 0, back_size});
  stretch_ends_ = true;
}

void StartDiscovery::segment_alloc(const TraceColumns& columns, uint64_t i) {
  const uint64_t size = columns.size[i];
  segment_named_.insert(columns.addr[i]);
  segment_entries_.push_back(i);
  // (The pool is the entry's: complete() puts it in.)
  const MappedRange range{size, columns.stream[i], PoolId{}, pytorch::segment_type_of(size), false};
  if (!add_range(state_, columns.addr[i], range)) give_up();
}

void StartDiscovery::segment_free(const TraceColumns& columns, uint64_t i) {
  const uint64_t address = columns.addr[i];
  const uint64_t size = columns.size[i];
  segment_named_.insert(address);
  segment_entries_.push_back(i);
  removals_.push_back(Removal{i, address, size});
  if (auto it = state_.ranges.find(address); it != state_.ranges.end()) {
    if (it->second.size != size || !remove_range(state_, address, size)) give_up();
    return;
  }
  // A segment from before the trace that the walk has not met: held until
  // now (its pool, the entry's, is put in by settle()).
  const MappedRange range{size, columns.stream[i], PoolId{}, pytorch::segment_type_of(size), false};
  if (!add_range(state_, address, range)) return give_up();
  reveal_range(i, address, range);
  if (stopped()) return;
  if (!remove_range(state_, address, size)) give_up();  // blocks met in it still held
}

void StartDiscovery::mark_sensitive(uint64_t address, uint64_t requested, uint64_t free_end,
                                    uint64_t chosen) {
  // A block at X in (address, free_end) makes the free space X - address.
  // The rule then chooses `chosen` again only where it split before and
  // still does: X at the block's end, or past it by more than the least
  // remainder it splits off (512 bytes in the small pool, above 1 MiB in
  // the large one).
  const uint64_t rounded = pytorch::round_size(requested, rule_);
  if (chosen != rounded || rounded >= free_end - address) {
    add_sensitive(address + 1, free_end);
    return;
  }
  const uint64_t reach = pytorch::least_split_remainder(pytorch::is_small_pool(rounded), rule_);
  const uint64_t block_end = address + rounded;
  add_sensitive(address + 1, block_end);
  add_sensitive(block_end + 1, block_end + std::min(reach, free_end - block_end));
}

void StartDiscovery::add_sensitive(uint64_t low, uint64_t high) {
  if (low >= high) return;
  auto after = sensitive_.upper_bound(low);
  if (after != sensitive_.begin()) {
    auto before = std::prev(after);
    if (before->second >= high) return;  // already inside
    if (before->second >= low) {
      low = before->first;
      sensitive_.erase(before);
    }
  }
  for (auto it = sensitive_.lower_bound(low); it != sensitive_.end() && it->first <= high;) {
    high = std::max(high, it->second);
    it = sensitive_.erase(it);
  }
  sensitive_.emplace(low, high);
}

bool StartDiscovery::sensitive(uint64_t address) const {
  auto after = sensitive_.upper_bound(address);
  return after != sensitive_.begin() && address < std::prev(after)->second;
}

bool StartDiscovery::named_inside(uint64_t address, uint64_t size) const {
  auto after = named_in_order_.upper_bound(address);
  return after != named_in_order_.end() && *after - address < size;
}

void StartDiscovery::observe(uint64_t position) {
  const int64_t free = static_cast<int64_t>(state_.reserved) - static_cast<int64_t>(state_.held);
  Stretch& stretch = stretches_.back();
  if (free > stretch.free) stretch = Stretch{free, position, state_.reserved};
}

void StartDiscovery::checkpoint(uint64_t position) {
  // As walk_forward's, with the trace's length unknown: every so many
  // entries, fewer (twice as far apart) whenever there are twice the most.
  if (--until_checkpoint_ != 0) return;
  until_checkpoint_ = checkpoint_every_;
  const uint64_t elements = state_.ranges.size() + state_.blocks.size();
  const uint64_t budget = position / 8 + AllocatorHistory::kMinCheckpointEvery;
  if (checkpointed_elements_ + elements > budget) return;
  checkpoints_.push_back(Checkpoint{position, state_});
  checkpointed_elements_ += elements;
  if (checkpoints_.size() < 2 * AllocatorHistory::kMaxCheckpoints) return;
  std::vector<Checkpoint> kept;
  checkpointed_elements_ = 0;
  for (size_t k = 1; k < checkpoints_.size(); k += 2) {
    checkpointed_elements_ +=
        checkpoints_[k].state.ranges.size() + checkpoints_[k].state.blocks.size();
    kept.push_back(std::move(checkpoints_[k]));
  }
  checkpoints_ = std::move(kept);
  checkpoint_every_ *= 2;
  until_checkpoint_ = checkpoint_every_;
}

namespace {

bool same_range(const MappedRange& a, const MappedRange& b) {
  return a.size == b.size && a.stream == b.stream && a.pool.first == b.pool.first &&
         a.pool.second == b.pool.second && a.kind == b.kind && a.expandable == b.expandable;
}

bool same_block(const HeldBlock& a, const HeldBlock& b) {
  return a.size == b.size && a.requested == b.requested && a.state == b.state &&
         a.size_inferred == b.size_inferred;
}

bool same_state(const AllocatorState& a, const AllocatorState& b) {
  return a.reserved == b.reserved && a.held == b.held &&
         std::equal(a.ranges.begin(), a.ranges.end(), b.ranges.begin(), b.ranges.end(),
                    [](const auto& x, const auto& y) {
                      return x.first == y.first && same_range(x.second, y.second);
                    }) &&
         std::equal(a.blocks.begin(), a.blocks.end(), b.blocks.begin(), b.blocks.end(),
                    [](const auto& x, const auto& y) {
                      return x.first == y.first && same_block(x.second, y.second);
                    });
}

bool same_rule(const SplitRule& a, const SplitRule& b) {
  return a.rounding == b.rounding && a.expandable == b.expandable &&
         a.max_split_size == b.max_split_size && a.power2_divisions == b.power2_divisions;
}

}  // namespace

bool StartDiscovery::settle(const Snapshot& snapshot) {
  // derive_start's ranges: the dump's walked back over the segment entries.
  AllocatorState ranges;
  ranges.ranges = dump_.ranges;
  ranges.reserved = dump_.reserved;
  AllocatorHistory::Walker walker{snapshot, rule_};
  uint64_t unused_inferred = 0;
  for (auto it = segment_entries_.rbegin(); it != segment_entries_.rend(); ++it) {
    walker.backward(ranges, *it, unused_inferred);
  }
  if (walker.misfits != 0) return false;
  made_.clear();
  for (const uint64_t i : segment_entries_) {
    if (snapshot.events.action[i] == Action::kSegmentAlloc) {
      made_[snapshot.events.addr[i]].emplace_back(i, entry_pool(snapshot, i));
    }
  }
  // The walk met some of them, or held them from its start; the rest it
  // lacked all along.
  const auto met = [&](RangeReveal& reveal) {
    if (snapshot.events.action[reveal.entry] == Action::kSegmentFree) {
      reveal.range.pool = entry_pool(snapshot, reveal.entry);
    }
    auto it = ranges.ranges.find(reveal.address);
    if (it == ranges.ranges.end() || !same_range(it->second, reveal.range)) return false;
    ranges.ranges.erase(it);
    return true;
  };
  if (!std::all_of(restart_ranges_.begin(), restart_ranges_.end(), met) ||
      !std::all_of(range_reveals_.begin(), range_reveals_.end(), met)) {
    return false;
  }
  late_ranges_.assign(ranges.ranges.begin(), ranges.ranges.end());
  // Addresses met in no segment it knew: in one held all along, then.
  for (const uint64_t address : floating_) {
    if (ranges.range_at(address) == ranges.ranges.end()) return false;
  }
  // derive_start's blocks: the dump's that no entry names (held all along,
  // never met), and those the walk met at their first free.
  late_blocks_.clear();
  for (const auto& [address, block] : dump_.blocks) {
    if (!named_.contains(address)) late_blocks_.emplace_back(address, block);
  }
  for (BlockReveal& reveal : block_reveals_) {
    auto dumped = dump_.blocks.find(reveal.address);
    // (Inferred exactly where the walk freed it: first freed, or requested
    // then freed. Requested twice, or allocated after, is no block of the
    // start: the walk back misfits there.)
    if (!held_at_start(&named_.find(reveal.address)->second,
                       dumped == dump_.blocks.end() ? nullptr : &dumped->second, snapshot.events,
                       reveal.at_start)) {
      return false;
    }
    if (reveal.at_start.size_inferred) reveal.at_start.size = reveal.size;
  }
  return true;
}

bool StartDiscovery::ends_on_the_dumps_blocks(const AllocatorState& dump) const {
  // What the end compared with the dump must find, known before settle():
  // the walk's blocks are the dump's (those from before the trace at the
  // dump's size), and the dump's others are named by no entry.
  for (const auto& [address, block] : state_.blocks) {
    auto dumped = dump.blocks.find(address);
    if (dumped == dump.blocks.end()) return false;
    if (!block.size_inferred && !same_block(block, dumped->second)) return false;
  }
  return std::none_of(dump.blocks.begin(), dump.blocks.end(), [this](const auto& dumped) {
    return !state_.blocks.contains(dumped.first) && named_.contains(dumped.first);
  });
}

bool StartDiscovery::start_is_derived(AllocatorState& start) const {
  // Those held to the end were held at every carve and inside no block named.
  const auto held_throughout = [&](uint64_t address, const HeldBlock& block) {
    return !sensitive(address) && !named_inside(address, block.size);
  };
  for (const auto& [address, block] : late_blocks_) {
    if (!held_throughout(address, block)) return false;
  }
  for (const BlockReveal& reveal : block_reveals_) {
    if (reveal.freed == UINT64_MAX && !held_throughout(reveal.address, reveal.at_start)) {
      return false;
    }
  }
  start = initial_;
  complete(start, 0);
  return blocks_within_ranges(start) && held_blocks_outlive_their_segments(start);
}

bool StartDiscovery::held_blocks_outlive_their_segments(const AllocatorState& start) const {
  absl::flat_hash_map<uint64_t, uint64_t> freed;  // block -> its free, where the trace frees it
  for (const BlockReveal& reveal : block_reveals_) freed.emplace(reveal.address, reveal.freed);
  // Bounded: a file of many segment frees over many such blocks gives up.
  uint64_t budget = entries_ + (uint64_t{1} << 20);
  for (const Removal& removal : removals_) {
    for (auto it = start.blocks.lower_bound(removal.address);
         it != start.blocks.end() && it->first - removal.address < removal.size; ++it) {
      if (budget-- == 0) return false;
      auto until = freed.find(it->first);
      if (until == freed.end() || until->second > removal.entry) return false;
    }
  }
  return true;
}

void StartDiscovery::complete(AllocatorState& state, uint64_t position) const {
  const uint64_t applied = begin_ + position;  // entries before this one are applied
  for (auto& [address, range] : state.ranges) {
    // A segment the trace made: the latest made there before; else one the
    // walk held from its start.
    auto made = made_.find(address);
    if (made != made_.end()) {
      auto after = std::lower_bound(made->second.begin(), made->second.end(), applied,
                                    [](const auto& m, uint64_t entry) { return m.first < entry; });
      if (after != made->second.begin()) {
        range.pool = std::prev(after)->second;
        continue;
      }
    }
    for (const RangeReveal& held : restart_ranges_) {
      if (held.address == address) range.pool = held.range.pool;
    }
  }
  const auto add_range_to = [&state](uint64_t address, const MappedRange& range) {
    state.ranges.emplace(address, range);
    state.reserved += range.size;
  };
  for (const auto& [address, range] : late_ranges_) add_range_to(address, range);
  for (const RangeReveal& reveal : range_reveals_) {
    if (reveal.entry >= applied) add_range_to(reveal.address, reveal.range);
  }
  for (const auto& [address, block] : late_blocks_) {
    state.blocks.emplace(address, block);
    state.held += block.size;
  }
  for (const BlockReveal& reveal : block_reveals_) {
    if (reveal.freed < applied) continue;  // freed by then
    state.held += reveal.at_start.size;
    // Not met yet there (the start is built from nothing): as at the start.
    auto held = state.blocks.find(reveal.address);
    if (held == state.blocks.end()) {
      state.blocks.emplace(reveal.address, reveal.at_start);
      continue;
    }
    held->second.size = reveal.at_start.size;  // met, at size 0
    held->second.requested = reveal.at_start.requested;
    held->second.size_inferred = reveal.at_start.size_inferred;
  }
}

bool StartDiscovery::peak_free(AllocatorHistory::PeakFree& peak) const {
  // What the walk lacked at a position: what was learnt at later entries,
  // and what was held all along.
  int64_t late_reserved = 0;
  int64_t late_held = 0;
  for (const auto& late : late_ranges_) late_reserved += static_cast<int64_t>(late.second.size);
  for (const auto& late : late_blocks_) late_held += static_cast<int64_t>(late.second.size);
  for (const BlockReveal& reveal : block_reveals_) {
    if (reveal.freed == UINT64_MAX) late_held += static_cast<int64_t>(reveal.at_start.size);
  }
  std::vector<std::pair<int64_t, int64_t>> after(deltas_.size() + 1, {late_reserved, late_held});
  for (size_t k = deltas_.size(); k > 0; --k) {
    after[k - 1] = {after[k].first + static_cast<int64_t>(deltas_[k - 1].reserved),
                    after[k].second + static_cast<int64_t>(deltas_[k - 1].held)};
  }
  int64_t best = INT64_MIN;
  for (const Stretch& stretch : stretches_) {
    if (stretch.free == INT64_MIN) continue;
    const auto later =
        std::lower_bound(deltas_.begin(), deltas_.end(), begin_ + stretch.position,
                         [](const Delta& delta, uint64_t entry) { return delta.entry < entry; });
    const auto [reserved, held] = after[static_cast<size_t>(later - deltas_.begin())];
    const int64_t free = stretch.free + reserved - held;
    if (free > best) {
      best = free;
      peak = AllocatorHistory::PeakFree{static_cast<uint64_t>(std::max<int64_t>(free, 0)),
                                        stretch.position,
                                        stretch.reserved + static_cast<uint64_t>(reserved)};
    }
  }
  return best >= 0;
}

bool AllocatorHistory::adopt(StartDiscovery& discovery, const AllocatorState& dump) {
  if (discovery.given_up_ || discovery.begin_ != trace_.begin || discovery.next_ != trace_.end ||
      rule_.expandable || !same_rule(discovery.rule_, rule_) ||
      !same_state(discovery.dump_, dump)) {
    return false;
  }
  if (!discovery.ends_on_the_dumps_blocks(dump) || !discovery.settle(*snapshot_)) return false;
  // The cheap refusals first: a walk whose end is not the dump (a file whose
  // allocator the split rule does not explain) costs nothing more.
  AllocatorState end = discovery.state_;
  discovery.complete(end, trace_.count());
  HistoryCheck check;
  check.possible = true;
  check.rounding = rule_.rounding;
  compare_with_dump(dump, end, check);
  PeakFree peak;
  AllocatorState start;
  if (check.differences != 0 || !discovery.peak_free(peak) || !discovery.start_is_derived(start)) {
    return false;
  }
  check.exact = true;
  check.entries = discovery.entries_;
  check.ranges_at_start = start.ranges.size();
  check.blocks_at_start = start.blocks.size();
  check.inferred_sizes = static_cast<uint64_t>(
      std::count_if(start.blocks.begin(), start.blocks.end(),
                    [](const auto& block) { return block.second.size_inferred; }));
  check_ = std::move(check);
  start_ = std::move(start);
  peak_free_ = peak;
  checkpoints_.clear();
  for (StartDiscovery::Checkpoint& checkpoint : discovery.checkpoints_) {
    discovery.complete(checkpoint.state, checkpoint.position);
    checkpoints_.push_back(Checkpoint{checkpoint.position, std::move(checkpoint.state)});
  }
  derived_forward_ = true;
  discovered_ = true;
  return true;
}

}  // namespace memsnap
