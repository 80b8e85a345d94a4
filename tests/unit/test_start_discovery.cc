// Unit tests of the walk begun before the trace is whole
// (analysis/core/start_discovery): on hand-made traces, each of its checks
// refuses a walk that is not the derived one (the history is then the walk
// back's), and where it is taken it is the walk back's in every figure.
// The real fixtures, whole and cut short, are in test_start_derivation.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "analysis/core/allocator_state.h"
#include "analysis/core/start_discovery.h"
#include "model_builder.h"

namespace memsnap {
namespace {

using testing::dump_segment;

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBase = 0x7f0000000000;

// The history of device 0 with a discovery fed its trace `rows` entries at
// a time, under the default settings (those a reader knows before the trace).
struct Discovered {
  explicit Discovered(const Snapshot& snapshot, uint64_t rows = 1)
      : discovery(state_at_dump(snapshot, 0), SplitRule{}, snapshot.devices.at(0).begin),
        history(walked(snapshot, discovery, rows), 0, StartDerivation::kForwardFirst, &discovery),
        back(snapshot, 0, StartDerivation::kWalkBack) {}

  static const Snapshot& walked(const Snapshot& snapshot, StartDiscovery& discovery,
                                uint64_t rows) {
    for (uint64_t end = snapshot.devices.at(0).begin; end < snapshot.devices.at(0).end;) {
      end = std::min(end + rows, snapshot.devices.at(0).end);
      discovery.walk(snapshot, end);
    }
    return snapshot;
  }

