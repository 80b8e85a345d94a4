#include "analysis/core/caching_allocator.h"
#include "analysis/core/pytorch_allocator_policy.h"

#include <algorithm>

#include "memsnap/error.h"

namespace memsnap {
namespace {

// An expandable segment reserves 1.125 times the device's memory; the model
// does not know the device, and any reservation larger than the requests
// behaves the same.
constexpr uint64_t kExpandableSpan = uint64_t{1} << 40;

bool same_pool(PoolId a, PoolId b) {
  return a.first == b.first && a.second == b.second;
}

// Sizes here are at most 2^62 (pytorch::round_size), so this cannot wrap.
uint64_t round_up(uint64_t value, uint64_t step) {
  return (value + step - 1) / step * step;
}

// Reserved bytes of a hostile trace could pass 2^64 (no capacity in the
// check): they stop there.
uint64_t saturating_add(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

}  // namespace

AllocatorModel::AllocatorModel(AllocatorModelSettings settings) : settings_(settings) {
  blocks_.emplace_back();  // index 0 is kNone
}

uint32_t AllocatorModel::pool_index(PoolId id, bool small) {
  uint32_t* const default_at = id.is_default() ? &default_pool_at_[small ? 1 : 0] : nullptr;
  if (default_at != nullptr && *default_at != kNoPool) return *default_at;
  const auto [it, added] = pool_at_.try_emplace(std::tuple{id.first, id.second, small},
                                                static_cast<uint32_t>(pools_.size()));
  if (added) pools_.push_back(Pool{id, small, {}, {}, {}, {}, 0, {}});
  if (default_at != nullptr) *default_at = it->second;
  return it->second;
}

AllocatorModel::Pool* AllocatorModel::default_pool(bool small) {
  const uint32_t at = default_pool_at_[small ? 1 : 0];
  return at == kNoPool ? nullptr : &pools_[at];
}

uint32_t AllocatorModel::new_block(const Block& block) {
  if (!unused_.empty()) {
    const uint32_t index = unused_.back();
    unused_.pop_back();
    blocks_[index] = block;
    return index;
  }
  if (blocks_.size() >= UINT32_MAX) {
    throw Error(ErrorCode::kLimitExceeded, "the allocator model ran out of block ids (4 billion)");
  }
  blocks_.push_back(block);
  return static_cast<uint32_t>(blocks_.size() - 1);
}

void AllocatorModel::cache(uint32_t index) {
  Block& block = blocks_[index];
  Pool& pool = pools_[block.pool];
  block.cached_at = pool.clock;
  // The lists hold what the free blocks hold: a block whose key another
  // already has (a segment the model made where it still holds one, when
  // it follows a file's addresses) stays out of both.
  const auto [at, added] =
      pool.free.emplace(FreeKey{block.stream, block.size, block.address}, FreeEntry{index});
  if (!added) return;
  if (indexed()) stretch_in(pool, at);
  std::vector<uint32_t>* listed = nullptr;
  if (is_whole(index)) {
    listed = &pool.whole;
  } else if (const auto [from, to] = whole_pages(index); from < to) {
    listed = &pool.pages;
  }
  if (listed != nullptr) {
    block.listed_at = static_cast<uint32_t>(listed->size());
    listed->push_back(index);
  }
}

void AllocatorModel::uncache(uint32_t index) {
  const Block& block = blocks_[index];
  Pool& pool = pools_[block.pool];
  const auto it = pool.free.find(FreeKey{block.stream, block.size, block.address});
  if (it == pool.free.end()) return;
  // The block the key names leaves its list too (the last one takes its place).
  Block& leaving = blocks_[it->second.block];
  erase_free(pool, it);
  if (leaving.listed_at == kNotListed) return;
  std::vector<uint32_t>& listed = leaving.segment == 0 ? pool.whole : pool.pages;
  const uint32_t last = listed.back();
  listed[leaving.listed_at] = last;
  blocks_[last].listed_at = leaving.listed_at;
  listed.pop_back();
  leaving.listed_at = kNotListed;
}

template <typename Keep>
std::vector<uint32_t> AllocatorModel::in_free_order(const std::vector<uint32_t>& listed,
                                                    Keep keep) const {
  std::vector<uint32_t> kept;
  for (uint32_t index : listed) {
    if (keep(index)) kept.push_back(index);
  }
  const auto key = [this](uint32_t index) {
    const Block& block = blocks_[index];
    return FreeKey{block.stream, block.size, block.address};
  };
  std::sort(kept.begin(), kept.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  return kept;
}

bool AllocatorModel::is_whole(uint32_t index) const {
  const Block& block = blocks_[index];
  return block.segment == 0 && block.prev == kNone && block.next == kNone;
}

std::pair<uint64_t, uint64_t> AllocatorModel::whole_pages(uint32_t index) const {
  const Block& block = blocks_[index];
  if (block.segment == 0) return {0, 0};
  const Expandable& segment = expandables_[block.segment - 1];
  const uint64_t offset = block.address - segment.base;
  return {segment.base + round_up(offset, segment.page),
          segment.base + (offset + block.size) / segment.page * segment.page};
}

void AllocatorModel::file(uint32_t index) {
  const Block& block = blocks_[index];
  if (block.mapped) {
    cache(index);
  } else {
    pools_[block.pool].unmapped.emplace(std::pair{block.stream, block.address}, index);
    restretch_before(index);
  }
}

void AllocatorModel::unfile(uint32_t index) {
  const Block& block = blocks_[index];
  if (block.mapped) {
    uncache(index);
  } else {
    pools_[block.pool].unmapped.erase(std::pair{block.stream, block.address});
  }
}

absl::btree_map<uint64_t, ModelBlockId> AllocatorModel::load(const AllocatorState& state) {
  absl::btree_map<uint64_t, ModelBlockId> made;
  // An expandable segment's mapped ranges are listed one by one: those of a
  // pool and stream are one segment, unmapped between them and after.
  struct Chain {
    uint32_t segment = 0;  // expandables_ index + 1
    uint32_t last = kNone;
    uint64_t end = 0;
  };
  absl::btree_map<std::tuple<int64_t, int64_t, bool, uint64_t>, Chain> chains;
  const auto link = [&](uint32_t previous, uint32_t index) {
    blocks_[index].prev = previous;
    if (previous != kNone) blocks_[previous].next = index;
  };
  for (const auto& entry : state.ranges) {
    const uint64_t address = entry.first;  // named: lambdas below capture them
    const MappedRange& range = entry.second;
    // The segment's pool: the dump's segment_type, else by its size.
    const std::string_view kind =
        range.kind.empty() ? pytorch::segment_type_of(range.size) : range.kind;
    const bool small = kind == "small";
    const uint32_t pool = pool_index(range.pool, small);
    uint32_t previous = kNone;
    uint32_t segment = 0;
    if (range.expandable) {
      Chain& chain = chains[{range.pool.first, range.pool.second, small, range.stream}];
      if (chain.segment == 0) {
        expandables_.push_back({address, pytorch::expandable_page_size(small)});
        chain.segment = static_cast<uint32_t>(expandables_.size());
        chain.end = address;
      } else if (address > chain.end) {  // the unmapped pages between
        const uint32_t gap = new_block(Block{chain.end, address - chain.end, 0, range.stream, pool,
                                             kNone, kNone, false, false, chain.segment});
        link(chain.last, gap);
        file(gap);
        chain.last = gap;
      }
      segment = chain.segment;
      previous = chain.last;
    }
    uint64_t cursor = address;
    state.for_each_block(address, range, [&](uint64_t at, uint64_t size, const HeldBlock* held) {
      if (size == 0 || at < cursor) return;  // overlapping dump blocks: keep the first
      size = std::min(size, address + range.size - at);
      const uint32_t index =
          new_block(Block{at, size, held != nullptr ? held->requested : 0, range.stream, pool,
                          kNone, kNone, held != nullptr, true, segment});
      link(previous, index);
      if (previous == kNone) segments_[address] = index;
      previous = index;
      cursor = at + size;
      if (held != nullptr) {
        allocated_ = saturating_add(allocated_, size);
        made[at] = ModelBlockId{index};
      } else {
        cache(index);
      }
    });
    reserved_ = saturating_add(reserved_, range.size);
    if (range.expandable) {
      Chain& chain = chains[{range.pool.first, range.pool.second, small, range.stream}];
      chain.last = previous;
      chain.end = address + range.size;
    }
  }
  // Each expandable segment ends in the rest of its reservation, unmapped.
  for (const auto& [key, chain] : chains) {
    const Block& last = blocks_[chain.last];
    const uint32_t tail = new_block(Block{chain.end, kExpandableSpan, 0, last.stream, last.pool,
                                          kNone, kNone, false, false, chain.segment});
    link(chain.last, tail);
    file(tail);
  }
  return made;
}

uint64_t AllocatorModel::expandable_size(uint32_t index) const {
  const Block& block = blocks_[index];
  const bool grows = block.next != kNone && !blocks_[block.next].mapped;
  return block.size + (grows ? blocks_[block.next].size : 0);
}

uint32_t AllocatorModel::find_free(Pool& pool, uint64_t stream, uint64_t size) {
  if (settings_.gc_threshold > 0) ++pool.clock;
  auto it = pool.free.lower_bound(FreeKey{stream, size, 0});
  if (it == pool.free.end() || it->first.stream != stream) return kNone;
  // Of an expandable segment, the block that cannot grow comes first: the
  // one with the least unmapped space after it among those that fit.
  if (blocks_[it->second.block].segment != 0) it = fit_end(pool, it);
  return pytorch::may_take_cached(size, it->first.size, settings_.split) ? it->second.block : kNone;
}

AllocatorModel::FreeMap::iterator AllocatorModel::fit_end(Pool& pool, FreeMap::iterator at) const {
  if (settings_.best_fit == BestFit::kWalk) {
    // PyTorch's loop (get_free_block), block by block.
    for (auto next = std::next(at);
         next != pool.free.end() && next->first.stream == at->first.stream &&
         blocks_[at->second.block].segment != 0 &&
         expandable_size(next->second.block) < expandable_size(at->second.block);
         ++next) {
      at = next;
    }
    return at;
  }
  if (!at->second.goes_on) return at;
  const auto next = std::next(at);
  if (!next->second.goes_on) return next;
  // Two steps or more: a stretch says where they end.
  const auto stretch = stretch_at(pool, at->first);
  if (stretch != pool.stretches.end()) return pool.free.find(stretch->second);
  while (at->second.goes_on) ++at;  // never: each such run is a stretch
  return at;
}

AllocatorModel::StretchMap::iterator AllocatorModel::stretch_at(Pool& pool, const FreeKey& key) {
  auto after = pool.stretches.upper_bound(key);
  if (after == pool.stretches.begin()) return pool.stretches.end();
  const auto stretch = std::prev(after);
  return stretch->second < key ? pool.stretches.end() : stretch;
}

void AllocatorModel::step_on(Pool& pool, FreeMap::iterator at) {
  at->second.goes_on = true;
  // The steps just before it and just after it, each alone or a stretch,
  // and this one: a stretch when two or more.
  FreeKey first = at->first;
  bool more = false;
  if (at != pool.free.begin()) {
    if (const auto before = std::prev(at); before->second.goes_on) {
      more = true;
      first = before->first;
      if (const auto ending = stretch_at(pool, before->first); ending != pool.stretches.end()) {
        first = ending->first;
        pool.stretches.erase(ending);
      }
    }
  }
  const auto next = std::next(at);
  FreeKey last = next->first;
  if (next->second.goes_on) {
    more = true;
    if (const auto from_next = pool.stretches.find(next->first);
        from_next != pool.stretches.end()) {
      last = from_next->second;
      pool.stretches.erase(from_next);
    } else {
      last = std::next(next)->first;
    }
  }
  if (more) pool.stretches[first] = last;
}

void AllocatorModel::step_off(Pool& pool, FreeMap::iterator at, FreeMap::iterator next) {
  at->second.goes_on = false;
  const auto stretch = stretch_at(pool, at->first);
  if (stretch == pool.stretches.end()) return;  // the step was alone
  const FreeKey first = stretch->first;
  const FreeKey last = stretch->second;
  pool.stretches.erase(stretch);
  // The steps before it and those after it stay stretches where two or more.
  if (first < at->first && !(std::prev(at)->first == first)) pool.stretches[first] = at->first;
  if (next->first < last && !(std::next(next)->first == last)) pool.stretches[next->first] = last;
}

void AllocatorModel::stretch_in(Pool& pool, FreeMap::iterator at) {
  at->second.grows = grows(at->second.block);
  const bool first = at == pool.free.begin();
  const auto before = first ? pool.free.end() : std::prev(at);
  // The block before went on to the block after this one: it stops here
  // for now (this one's step is not set yet), then both steps are set.
  if (!first && before->second.goes_on) step_off(pool, before, std::next(at));
  // Only a block that grows goes on (goes_on implies grows): most blocks
  // cost no more than these flags.
  if (at->second.grows) set_goes_on(pool, at, fit_goes_on(pool, at));
  if (!first && before->second.grows) set_goes_on(pool, before, fit_goes_on(pool, before));
}

void AllocatorModel::restretch(Pool& pool, FreeMap::iterator at) {
  at->second.grows = grows(at->second.block);
  set_goes_on(pool, at, fit_goes_on(pool, at));
  if (at == pool.free.begin()) return;
  const auto before = std::prev(at);
  set_goes_on(pool, before, fit_goes_on(pool, before));
}

void AllocatorModel::restretch_before(uint32_t unmapped) {
  const uint32_t before = blocks_[unmapped].prev;
  if (!indexed() || before == kNone) return;
  const Block& block = blocks_[before];
  Pool& pool = pools_[block.pool];
  const auto at = pool.free.find(FreeKey{block.stream, block.size, block.address});
  if (at != pool.free.end()) restretch(pool, at);
}

void AllocatorModel::erase_free(Pool& pool, FreeMap::iterator at) {
  if (!indexed()) {
    pool.free.erase(at);
    return;
  }
  // Out of every stretch first (no stretch names a key `free` lacks), then
  // the block before it steps to the one after it, or not.
  set_goes_on(pool, at, false);
  bool before_grows = false;
  if (at != pool.free.begin()) {
    const auto before = std::prev(at);
    set_goes_on(pool, before, false);
    before_grows = before->second.grows;
  }
  const auto next = pool.free.erase(at);
  if (before_grows) {
    const auto before = std::prev(next);
    set_goes_on(pool, before, fit_goes_on(pool, before));
  }
}

void AllocatorModel::collect_garbage(std::vector<ModelSegmentEvent>& events) {
  if (settings_.capacity == UINT64_MAX) return;
  const auto limit =
      static_cast<uint64_t>(settings_.gc_threshold * static_cast<double>(settings_.capacity));
  if (reserved_ <= limit) return;
  const uint64_t target = reserved_ - limit;
  const Pool* large = default_pool(false);  // the default pool's large blocks alone
  if (large == nullptr) return;
  const Pool& pool = *large;
  // Cached whole segments, by age: released in passes, each releasing
  // those at least as old as the mean age at its start, until the target
  // is met or a pass releases nothing.
  const auto age = [&](uint32_t index) { return pool.clock - blocks_[index].cached_at; };
  uint64_t total_age = 0;
  uint64_t count = 0;
  for (uint32_t index : pool.whole) {
    if (!is_whole(index)) continue;
    total_age += age(index);
    ++count;
  }
  uint64_t released = 0;
  bool freed = true;
  while (released < target && freed && count > 0) {
    const double mean = static_cast<double>(total_age) / static_cast<double>(count);
    const std::vector<uint32_t> old = in_free_order(pool.whole, [&](uint32_t index) {
      return is_whole(index) && static_cast<double>(age(index)) >= mean;
    });
    freed = !old.empty();
    for (uint32_t index : old) {
      released += blocks_[index].size;
      total_age -= age(index);
      --count;
      release(index, events);
    }
  }
}

bool AllocatorModel::splits(const Block& block, uint64_t size) const {
  return pytorch::should_split(pools_[block.pool].small, size, block.size - size, settings_.split);
}

void AllocatorModel::release(uint32_t index, std::vector<ModelSegmentEvent>& events) {
  Block& block = blocks_[index];
  uncache(index);
  events.push_back({false, false, block.address, block.size, block.stream});
  segments_.erase(block.address);
  reserved_ -= std::min(reserved_, block.size);
  unused_.push_back(index);
}

bool AllocatorModel::release_oversize(Pool& pool, uint64_t stream, uint64_t size,
                                      std::vector<ModelSegmentEvent>& events) {
  const uint64_t max_split = settings_.split.max_split_size;
  if (max_split == UINT64_MAX) return false;
  const uint64_t wanted = std::max(size, max_split);
  auto it = pool.free.lower_bound(FreeKey{stream, wanted, 0});
  if (it != pool.free.end() && it->first.stream == stream && is_whole(it->second.block)) {
    release(it->second.block, events);  // one oversize block is enough
    return true;
  }
  // None is: release the stream's oversize blocks from the largest down
  // until enough bytes are (those of expandable segments stay).
  uint64_t released = 0;
  while (released < wanted && it != pool.free.begin()) {
    --it;
    if (it->first.stream != stream || it->first.size < max_split) break;
    const uint32_t index = it->second.block;
    if (!is_whole(index)) continue;
    released += blocks_[index].size;
    release(index, events);
    it = pool.free.lower_bound(FreeKey{stream, wanted, 0});  // the map changed under it
  }
  return released >= wanted;
}

uint32_t AllocatorModel::carve(uint32_t index, uint64_t at, uint64_t end) {
  // The part after `end`, then the part from `at`: each a block of its own
  // after the one before it in the segment.
  const auto split_at = [&](uint32_t from, uint64_t address) {
    Block& block = blocks_[from];
    const Block rest{address,
                     block.address + block.size - address,
                     0,
                     block.stream,
                     block.pool,
                     from,
                     block.next,
                     false,
                     block.mapped,
                     block.segment};
    const uint32_t rest_index = new_block(rest);
    Block& before = blocks_[from];  // new_block may have moved it
    if (before.next != kNone) blocks_[before.next].prev = rest_index;
    before.next = rest_index;
    before.size = address - before.address;
    return rest_index;
  };
  const Block& block = blocks_[index];
  if (end < block.address + block.size) file(split_at(index, end));
  if (at == blocks_[index].address) return index;
  return split_at(index, at);
}

uint32_t AllocatorModel::map_block(uint32_t index, uint64_t size,
                                   std::vector<ModelSegmentEvent>& events) {
  unfile(index);
  const Block& block = blocks_[index];
  const uint64_t page = expandables_[block.segment - 1].page;
  const uint64_t bytes = std::min(round_up(size, page), block.size);
  if (bytes < block.size) carve(index, block.address, block.address + bytes);
  Block& mapped = blocks_[index];
  mapped.mapped = true;
  reserved_ = saturating_add(reserved_, bytes);
  events.push_back({true, true, mapped.address, bytes, mapped.stream});
  merge(index, mapped.prev);
  merge(index, blocks_[index].next);
  if (blocks_[index].prev == kNone) segments_[blocks_[index].address] = index;
  cache(index);
  return index;
}

uint32_t AllocatorModel::grow_expandable(uint32_t pool_at, uint64_t stream, uint64_t size,
                                         const AddressOf& address_of,
                                         std::vector<ModelSegmentEvent>& events) {
  const auto allocatable = [&](uint32_t index) {
    return index != kNone && !blocks_[index].allocated;
  };
  // The first unmapped range of the stream (by address) that, with the free
  // block before it and the free blocks after it, holds the request.
  uint32_t start = kNone;
  Pool& pool = pools_[pool_at];
  for (auto it = pool.unmapped.lower_bound({stream, 0});
       it != pool.unmapped.end() && it->first.first == stream; ++it) {
    uint32_t from = it->second;
    if (allocatable(blocks_[from].prev) && blocks_[blocks_[from].prev].mapped) {
      from = blocks_[from].prev;
    }
    uint64_t total = 0;
    for (uint32_t b = from; allocatable(b) && total < size; b = blocks_[b].next) {
      total += blocks_[b].size;
    }
    if (total >= size) {
      start = from;
      break;
    }
  }
  // The bytes it maps, page by page: refused whole when the device has no room.
  const uint64_t page = pytorch::expandable_page_size(pools_[pool_at].small);
  uint64_t to_map = round_up(size, page);
  if (start != kNone && blocks_[start].mapped) {
    to_map = round_up(size - std::min(size, blocks_[start].size), page);
  }
  if (reserved_ > settings_.capacity || to_map > settings_.capacity - reserved_) return kNone;
  if (start == kNone) {  // a new expandable segment
    // Its reservation holds the request whatever its size.
    const uint64_t span = std::max(kExpandableSpan, round_up(size, page));
    const uint64_t base = address_of(to_map, span);
    expandables_.push_back({base, page});
    start = new_block(Block{base, span, 0, stream, pool_at, kNone, kNone, false, false,
                            static_cast<uint32_t>(expandables_.size())});
    segments_[base] = start;
    file(start);
  }
  uint32_t candidate = start;
  if (!blocks_[candidate].mapped) {
    candidate = map_block(candidate, std::min(blocks_[candidate].size, size), events);
  }
  while (blocks_[candidate].size < size) {
    // The next pages, merged with the candidate into one block.
    const uint32_t next = blocks_[candidate].next;
    candidate =
        map_block(next, std::min(size - blocks_[candidate].size, blocks_[next].size), events);
  }
  uncache(candidate);
  return candidate;
}

std::optional<ModelBlockId> AllocatorModel::malloc(uint64_t requested, uint64_t stream,
                                                   PoolId pool_id, const AddressOf& address_of,
                                                   std::vector<ModelSegmentEvent>& events) {
  const uint64_t size = pytorch::round_size(requested, settings_.split);
  const uint32_t pool_at = pool_index(pool_id, pytorch::is_small_pool(size));
  uint32_t index = find_free(pools_[pool_at], stream, size);
  if (index != kNone) {
    uncache(index);
  } else if (settings_.split.expandable) {
    if (settings_.gc_threshold > 0) collect_garbage(events);
    index = grow_expandable(pool_at, stream, size, address_of, events);
    if (index == kNone) {
      release_oversize(pools_[pool_at], stream, size, events);
      index = grow_expandable(pool_at, stream, size, address_of, events);
    }
    if (index == kNone) {
      empty_cache(events);
      index = grow_expandable(pool_at, stream, size, address_of, events);
    }
    if (index == kNone) return std::nullopt;
  } else {
    if (settings_.gc_threshold > 0) collect_garbage(events);
    const uint64_t segment = pytorch::allocation_size(size);
    const auto fits = [&] {
      return reserved_ <= settings_.capacity && segment <= settings_.capacity - reserved_;
    };
    if (!fits()) release_oversize(pools_[pool_at], stream, size, events);
    if (!fits()) empty_cache(events);
    if (!fits()) return std::nullopt;
    const uint64_t address = address_of(segment, segment);
    index = new_block(Block{address, segment, 0, stream, pool_at, kNone, kNone, false, true, 0});
    segments_[address] = index;
    reserved_ = saturating_add(reserved_, segment);
    events.push_back({true, false, address, segment, stream});
  }
  if (splits(blocks_[index], size)) {
    const Block& block = blocks_[index];
    carve(index, block.address, block.address + size);
  }
  Block& taken = blocks_[index];
  taken.allocated = true;
  taken.requested = requested;
  allocated_ = saturating_add(allocated_, taken.size);
  return ModelBlockId{index};
}

uint64_t AllocatorModel::merge(uint32_t index, uint32_t other_index) {
  if (other_index == kNone || blocks_[other_index].allocated ||
      blocks_[other_index].mapped != blocks_[index].mapped) {
    return 0;
  }
  unfile(other_index);
  Block& block = blocks_[index];
  const Block& other = blocks_[other_index];
  if (other.address < block.address) {  // the one before
    block.address = other.address;
    block.prev = other.prev;
    if (block.prev != kNone) blocks_[block.prev].next = index;
  } else {
    block.next = other.next;
    if (block.next != kNone) blocks_[block.next].prev = index;
  }
  block.size += other.size;
  unused_.push_back(other_index);
  return other.size;
}

void AllocatorModel::free(ModelBlockId id) {
  const uint32_t index = id.value;
  Block& block = blocks_[index];
  if (!block.allocated) return;
  block.allocated = false;
  allocated_ -= std::min(allocated_, block.size);
  merge(index, block.prev);
  merge(index, block.next);
  if (block.prev == kNone) segments_[block.address] = index;  // it heads its segment now
  cache(index);
}

void AllocatorModel::unmap(uint32_t index, uint64_t from, uint64_t to,
                           std::vector<ModelSegmentEvent>& events) {
  uncache(index);
  const uint32_t middle = carve(index, from, to);
  if (middle != index) cache(index);  // the mapped part before stays cached
  Block& block = blocks_[middle];
  block.mapped = false;
  reserved_ -= std::min(reserved_, to - from);
  events.push_back({false, true, from, to - from, block.stream});
  merge(middle, block.prev);
  merge(middle, blocks_[middle].next);
  if (blocks_[middle].prev == kNone) segments_[blocks_[middle].address] = middle;
  file(middle);
}

void AllocatorModel::empty_cache(std::vector<ModelSegmentEvent>& events) {
  // The default pool's large blocks, then its small ones, each in its
  // free-block order, as release_cached_blocks walks them: whole segments
  // released, then the whole pages of expandable segments' cached blocks
  // unmapped. A private pool (a CUDA graph's, a MemPool) is released only
  // once nothing uses it, which a trace does not say: its segments stay.
  for (bool small : {false, true}) {
    const Pool* pool = default_pool(small);
    if (pool == nullptr) continue;
    const std::vector<uint32_t> whole =
        in_free_order(pool->whole, [this](uint32_t index) { return is_whole(index); });
    const std::vector<uint32_t> pages = in_free_order(pool->pages, [](uint32_t) { return true; });
    for (uint32_t index : whole) release(index, events);
    for (uint32_t index : pages) {
      const auto [from, to] = whole_pages(index);
      unmap(index, from, to, events);
    }
  }
}

bool AllocatorModel::release_segment(uint64_t address, std::vector<ModelSegmentEvent>& events) {
  auto it = segments_.find(address);
  if (it == segments_.end()) return false;
  const Block& block = blocks_[it->second];
  if (block.allocated || block.next != kNone || block.segment != 0) return false;
  release(it->second, events);
  return true;
}

uint32_t AllocatorModel::block_at(uint64_t address) const {
  // The last segment at or before the address, walked to the block.
  auto head = segments_.upper_bound(address);
  if (head == segments_.begin()) return kNone;
  for (uint32_t i = std::prev(head)->second; i != kNone; i = blocks_[i].next) {
    const Block& block = blocks_[i];
    if (address < block.address) return kNone;
    if (address < block.address + block.size) return i;
  }
  return kNone;
}

bool AllocatorModel::unmap_range(uint64_t address, uint64_t size,
                                 std::vector<ModelSegmentEvent>& events) {
  const uint32_t i = block_at(address);
  if (i == kNone) return false;
  const Block& block = blocks_[i];
  if (block.allocated || !block.mapped || block.segment == 0 ||
      address + size > block.address + block.size) {
    return false;
  }
  unmap(i, address, address + size, events);
  return true;
}

std::optional<ModelBlockId> AllocatorModel::take_at(uint64_t address, uint64_t requested,
                                                    uint64_t stream, PoolId pool) {
  const uint64_t size = pytorch::round_size(requested, settings_.split);
  const uint32_t i = block_at(address);
  if (i == kNone) return std::nullopt;
  const Block& block = blocks_[i];
  const Pool& owner = pools_[block.pool];
  if (block.allocated || !block.mapped || block.stream != stream || !same_pool(owner.id, pool) ||
      owner.small != (pytorch::is_small_pool(size)) ||
      address + size > block.address + block.size) {
    return std::nullopt;
  }
  uncache(i);
  // The rest after it is split off as a split would (else it goes with it).
  Block tail_probe = block;
  tail_probe.size = block.address + block.size - address;
  const uint64_t end = splits(tail_probe, size) ? address + size : block.address + block.size;
  const uint32_t taken = carve(i, address, end);
  if (taken != i) cache(i);  // the free part before it
  Block& result = blocks_[taken];
  result.allocated = true;
  result.requested = requested;
  allocated_ = saturating_add(allocated_, result.size);
  return ModelBlockId{taken};
}

AllocatorState AllocatorModel::state() const {
  AllocatorState state;
  for (const auto& [address, first] : segments_) {
    // A segment's blocks; an expandable segment lists each mapped run as a
    // range of its own, as the dump does.
    MappedRange range;
    uint64_t start = 0;
    bool open = false;
    const auto close = [&] {
      if (!open) return;
      state.ranges[start] = range;
      state.reserved += range.size;
      open = false;
    };
    for (uint32_t i = first; i != kNone; i = blocks_[i].next) {
      const Block& block = blocks_[i];
      if (!block.mapped) {
        close();
        continue;
      }
      if (!open) {
        range = MappedRange{};
        range.stream = block.stream;
        range.pool = pools_[block.pool].id;
        range.kind = pools_[block.pool].small ? "small" : "large";
        range.expandable = block.segment != 0;
        start = block.address;
        open = true;
      }
      range.size += block.size;
      if (block.allocated) {
        state.blocks[block.address] = HeldBlock{block.size, block.requested};
        state.held += block.size;
      }
    }
    close();
  }
  return state;
}

}  // namespace memsnap
