// A model of PyTorch's CUDA caching allocator policy
// (c10/cuda/CUDACachingAllocator.cpp), driven by a trace's requests and
// frees: which cached block each request takes, where blocks split and
// merge, and which segments it reserves (cudaMalloc) and releases (cudaFree)
// under any settings and any device capacity. `memsnap whatif` runs it with
// the file's own settings, where it must make the segments the file
// recorded, and with others, to say what they would have done.
//
// The policy, as the allocator applies it to one request:
//   1. round the request (512 bytes, or roundup_power2_divisions);
//   2. the pool: small for rounded sizes up to 1 MiB, else large; each
//      private pool (CUDA graphs, MemPool) has its own two; free blocks are
//      looked up by (stream, size, address), the smallest that fits first,
//      never an oversize block (max_split_size or more) for a smaller
//      request, nor one 20 MiB or more larger than a request of
//      max_split_size or more;
//   3. no cached block: a new segment (2 MiB for the small pool, 20 MiB for
//      requests under 10 MiB, else the request rounded up to 2 MiB); when
//      the device has no room for it, release cached oversize blocks, then
//      every cached whole segment, then try again, then fail (an OOM);
//   4. split the block when the rest is worth keeping (512 bytes or more in
//      the small pool; more than 1 MiB in the large one, for requests under
//      max_split_size), the request taking the front.
// A free merges the block with free neighbours of its segment and caches it.
//
// With expandable_segments, a pool's segment on a stream is one large
// virtual range whose pages (2 MiB small, 20 MiB large) are mapped as
// requests need them (segment_map) and unmapped only by empty_cache or
// before a retried allocation (segment_unmap); a free block that borders
// unmapped space is taken last, since it can still grow.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/container/btree_map.h>
#include <absl/container/flat_hash_map.h>

#include "analysis/core/allocator_state.h"
#include "memsnap/model.h"

namespace memsnap {

// How the model finds PyTorch's best fit among the cached blocks of
// expandable segments (AllocatorModel::find_free): an index of the
// stretches PyTorch's loop walks, or that loop itself, block by block (the
// tests' reference: a request can cost every cached block of the segment).
enum class BestFit : uint8_t { kIndexed, kWalk };

struct AllocatorModelSettings {
  SplitRule split;  // rounding, max_split_size, roundup_power2_divisions
  // What cudaMalloc can reserve in all; UINT64_MAX: it never fails.
  uint64_t capacity = UINT64_MAX;
  // garbage_collection_threshold (0: off): before reserving, when more than
  // this fraction of the capacity is reserved, the oldest cached whole
  // segments of the default large pool are released. PyTorch applies it
  // only under a per-process memory fraction; the model takes the capacity
  // as that limit.
  double gc_threshold = 0;
  BestFit best_fit = BestFit::kIndexed;
};

// A segment the model reserved or released: what the trace would record as
// segment_alloc or segment_free (segment_map or segment_unmap for the pages
// of an expandable segment).
struct ModelSegmentEvent {
  bool reserved = true;  // segment_alloc or segment_map; false: segment_free or segment_unmap
  bool expandable = false;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
};

using ModelBlockId = Id<struct ModelBlockTag>;

class AllocatorModel {
 public:
  explicit AllocatorModel(AllocatorModelSettings settings);

  // Starts from a state (the allocator's before a trace's first entry): each
  // range a segment, its held blocks allocated and the gaps between them
  // free (cached). Returns the blocks it made, by address.
  absl::btree_map<uint64_t, ModelBlockId> load(const AllocatorState& state);