  StartDiscovery discovery;
  AllocatorHistory history;
  AllocatorHistory back;
};

std::string describe(const AllocatorState& state) {
  std::string out = std::to_string(state.reserved) + "/" + std::to_string(state.held);
  for (const auto& [address, range] : state.ranges) {
    out += " range " + std::to_string(address - kBase) + "+" + std::to_string(range.size) + "@" +
           std::to_string(range.stream);
  }
  for (const auto& [address, block] : state.blocks) {
    out += " block " + std::to_string(address - kBase) + "+" + std::to_string(block.size) + "/" +
           std::to_string(block.requested) + "/" + std::to_string(static_cast<int>(block.state));
  }
  return out;
}

// The history, whichever walk it took, is the walk back's at every position.
void expect_the_walk_backs(const Discovered& d) {
  const HistoryCheck& a = d.history.check();
  const HistoryCheck& b = d.back.check();
  EXPECT_EQ(a.exact, b.exact);
  EXPECT_EQ(a.entries, b.entries);
  EXPECT_EQ(a.misfits_back, b.misfits_back);
  EXPECT_EQ(a.misfits_forward, b.misfits_forward);
  EXPECT_EQ(a.ranges_at_start, b.ranges_at_start);
  EXPECT_EQ(a.blocks_at_start, b.blocks_at_start);
  EXPECT_EQ(a.inferred_sizes, b.inferred_sizes);
  EXPECT_EQ(d.history.peak_free().bytes, d.back.peak_free().bytes);
  EXPECT_EQ(d.history.peak_free().position, d.back.peak_free().position);
  EXPECT_EQ(d.history.peak_free().reserved, d.back.peak_free().reserved);
  for (uint64_t position = 0; position <= d.back.trace_entries(); ++position) {
    EXPECT_EQ(describe(d.history.at(position)), describe(d.back.at(position))) << "at " << position;
  }
}

// Recording began after a segment and three blocks were made. The trace
// frees one of them first (its size is learnt there), requests the free of
// another that lasts to the dump, and allocates beside both: the walk
// meets the segment at its first entry and is taken.
TEST(StartDiscovery, AWalkThatMeetsWhatWasThereLateIsTheWalkBacks) {
  testing::ModelBuilder b;
  b.alloc(kBase + 16 * kKiB, 512, 1);
  b.event(Action::kFreeRequested, kBase + 4 * kKiB, 2000, 2);
  b.event(Action::kFreeCompleted, kBase + 4 * kKiB, 2000, 3);
  b.event(Action::kFreeRequested, kBase + 8 * kKiB, 4096, 4);
  b.alloc(kBase + 4 * kKiB, 1024, 5);
  dump_segment(b.model, kBase, 2 * kMiB,
               {{kBase, 4 * kKiB, 4 * kKiB, BlockState::kActiveAllocated},
                {kBase + 4 * kKiB, 1024, 1024, BlockState::kActiveAllocated},
                {kBase + 5 * kKiB, 3 * kKiB, 0, BlockState::kInactive},
                {kBase + 8 * kKiB, 4 * kKiB, 4096, BlockState::kActivePendingFree},
                {kBase + 12 * kKiB, 4 * kKiB, 0, BlockState::kInactive},
                {kBase + 16 * kKiB, 512, 512, BlockState::kActiveAllocated},
                {kBase + 16 * kKiB + 512, 2 * kMiB - 16 * kKiB - 512, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_TRUE(d.history.discovered());
  EXPECT_TRUE(d.history.check().exact);
  EXPECT_EQ(d.history.check().blocks_at_start, 3u);
  EXPECT_EQ(d.history.start().blocks.at(kBase + 4 * kKiB).size, 2048u);
  expect_the_walk_backs(d);
}

// A block from before the trace, freed with 1500 bytes requested, is held
// at 1536 bytes; while it was held an allocation was placed 1024 bytes
// after it. The walk back puts it back over that allocation and misfits.
TEST(StartDiscovery, IsNotTakenWhereABlockFromBeforeCoversOneNamedWhileItWasHeld) {
  testing::ModelBuilder b;
  b.alloc(kBase + 1024, 512, 1);
  b.free(kBase + 1024, 512, 2);
  b.event(Action::kFreeCompleted, kBase, 1500, 3);
  dump_segment(b.model, kBase, 2 * kMiB, {{kBase, 2 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_back, 0u);
  expect_the_walk_backs(d);
}

// A block from before the trace, freed after 4.5 MiB were carved before
// it, ended the free space of that carve (the allocator kept the whole 5
// MiB). The walk, which learns of it at its free, starts again holding it
// from the start, and is then the walk back's.
TEST(StartDiscovery, StartsAgainKnowingABlockMetLate) {
  testing::ModelBuilder b;
  b.alloc(kBase, 4 * kMiB + 512 * kKiB, 1);
  b.event(Action::kFreeCompleted, kBase + 5 * kMiB, kMiB, 2);
  b.free(kBase, 4 * kMiB + 512 * kKiB, 3);
  dump_segment(b.model, kBase, 20 * kMiB, {{kBase, 20 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_TRUE(d.history.discovered());
  EXPECT_EQ(d.history.at(1).blocks.at(kBase).size, 5 * kMiB);
  expect_the_walk_backs(d);
}

// The same for a segment from before the trace that is no segment of the
// dump: the block freed first in it is sized by where it ends, learnt only
// when the trace frees it.
TEST(StartDiscovery, StartsAgainKnowingASegmentMetLate) {
  testing::ModelBuilder b;
  b.event(Action::kFreeCompleted, kBase, 25 * kMiB, 1);
  b.event(Action::kSegmentFree, kBase, 26 * kMiB, 2);
  const Discovered d(b.model);
  EXPECT_TRUE(d.history.discovered());
  EXPECT_EQ(d.history.start().blocks.at(kBase).size, 26 * kMiB);  // the whole segment
  expect_the_walk_backs(d);
}

// Ten such segments, freed after all their blocks: one restart learns them
// all from the rows read so far (one at a time they would pass the limit).
TEST(StartDiscovery, OneRestartLearnsAllTheRowsReadShow) {
  testing::ModelBuilder b;
  for (uint64_t k = 0; k < 10; ++k) {
    b.event(Action::kFreeCompleted, kBase + k * 32 * kMiB, 25 * kMiB, static_cast<int64_t>(k));
  }
  for (uint64_t k = 0; k < 10; ++k) {
    b.event(Action::kSegmentFree, kBase + k * 32 * kMiB, 26 * kMiB, static_cast<int64_t>(10 + k));
  }
  const Discovered d(b.model, /*rows=*/1000);
  EXPECT_TRUE(d.history.discovered());
  EXPECT_EQ(d.history.check().ranges_at_start, 10u);
  expect_the_walk_backs(d);
}

// A block of the dump that no entry names (1 MiB at +5 MiB) was there when
// 4.5 MiB were carved at the base: the allocator kept the whole 5 MiB
// before it (the 0.5 MiB left is too small to split off), so the next
// allocation, at +4.5 MiB, fits no state going forward. The walk, which
// did not know the block then, split it; it must not be taken.
TEST(StartDiscovery, IsNotTakenWhereABlockItNeverMetWouldHaveChangedACarve) {
  testing::ModelBuilder b;
  b.alloc(kBase, 4 * kMiB + 512 * kKiB, 1);
  b.alloc(kBase + 4 * kMiB + 512 * kKiB, 256 * kKiB, 2);
  dump_segment(
      b.model, kBase, 20 * kMiB,
      {{kBase, 4 * kMiB + 512 * kKiB, 4 * kMiB + 512 * kKiB, BlockState::kActiveAllocated},
       {kBase + 4 * kMiB + 512 * kKiB, 256 * kKiB, 256 * kKiB, BlockState::kActiveAllocated},
       {kBase + 4 * kMiB + 768 * kKiB, 256 * kKiB, 0, BlockState::kInactive},
       {kBase + 5 * kMiB, kMiB, kMiB, BlockState::kActiveAllocated},
       {kBase + 6 * kMiB, 14 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_forward, 0u);
  expect_the_walk_backs(d);
}

// The same with a block the trace frees (at +5 MiB, after both
// allocations): the walk learns of it only then, after the carve it changes.
TEST(StartDiscovery, IsNotTakenWhereABlockMetLateWouldHaveChangedACarve) {
  testing::ModelBuilder b;
  b.alloc(kBase, 4 * kMiB + 512 * kKiB, 1);
  b.alloc(kBase + 4 * kMiB + 512 * kKiB, 256 * kKiB, 2);
  b.event(Action::kFreeCompleted, kBase + 5 * kMiB, kMiB, 3);
  dump_segment(
      b.model, kBase, 20 * kMiB,
      {{kBase, 4 * kMiB + 512 * kKiB, 4 * kMiB + 512 * kKiB, BlockState::kActiveAllocated},
       {kBase + 4 * kMiB + 512 * kKiB, 256 * kKiB, 256 * kKiB, BlockState::kActiveAllocated},
       {kBase + 4 * kMiB + 768 * kKiB, 15 * kMiB + 256 * kKiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_forward, 0u);
  expect_the_walk_backs(d);
}

// A block whose free the trace requests twice was no block of the start:
// the history is the walk back's (which puts the dump's block there).
TEST(StartDiscovery, IsNotTakenWhereAFreeIsRequestedTwice) {
  testing::ModelBuilder b;
  b.event(Action::kFreeRequested, kBase, 4096, 1);
  b.event(Action::kFreeRequested, kBase, 4096, 2);
  dump_segment(b.model, kBase, 2 * kMiB,
               {{kBase, 4096, 4096, BlockState::kActivePendingFree},
                {kBase + 4096, 2 * kMiB - 4096, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  expect_the_walk_backs(d);
}

// A block of the dump that no entry names (1 MiB at the base) covers an
// address the trace allocated and freed: the walk back misfits there.
TEST(StartDiscovery, IsNotTakenWhereABlockItNeverMetCoversAnAddressNamed) {
  testing::ModelBuilder b;
  b.alloc(kBase + 512 * kKiB, 4096, 1);
  b.free(kBase + 512 * kKiB, 4096, 2);
  dump_segment(b.model, kBase, 20 * kMiB,
               {{kBase, kMiB, kMiB, BlockState::kActiveAllocated},
                {kBase + kMiB, 19 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_back, 0u);
  expect_the_walk_backs(d);
}

// The trace frees the segment of a block held from before it to the dump,
// and makes the segment again: a block cannot outlive its segment.
TEST(StartDiscovery, IsNotTakenWhereASegmentIsFreedUnderABlockFromBefore) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentFree, kBase, 20 * kMiB, 1);
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 2);
  dump_segment(b.model, kBase, 20 * kMiB,
               {{kBase, kMiB, kMiB, BlockState::kActiveAllocated},
                {kBase + kMiB, 19 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_back, 0u);
  expect_the_walk_backs(d);
}

// A segment the trace makes and frees overlaps one of the dump's that no
// entry names (held since before the trace): no allocator does that.
TEST(StartDiscovery, IsNotTakenWhereASegmentMadeInTheTraceOverlapsOneFromBefore) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase + 10 * kMiB, 20 * kMiB, 1);
  b.event(Action::kSegmentFree, kBase + 10 * kMiB, 20 * kMiB, 2);
  dump_segment(b.model, kBase, 20 * kMiB, {{kBase, 20 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_GT(d.back.check().misfits_back, 0u);
  expect_the_walk_backs(d);
}

// A block of the dump that no entry names lies in a segment the trace
// makes: it was not there before the trace (the walk back misfits undoing
// that segment_alloc). Neither the derived start nor the walk takes it.
TEST(StartDiscovery, IsNotTakenWhereABlockFromBeforeLiesInASegmentTheTraceMakes) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 1);
  dump_segment(b.model, kBase, 20 * kMiB,
               {{kBase, kMiB, kMiB, BlockState::kActiveAllocated},
                {kBase + kMiB, 19 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_FALSE(d.history.derived_forward());
  EXPECT_GT(d.back.check().misfits_back, 0u);
  expect_the_walk_backs(d);
}

// The segment an allocation first lands in is the dump's at that address,
// but the trace then frees it and makes another there on another stream:
// the one before the trace was not the dump's.
TEST(StartDiscovery, IsNotTakenWhereTheSegmentMetIsNotTheOneBeforeTheTrace) {
  testing::ModelBuilder b;
  b.alloc(kBase, 4096, 1);
  b.free(kBase, 4096, 2);
  b.event(Action::kSegmentFree, kBase, 20 * kMiB, 3);
  b.model.events.stream.back() = 1;
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 4);
  b.model.events.stream.back() = 2;
  dump_segment(b.model, kBase, 20 * kMiB, {{kBase, 20 * kMiB, 0, BlockState::kInactive}});
  b.model.segments.back().stream = 2;
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_EQ(d.history.start().ranges.at(kBase).stream, 1u);
  expect_the_walk_backs(d);
}

// The file's settings (read after its trace) are not the ones the walk
// assumed: its carves are not the allocator's.
TEST(StartDiscovery, IsNotTakenUnderOtherSettings) {
  testing::ModelBuilder b;
  b.model.allocator_settings.max_split_size = 4 * kMiB;
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 1);
  b.alloc(kBase, 10 * kMiB, 2);
  b.free(kBase, 10 * kMiB, 3);
  dump_segment(b.model, kBase, 20 * kMiB, {{kBase, 20 * kMiB, 0, BlockState::kInactive}});
  const Discovered d(b.model);
  EXPECT_FALSE(d.history.discovered());
  EXPECT_TRUE(d.history.derived_forward());  // derive_start, under the file's settings
  expect_the_walk_backs(d);
}

// Expandable segments map and unmap pages: the walk gives up at once.
TEST(StartDiscovery, GivesUpOnExpandableSegments) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentMap, kBase, 20 * kMiB, 1);
  b.alloc(kBase, 4096, 2);
  dump_segment(b.model, kBase, 20 * kMiB,
               {{kBase, 4096, 4096, BlockState::kActiveAllocated},
                {kBase + 4096, 20 * kMiB - 4096, 0, BlockState::kInactive}},
               /*expandable=*/true);
  const Discovered d(b.model);
  EXPECT_TRUE(d.discovery.given_up());
  EXPECT_EQ(d.discovery.walked_to(), 0u);
  EXPECT_FALSE(d.history.discovered());
  expect_the_walk_backs(d);
}

}  // namespace
}  // namespace memsnap
