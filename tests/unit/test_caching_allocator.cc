// The model of PyTorch's caching allocator, rule by rule, on hand-written
// sequences whose outcome is worked out here from the allocator's policy
// (rounding, pools, segment sizes, best fit, splitting, merging, streams,
// max_split_size, the order of releases before a retry, expandable pages);
// then its index of the best fit among expandable segments' blocks against
// PyTorch's loop itself (BestFit::kWalk) on random sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "analysis/core/caching_allocator.h"

namespace memsnap {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A model whose new segments go to consecutive addresses from 0x1000'0000'0000
// (1 GiB apart, so that no two ever touch), with the events it made.
struct Harness {
  explicit Harness(AllocatorModelSettings settings = {}) : model(settings) {}
  AllocatorModel model;
  std::vector<ModelSegmentEvent> events;
  uint64_t next = 0x1000'0000'0000;

  ModelBlockId malloc(uint64_t size, uint64_t stream = 0) {
    std::optional<ModelBlockId> block = try_malloc(size, stream);
    EXPECT_TRUE(block.has_value()) << size;
    return block.value_or(ModelBlockId{});
  }
  std::optional<ModelBlockId> try_malloc(uint64_t size, uint64_t stream = 0) {
    return model.malloc(
        size, stream, PoolId{},
        [this](uint64_t /*size*/, uint64_t span) {
          const uint64_t at = next;
          next += std::max<uint64_t>(span, uint64_t{1} << 30);
          return at;
        },
        events);
  }
  uint64_t address(ModelBlockId block) const { return model.address_of(block); }
  uint64_t size(ModelBlockId block) const { return model.size_of(block); }
};

AllocatorModelSettings with_max_split(uint64_t bytes) {
  AllocatorModelSettings settings;
  settings.split.max_split_size = bytes;
  return settings;
}

TEST(CachingAllocator, RoundsAndSizesSegmentsByPool) {
  Harness h;
  const ModelBlockId tiny = h.malloc(1);  // 512 B from a 2 MiB small segment, split
  EXPECT_EQ(h.size(tiny), 512U);
  ASSERT_EQ(h.events.size(), 1U);
  EXPECT_EQ(h.events[0].size, 2 * kMiB);
  const ModelBlockId next_tiny = h.malloc(600);  // 1024 B, right after it in the same segment
  EXPECT_EQ(h.size(next_tiny), 1024U);
  EXPECT_EQ(h.address(next_tiny), h.address(tiny) + 512);
  EXPECT_EQ(h.events.size(), 1U);

  const ModelBlockId medium = h.malloc(kMiB + 1);  // large pool: a 20 MiB segment, split
  EXPECT_EQ(h.size(medium), kMiB + 512);
  ASSERT_EQ(h.events.size(), 2U);
  EXPECT_EQ(h.events[1].size, 20 * kMiB);
  const ModelBlockId cached = h.malloc(10 * kMiB + 1);  // fits the 20 MiB segment's rest
  EXPECT_EQ(h.address(cached), h.address(medium) + kMiB + 512);
  EXPECT_EQ(h.events.size(), 2U);
  const ModelBlockId big = h.malloc(20 * kMiB + 1);  // a segment of its own, 2 MiB multiple
  ASSERT_EQ(h.events.size(), 3U);
  EXPECT_EQ(h.events[2].size, 22 * kMiB);
  EXPECT_EQ(h.size(big), 20 * kMiB + 512);  // the 2 MiB - 512 rest is split off
  EXPECT_EQ(h.model.reserved(), 44 * kMiB);
  EXPECT_EQ(h.model.allocated(), 512 + 1024 + (kMiB + 512) + (10 * kMiB + 512) + (20 * kMiB + 512));
  EXPECT_EQ(pytorch::allocation_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(pytorch::allocation_size(kMiB), 2 * kMiB);
}

TEST(CachingAllocator, KeepsALargeRestOfAMebibyteOrLessInTheBlock) {
  Harness h;
  const ModelBlockId block = h.malloc(19 * kMiB);  // 20 MiB segment, 1 MiB left: not split
  EXPECT_EQ(h.size(block), 20 * kMiB);
  Harness h2;
  const ModelBlockId split = h2.malloc(19 * kMiB - 512);  // 1 MiB + 512 left: split
  EXPECT_EQ(h2.size(split), 19 * kMiB - 512);
}

TEST(CachingAllocator, TakesTheSmallestFittingBlockThenTheLowestAddress) {
  Harness h;
  // Segments of 14, 12 and 12 MiB at rising addresses, all cached.
  const ModelBlockId fourteen = h.malloc(14 * kMiB);
  const ModelBlockId twelve = h.malloc(12 * kMiB);
  const ModelBlockId other_twelve = h.malloc(12 * kMiB);
  for (ModelBlockId block : {other_twelve, fourteen, twelve}) h.model.free(block);
  ASSERT_EQ(h.events.size(), 3U);
  // 11 MiB: a 12 MiB block fits best (the 14 MiB one is lower), the lower of
  // the two, taken whole (1 MiB left is not split off in the large pool).
  const ModelBlockId first = h.malloc(11 * kMiB);
  EXPECT_EQ(h.address(first), h.address(twelve));
  EXPECT_EQ(h.size(first), 12 * kMiB);
  EXPECT_EQ(h.address(h.malloc(11 * kMiB)), h.address(other_twelve));
  EXPECT_EQ(h.address(h.malloc(11 * kMiB)), h.address(fourteen));  // split: 3 MiB left
  EXPECT_EQ(h.events.size(), 3U);
}

TEST(CachingAllocator, KeepsEachStreamsBlocksForThatStream) {
  Harness h;
  const ModelBlockId on_one = h.malloc(4 * kMiB, 1);
  h.model.free(on_one);  // the whole 20 MiB segment cached for stream 1
  h.malloc(4 * kMiB, 2);
  EXPECT_EQ(h.events.size(), 2U);  // stream 2 gets a segment of its own
  const ModelBlockId again = h.malloc(4 * kMiB, 1);
  EXPECT_EQ(h.address(again), h.address(on_one));
  EXPECT_EQ(h.events.size(), 2U);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Harness h(with_max_split(64 * kMiB));
  const ModelBlockId hundred = h.malloc(100 * kMiB);
  h.model.free(hundred);  // a cached 100 MiB block, oversize
  h.malloc(30 * kMiB);    // a smaller request never takes it: a new segment
  EXPECT_EQ(h.events.size(), 2U);
  h.malloc(80 * kMiB);  // 100 MiB is 20 MiB or more above 80: not taken either
  EXPECT_EQ(h.events.size(), 3U);
  const ModelBlockId ninety = h.malloc(90 * kMiB);  // within 20 MiB: taken whole, not split
  EXPECT_EQ(h.events.size(), 3U);
  EXPECT_EQ(h.address(ninety), h.address(hundred));
  EXPECT_EQ(h.size(ninety), 100 * kMiB);
}

TEST(CachingAllocator, MergesFreedNeighboursAndEmptyCacheReleasesWholeSegments) {
  Harness h;
  const ModelBlockId a = h.malloc(4 * kMiB);
  const ModelBlockId b = h.malloc(4 * kMiB);
  const ModelBlockId c = h.malloc(4 * kMiB);
  EXPECT_EQ(h.address(b), h.address(a) + 4 * kMiB);
  h.model.free(b);
  h.model.free(a);  // a and b merge: an 8 MiB block at a
  const ModelBlockId eight = h.malloc(8 * kMiB);
  EXPECT_EQ(h.address(eight), h.address(a));
  h.model.free(eight);
  h.events.clear();
  h.model.empty_cache(h.events);
  EXPECT_TRUE(h.events.empty());  // c still holds part of the segment
  h.model.free(c);
  h.model.empty_cache(h.events);
  ASSERT_EQ(h.events.size(), 1U);
  EXPECT_FALSE(h.events[0].reserved);
  EXPECT_EQ(h.events[0].size, 20 * kMiB);
  EXPECT_EQ(h.model.reserved(), 0U);
}

// load() caches a segment's free front before it links the held block after
// it: the front is no whole segment and must stay through empty_cache; once
// the held block is freed, the two merge and the segment goes.
TEST(CachingAllocator, EmptyCacheKeepsALoadedSegmentWithAHeldBlock) {
  AllocatorState state;
  const uint64_t base = 0x2000'0000'0000;
  state.ranges[base] = MappedRange{.size = 20 * kMiB, .kind = "large"};
  state.blocks[base + 8 * kMiB] = HeldBlock{.size = 12 * kMiB, .requested = 12 * kMiB};
  Harness h;
  const auto made = h.model.load(state);
  ASSERT_EQ(made.size(), 1U);
  h.model.empty_cache(h.events);
  EXPECT_TRUE(h.events.empty());
  EXPECT_EQ(h.model.reserved(), 20 * kMiB);
  h.model.free(made.begin()->second);
  h.model.empty_cache(h.events);
  ASSERT_EQ(h.events.size(), 1U);
  EXPECT_EQ(h.events[0].address, base);
  EXPECT_EQ(h.events[0].size, 20 * kMiB);
}

// A thousand streams each with a cached block no release can take (the rest
// of its segment) and one stream with a cached whole segment: a request on a
// full device releases that segment, and only it, before reserving its own.
TEST(CachingAllocator, ARetryFindsTheWholeSegmentAmongManyPartlyUsedOnes) {
  constexpr uint64_t kStreams = 1000;
  AllocatorModelSettings settings;
  settings.capacity = (kStreams + 1) * 20 * kMiB;
  Harness h(settings);
  for (uint64_t stream = 1; stream <= kStreams; ++stream) h.malloc(5 * kMiB, stream);
  const ModelBlockId whole = h.malloc(8 * kMiB, 2 * kStreams);
  const uint64_t whole_at = h.address(whole);
  h.model.free(whole);
  EXPECT_EQ(h.model.reserved(), settings.capacity);
  h.events.clear();
  h.malloc(8 * kMiB, 3 * kStreams);
  ASSERT_EQ(h.events.size(), 2U);
  EXPECT_FALSE(h.events[0].reserved);
  EXPECT_EQ(h.events[0].address, whole_at);
  EXPECT_EQ(h.events[0].stream, 2 * kStreams);
  EXPECT_TRUE(h.events[1].reserved);
  EXPECT_EQ(h.model.reserved(), settings.capacity);
  h.events.clear();
  EXPECT_FALSE(h.try_malloc(8 * kMiB, 4 * kStreams).has_value());  // nothing whole is left
  EXPECT_TRUE(h.events.empty());
}

TEST(CachingAllocator, ReleasesCachedSegmentsBeforeARetryThenFails) {
  AllocatorModelSettings settings;
  settings.capacity = 40 * kMiB;
  Harness h(settings);
  h.model.free(h.malloc(5 * kMiB));  // a cached 20 MiB segment
  h.events.clear();
  h.malloc(30 * kMiB);  // 20 + 30 > 40: the cached segment goes first, then the new one
  ASSERT_EQ(h.events.size(), 2U);
  EXPECT_FALSE(h.events[0].reserved);
  EXPECT_TRUE(h.events[1].reserved);
  EXPECT_EQ(h.model.reserved(), 30 * kMiB);
  EXPECT_FALSE(h.try_malloc(12 * kMiB).has_value());  // nothing to release: out of memory
}

TEST(CachingAllocator, ReleasesOneOversizeBlockBeforeEverythingElse) {
  AllocatorModelSettings settings = with_max_split(64 * kMiB);
  settings.capacity = 300 * kMiB;
  Harness h(settings);
  const ModelBlockId seventy = h.malloc(70 * kMiB);
  const ModelBlockId hundred = h.malloc(100 * kMiB);
  h.model.free(h.malloc(5 * kMiB));  // a cached 20 MiB segment, not oversize
  h.model.free(seventy);
  h.model.free(hundred);
  h.events.clear();
  h.malloc(120 * kMiB);  // 190 + 120 > 300: the smallest oversize block of 120 or more? none;
                         // so oversize blocks go largest first until 120 MiB are released
  ASSERT_EQ(h.events.size(), 3U);
  EXPECT_EQ(h.events[0].size, 100 * kMiB);
  EXPECT_EQ(h.events[1].size, 70 * kMiB);
  EXPECT_TRUE(h.events[2].reserved);
  EXPECT_EQ(h.model.reserved(), 140 * kMiB);  // the 20 MiB segment stayed
}

TEST(CachingAllocator, ExpandableSegmentsMapPagesAndUnmapThemOnEmptyCache) {
  AllocatorModelSettings settings;
  settings.split.expandable = true;
  Harness h(settings);
  const ModelBlockId small = h.malloc(1000);  // one 2 MiB page of the small pool's segment
  ASSERT_EQ(h.events.size(), 1U);
  EXPECT_TRUE(h.events[0].expandable);
  EXPECT_EQ(h.events[0].size, 2 * kMiB);
  const ModelBlockId big = h.malloc(30 * kMiB);  // two 20 MiB pages of the large pool's
  ASSERT_EQ(h.events.size(), 2U);
  EXPECT_EQ(h.events[1].size, 40 * kMiB);
  const ModelBlockId more = h.malloc(15 * kMiB);  // 10 MiB left mapped: 20 MiB more, contiguous
  ASSERT_EQ(h.events.size(), 3U);
  EXPECT_EQ(h.events[2].address, h.events[1].address + 40 * kMiB);
  EXPECT_EQ(h.address(more), h.address(big) + 30 * kMiB);
  EXPECT_EQ(h.model.reserved(), 62 * kMiB);
  h.model.free(big);
  h.model.free(more);
  h.model.free(small);
  h.events.clear();
  h.model.empty_cache(h.events);  // every whole page unmapped
  uint64_t unmapped = 0;
  for (const ModelSegmentEvent& event : h.events) {
    EXPECT_FALSE(event.reserved);
    EXPECT_TRUE(event.expandable);
    unmapped += event.size;
  }
  EXPECT_EQ(unmapped, 62 * kMiB);
  EXPECT_EQ(h.model.reserved(), 0U);
}

TEST(CachingAllocator, TakesARequestWhereAFilePlacedIt) {
  Harness h;
  const ModelBlockId first = h.malloc(4 * kMiB);
  const uint64_t segment = h.address(first);
  h.model.free(first);
  const std::optional<ModelBlockId> placed =
      h.model.take_at(segment + 8 * kMiB, 2 * kMiB, 0, PoolId{});
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(h.address(*placed), segment + 8 * kMiB);
  EXPECT_EQ(h.size(*placed), 2 * kMiB);
  const ModelBlockId before = h.malloc(8 * kMiB);  // the 8 MiB before it is still cached
  EXPECT_EQ(h.address(before), segment);
  EXPECT_FALSE(h.model.take_at(segment + 9 * kMiB, 512, 0, PoolId{}).has_value());   // in use
  EXPECT_FALSE(h.model.take_at(segment + 12 * kMiB, 512, 0, PoolId{}).has_value());  // small pool
}

// The best fit among expandable segments' blocks, by the index and by
// PyTorch's loop. One segment of `count` mapped ranges of 20 MiB, each a
// held 16 MiB block and a free 4 MiB one before unmapped pages, fewer after
// each range (the rest of the reservation after the last): a 4 MiB request
// takes the free block that could grow least, the last range's but one,
// then each range's before it, then the last's.
TEST(CachingAllocator, BestFitAmongExpandableRangesTakesTheBlockThatCanGrowLeast) {
  constexpr uint64_t kCount = 40;
  constexpr uint64_t kPage = 20 * kMiB;
  AllocatorState state;
  std::vector<uint64_t> starts;
  uint64_t at = 0x7000'0000'0000;
  for (uint64_t k = 0; k < kCount; ++k) {
    starts.push_back(at);
    state.ranges[at] = MappedRange{kPage, 0, PoolId{}, "large", true};
    state.blocks[at] = HeldBlock{16 * kMiB, 16 * kMiB};
    at += kPage + (kCount - k) * kPage;
  }
  std::vector<uint64_t> expected;
  for (uint64_t k = kCount - 1; k-- > 0;) expected.push_back(starts[k] + 16 * kMiB);
  expected.push_back(starts.back() + 16 * kMiB);
  for (const BestFit best_fit : {BestFit::kIndexed, BestFit::kWalk}) {
    AllocatorModelSettings settings;
    settings.split.expandable = true;
    settings.best_fit = best_fit;
    Harness h(settings);
    h.model.load(state);
    std::vector<uint64_t> taken;
    for (uint64_t k = 0; k < kCount; ++k) taken.push_back(h.address(h.malloc(4 * kMiB)));
    EXPECT_EQ(taken, expected);
    EXPECT_TRUE(h.events.empty());  // every request served from the mapped ranges
  }
}

// One side of a differential run: a model, the segment events it made,
// where its next new segment goes, and the blocks it serves (in the same
// order on both sides).
struct Side {
  explicit Side(const AllocatorModelSettings& settings) : model(settings) {}
  AllocatorModel model;
  std::vector<ModelSegmentEvent> events;
  uint64_t next = 0x9000'0000'0000;
  std::vector<ModelBlockId> live;

  std::optional<std::pair<uint64_t, uint64_t>> malloc(uint64_t size, uint64_t stream) {
    const std::optional<ModelBlockId> block = model.malloc(
        size, stream, PoolId{},
        [this](uint64_t /*size*/, uint64_t span) {
          const uint64_t address = next;
          next += std::max<uint64_t>(span, uint64_t{1} << 30);
          return address;
        },
        events);
    return served(block);
  }
  std::optional<std::pair<uint64_t, uint64_t>> served(std::optional<ModelBlockId> block) {
    if (!block) return std::nullopt;
    live.push_back(*block);
    return std::pair{model.address_of(*block), model.size_of(*block)};
  }
};

// What a side shows: reserved and allocated bytes, the segment events from
// `first` on, and with `whole`, its ranges and allocated blocks.
std::string seen(const Side& side, size_t first, bool whole) {
  std::string out =
      std::to_string(side.model.reserved()) + " " + std::to_string(side.model.allocated()) + " |";
  for (size_t i = first; i < side.events.size(); ++i) {
    const ModelSegmentEvent& e = side.events[i];
    out += " " + std::to_string(e.reserved) + std::to_string(e.expandable) + ":" +
           std::to_string(e.address) + "+" + std::to_string(e.size) + "@" +
           std::to_string(e.stream);
  }
  if (!whole) return out;
  const AllocatorState state = side.model.state();
  out += " |";
  for (const auto& [address, range] : state.ranges) {
    out += " " + std::to_string(address) + "+" + std::to_string(range.size);
  }
  out += " |";
  for (const auto& [address, block] : state.blocks) {
    out += " " + std::to_string(address) + "+" + std::to_string(block.size);
  }
  return out;
}

// The state before a trace: on each of two streams, an expandable segment
// of mapped ranges (one to three 20 MiB pages, up to twelve ranges) whose
// blocks are held or free at random, many ending in a free 4 MiB block
// before the unmapped pages up to the next range: on one stream in two,
// fewer pages after each range, so that PyTorch's best fit walks long runs
// of those blocks (the hostile shape of issue 56, at random); and a plain
// 20 MiB segment.
AllocatorState random_state(std::mt19937_64& rng) {
  constexpr uint64_t kPage = 20 * kMiB;
  constexpr std::array<uint64_t, 4> kSizes{2 * kMiB, 4 * kMiB, 4 * kMiB, 6 * kMiB};
  AllocatorState state;
  for (const uint64_t stream : {0, 1}) {
    uint64_t at = 0x7000'0000'0000 + stream * (uint64_t{4} << 40);
    const bool descending = rng() % 2 == 0;
    for (uint64_t r = 1 + rng() % 12; r > 0; --r) {
      const uint64_t size = (1 + rng() % 3) * kPage;
      state.ranges[at] = MappedRange{size, stream, PoolId{}, "large", true};
      // A free 4 MiB block last, or blocks of any of the sizes.
      const uint64_t end = at + size - (rng() % 3 != 0 ? 4 * kMiB : 0);
      for (uint64_t cursor = at; cursor < end;) {
        const uint64_t block = std::min(kSizes[rng() % kSizes.size()], end - cursor);
        if (rng() % 2 == 0 || end - cursor == block) state.blocks[cursor] = HeldBlock{block, block};
        cursor += block;
      }
      state.reserved += size;
      at += size + (descending ? r + rng() % 2 : rng() % 4) * kPage;
    }
  }
  const uint64_t plain = 0x7000'0000'0000 + (uint64_t{8} << 40);
  state.ranges[plain] = MappedRange{kPage, 0, PoolId{}, "large", false};
  state.blocks[plain] = HeldBlock{4 * kMiB, 4 * kMiB};
  state.reserved += kPage;
  return state;
}

// Settings at random: expandable segments or not, max_split_size, a
// capacity a little above the start (so that retries release and unmap),
// garbage collection.
AllocatorModelSettings random_settings(std::mt19937_64& rng, uint64_t reserved) {
  AllocatorModelSettings settings;
  settings.split.expandable = rng() % 4 != 0;
  if (rng() % 3 == 0) settings.split.max_split_size = 32 * kMiB;
  if (rng() % 2 == 0) settings.capacity = reserved + (rng() % 5) * 20 * kMiB;
  if (rng() % 4 == 0) settings.gc_threshold = 0.5;
  return settings;
}

// One random sequence of requests, frees, placements and releases on both
// sides; false (with a failure said) where they part.
bool same_on_both_sides(uint64_t seed) {
  constexpr std::array<uint64_t, 10> kRequests{512,      kMiB / 8, kMiB + 1, 2 * kMiB,  3 * kMiB,
                                               4 * kMiB, 4 * kMiB, 6 * kMiB, 10 * kMiB, 24 * kMiB};
  std::mt19937_64 rng(seed);
  const AllocatorState start = random_state(rng);
  AllocatorModelSettings settings = random_settings(rng, start.reserved);
  settings.best_fit = BestFit::kIndexed;
  Side indexed(settings);
  settings.best_fit = BestFit::kWalk;
  Side walked(settings);
  for (Side* side : {&indexed, &walked}) {
    for (const auto& [address, block] : side->model.load(start)) side->live.push_back(block);
  }
  std::vector<uint64_t> ranges;
  for (const auto& [address, range] : start.ranges) ranges.push_back(address);
  for (int step = 0; step < 80; ++step) {  // the whole state every 8 steps, the last too
    const uint64_t op = rng() % 12;
    const size_t events_before = indexed.events.size();
    std::string got[2];
    for (int s = 0; s < 2; ++s) {
      Side& side = s == 0 ? indexed : walked;
      // The same draws on both sides: a copy of the generator each.
      std::mt19937_64 draw = rng;
      const uint64_t pick = draw();
      const uint64_t stream = draw() % 2;
      const uint64_t range = ranges[draw() % ranges.size()];
      const uint64_t offset = (draw() % 3) * 20 * kMiB;
      std::string answer;
      if (op < 6) {
        const auto block = side.malloc(kRequests[pick % kRequests.size()], stream);
        answer = block ? std::to_string(block->first) + "+" + std::to_string(block->second) : "oom";
      } else if (op < 9 && !side.live.empty()) {
        const size_t at = pick % side.live.size();
        side.model.free(side.live[at]);
        side.live[at] = side.live.back();
        side.live.pop_back();
      } else if (op == 9) {
        side.model.empty_cache(side.events);
      } else if (op == 10) {
        answer = std::to_string(side.model.unmap_range(range + offset, 20 * kMiB, side.events));
      } else {
        const auto block = side.served(
            side.model.take_at(range + offset + (pick % 8) * 2 * kMiB, 2 * kMiB, stream, PoolId{}));
        answer = block ? std::to_string(block->first) : "none";
      }
      got[s] = answer + " || " + seen(side, events_before, step % 8 == 7);
    }
    rng.discard(4);
    if (got[0] != got[1]) {
      ADD_FAILURE() << "seed " << seed << ", step " << step << " (op " << op
                    << "):\n  index: " << got[0] << "\n  walk:  " << got[1];
      return false;
    }
  }
  return true;
}

// The index of PyTorch's best fit against the loop, on hundreds of random
// sequences (a fixed seed each): every request takes the same block, and
// every segment event, range and block is the same.
TEST(CachingAllocator, BestFitIndexChoosesAsPyTorchsLoopOnRandomSequences) {
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    if (!same_on_both_sides(seed)) break;
  }
}

}  // namespace
}  // namespace memsnap