  // Where a new segment goes (a cudaMalloc's answer): `size` bytes, or for
  // an expandable segment a virtual range of `span` bytes whose first
  // `size` bytes are mapped at once.
  using AddressOf = std::function<uint64_t(uint64_t size, uint64_t span)>;
  // A request of `requested` bytes on a stream and pool: the block it takes,
  // or nullopt when the device has no room (an OOM). The segments it reserves
  // and releases are appended to `events`.
  std::optional<ModelBlockId> malloc(uint64_t requested, uint64_t stream, PoolId pool,
                                     const AddressOf& address_of,
                                     std::vector<ModelSegmentEvent>& events);
  // The request served at `address` instead, as a file recorded it: the
  // cached block holding [address, address + rounded size) is split there.
  // nullopt when no cached block of the pool and stream holds it.
  std::optional<ModelBlockId> take_at(uint64_t address, uint64_t requested, uint64_t stream,
                                      PoolId pool);
  // The block is freed (free_completed): merged with free neighbours, cached.
  void free(ModelBlockId id);
  // torch.cuda.empty_cache(): every cached whole segment released.
  void empty_cache(std::vector<ModelSegmentEvent>& events);
  // Releases the segment at `address` if it is cached whole (no block of it
  // in use); returns whether it was.
  bool release_segment(uint64_t address, std::vector<ModelSegmentEvent>& events);
  // Unmaps [address, address + size) of an expandable segment if a cached
  // block holds it; returns whether one did.
  bool unmap_range(uint64_t address, uint64_t size, std::vector<ModelSegmentEvent>& events);

  [[nodiscard]] uint64_t reserved() const { return reserved_; }
  [[nodiscard]] uint64_t allocated() const { return allocated_; }
  [[nodiscard]] uint64_t segment_count() const { return segments_.size(); }
  [[nodiscard]] uint64_t address_of(ModelBlockId block) const {
    return blocks_[block.value].address;
  }
  [[nodiscard]] uint64_t size_of(ModelBlockId block) const { return blocks_[block.value].size; }
  // The state as AllocatorState (ranges and allocated blocks).
  [[nodiscard]] AllocatorState state() const;

 private:
  static constexpr uint32_t kNone = 0;  // block 0 is never used
  static constexpr uint32_t kNotListed = UINT32_MAX;
  struct Block {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requested = 0;
    uint64_t stream = 0;
    uint32_t pool = 0;  // index in pools_
    uint32_t prev = kNone;
    uint32_t next = kNone;
    bool allocated = false;
    bool mapped = true;      // false: an expandable segment's unmapped pages
    uint32_t segment = 0;    // an expandable segment's index in expandables_ + 1; 0: none
    uint64_t cached_at = 0;  // its pool's clock when it was cached (garbage collection's age)
    // Its place in its pool's `whole` or `pages` (kNotListed: in neither).
    uint32_t listed_at = kNotListed;
  };
  struct Expandable {
    uint64_t base = 0;  // pages are counted from here
    uint64_t page = 0;
  };
  // Free blocks of one pool, by (stream, size, address), as the allocator
  // orders them.
  struct FreeKey {
    uint64_t stream;
    uint64_t size;
    uint64_t address;
    friend bool operator<(const FreeKey& a, const FreeKey& b) {
      if (a.stream != b.stream) return a.stream < b.stream;
      if (a.size != b.size) return a.size < b.size;
      return a.address < b.address;
    }
    friend bool operator==(const FreeKey& a, const FreeKey& b) = default;
  };
  // A free block in its pool's `free`. With the stretches (indexed()),
  // what the best fit needs of it, kept beside its key so that caching a
  // block next to it reads no other block (without them, both stay false).
  struct FreeEntry {
    uint32_t block = kNone;
    // An expandable segment's block before unmapped pages: the size it
    // could grow to (expandable_size) is more than its size.
    bool grows = false;
    bool goes_on = false;  // the best fit goes on from it to the next (a step)
  };
  using FreeMap = absl::btree_map<FreeKey, FreeEntry>;
  using StretchMap = absl::btree_map<FreeKey, FreeKey>;
  struct Pool {
    PoolId id;
    bool small = false;
    FreeMap free;
    // PyTorch's best fit, from the smallest block that fits, goes on to the
    // next free block while the current one is an expandable segment's and
    // the next could grow to less (expandable_size): a step, each free
    // entry's goes_on. Runs of two steps or more are stretches here: the
    // first key -> the key where the walk stops. A request jumps to a
    // stretch's end instead of walking it: a segment of K mapped ranges,
    // each a free block before unmapped pages, made each of K requests walk
    // them all (issue 56: 13-17 s of CPU for K = 10,000). A single step, the
    // common case (the last free block of a segment before its unmapped
    // rest), makes no stretch: caching and taking blocks beside it costs
    // no search.
    StretchMap stretches;
    // Of those, the ones empty_cache and garbage collection may release:
    // cached whole segments, and blocks of expandable segments that hold a
    // whole page. Walking only these keeps a device full of cached blocks
    // that cannot be released (one per stream, say) from making each
    // retried request cost them all (issue 41: 1.38 s to 0.12 s on 50,000
    // streams). Unordered, so that caching a block costs no second search
    // tree (most cached blocks of a large pool are whole segments: an
    // ordered index made the what-if table 28% slower); a release sorts the
    // blocks it takes into the free blocks' order, and empty_cache releases
    // all it sorts. A block enters when `free` takes it: it becomes whole
    // only by merging with a neighbour, never while cached. load() links a
    // block to the next after caching it, so a use checks the block again.
    std::vector<uint32_t> whole;
    std::vector<uint32_t> pages;
    uint64_t clock = 0;  // lookups in this pool while garbage collection is on
    // Expandable segments' unmapped blocks, by (stream, address).
    absl::btree_map<std::pair<uint64_t, uint64_t>, uint32_t> unmapped;
  };

