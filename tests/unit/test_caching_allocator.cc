// The model of PyTorch's caching allocator, rule by rule, on hand-written
// sequences whose outcome is worked out here from the allocator's policy
// (rounding, pools, segment sizes, best fit, splitting, merging, streams,
// max_split_size, the order of releases before a retry, expandable pages).
#include <gtest/gtest.h>

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
  EXPECT_EQ(segment_size_for(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(segment_size_for(kMiB), 2 * kMiB);
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

}  // namespace
}  // namespace memsnap