  uint32_t pool_index(PoolId id, bool small);
  Pool* default_pool(bool small);  // nullptr until a block uses it
  uint32_t new_block(const Block& block);
  void cache(uint32_t index);    // into its pool's free blocks
  void uncache(uint32_t index);  // out of them
  // A cached whole segment (one block, no expandable segment's).
  [[nodiscard]] bool is_whole(uint32_t index) const;
  // The blocks of `listed` (a pool's `whole` or `pages`) that `keep` says,
  // in the free blocks' order.
  template <typename Keep>
  [[nodiscard]] std::vector<uint32_t> in_free_order(const std::vector<uint32_t>& listed,
                                                    Keep keep) const;
  // The whole pages of an expandable segment's block: [from, to), empty
  // when it holds none (or is no expandable segment's).
  [[nodiscard]] std::pair<uint64_t, uint64_t> whole_pages(uint32_t index) const;
  // The smallest cached block of the pool on the stream that the request may take.
  uint32_t find_free(Pool& pool, uint64_t stream, uint64_t size);
  // The stretches (Pool::stretches): kept only where an expandable segment
  // exists and the settings ask for them.
  [[nodiscard]] bool indexed() const {
    return settings_.best_fit == BestFit::kIndexed && !expandables_.empty();
  }
  // Whether the block is an expandable segment's before unmapped pages.
  [[nodiscard]] bool grows(uint32_t index) const {
    const Block& block = blocks_[index];
    return block.segment != 0 && block.next != kNone && !blocks_[block.next].mapped;
  }
  // expandable_size of a free block, by its entry.
  [[nodiscard]] uint64_t fit_size(FreeMap::const_iterator at) const {
    return at->second.grows ? expandable_size(at->second.block) : at->first.size;
  }
  // Whether PyTorch's best fit goes on from this free block to the next. A
  // block that cannot grow stops it: the next is as large or larger.
  [[nodiscard]] bool fit_goes_on(const Pool& pool, FreeMap::const_iterator at) const {
    if (!at->second.grows) return false;
    const auto next = std::next(at);
    return next != pool.free.end() && next->first.stream == at->first.stream &&
           fit_size(next) < fit_size(at);
  }
  // Where the best fit that reaches this free block stops.
  [[nodiscard]] FreeMap::iterator fit_end(Pool& pool, FreeMap::iterator at) const;
  // The stretch that holds `key` (first <= key <= last), or stretches.end().
  [[nodiscard]] static StretchMap::iterator stretch_at(Pool& pool, const FreeKey& key);
  // Turns the step from the free block to the next on, joining it to the
  // steps just before and after it; off, cutting its stretch there
  // (`next`: the block after it, which a block just cached may not be).
  static void step_on(Pool& pool, FreeMap::iterator at);
  static void step_off(Pool& pool, FreeMap::iterator at, FreeMap::iterator next);
  // Records whether the fit goes on from the free block to the next (no
  // search where that is no change: the common case).
  static void set_goes_on(Pool& pool, FreeMap::iterator at, bool goes_on) {
    if (at->second.goes_on == goes_on) return;
    if (goes_on) {
      step_on(pool, at);
    } else {
      step_off(pool, at, std::next(at));
    }
  }
  // The block's steps (from it, and to it from the one before) as they are
  // now: when the size it could grow to changed.
  void restretch(Pool& pool, FreeMap::iterator at);
  // The same for a block that just entered `free`.
  void stretch_in(Pool& pool, FreeMap::iterator at);
  // The same for the cached block before an unmapped one just filed: the
  // size it could grow to is that unmapped block's. The size a cached
  // block could grow to changes only when the block after it is mapped
  // (the two then merge: it leaves `free`) or is unmapped, merged or split
  // while out of `pools_[].unmapped`, and is filed again after.
  void restretch_before(uint32_t unmapped);
  // Takes the free block out of `free` and its stretches.
  void erase_free(Pool& pool, FreeMap::iterator at);
  // PyTorch's garbage_collect_cached_blocks (settings_.gc_threshold).
  void collect_garbage(std::vector<ModelSegmentEvent>& events);
  // pytorch::should_split for a block of this model.
  [[nodiscard]] bool splits(const Block& block, uint64_t size) const;
  // Releases one cached whole segment (its only block).
  void release(uint32_t index, std::vector<ModelSegmentEvent>& events);
  // PyTorch's release_available_cached_blocks: oversize cached blocks of the
  // stream, for a request of `size` bytes; returns whether enough was.
  bool release_oversize(Pool& pool, uint64_t stream, uint64_t size,
                        std::vector<ModelSegmentEvent>& events);
  // Merges `other` into `block` (its neighbour) when it is free and mapped
  // alike; returns the bytes merged.
  uint64_t merge(uint32_t index, uint32_t other_index);
  // Expandable segments: a block of at least `size` bytes mapped for the
  // request (kNone when the device has no room), the pages it maps, the
  // pages of a cached block unmapped.
  uint32_t grow_expandable(uint32_t pool, uint64_t stream, uint64_t size,
                           const AddressOf& address_of, std::vector<ModelSegmentEvent>& events);
  uint32_t map_block(uint32_t index, uint64_t size, std::vector<ModelSegmentEvent>& events);
  void unmap(uint32_t index, uint64_t from, uint64_t to, std::vector<ModelSegmentEvent>& events);
  // Splits [at, end) of block off as a block of its own; returns it (the
  // block keeps the part before `at`, a third block the part after `end`).
  uint32_t carve(uint32_t index, uint64_t at, uint64_t end);
  [[nodiscard]] uint64_t expandable_size(uint32_t index) const;
  // The block holding `address` (kNone: none).
  [[nodiscard]] uint32_t block_at(uint64_t address) const;
  void file(uint32_t index);  // cached or unmapped, as it is
  void unfile(uint32_t index);

  AllocatorModelSettings settings_;
  std::vector<Block> blocks_;
  std::vector<uint32_t> unused_;  // indices of blocks_ to reuse
  std::vector<Pool> pools_;
  // Pools by (id, small); the default pool's two, the common case, also
  // here (kNoPool until made).
  static constexpr uint32_t kNoPool = UINT32_MAX;
  absl::flat_hash_map<std::tuple<int64_t, int64_t, bool>, uint32_t> pool_at_;
  std::array<uint32_t, 2> default_pool_at_{kNoPool, kNoPool};  // large, small
  std::vector<Expandable> expandables_;
  absl::btree_map<uint64_t, uint32_t> segments_;  // address -> its first block
  uint64_t reserved_ = 0;
  uint64_t allocated_ = 0;
};

}  // namespace memsnap
