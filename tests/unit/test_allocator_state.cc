// Unit tests of the allocator's state over time (analysis/allocator_state):
// the round trip dump -> back -> forward -> dump on hand-made traces, the
// state at any position, its invariants, and what the history says when the
// dump and the trace disagree or cannot be compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "model_builder.h"

namespace memsnap {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBase = 0x7f0000000000;

using testing::dump_segment;
using testing::DumpBlock;

// Sums of the state recomputed from its maps: what reserved and held must be.
void expect_consistent(const AllocatorState& state, const std::string& where) {
  uint64_t reserved = 0;
  uint64_t held = 0;
  for (const auto& [address, range] : state.ranges) reserved += range.size;
  for (const auto& [address, block] : state.blocks) {
    held += block.size;
    // Every held block lies inside one range.
    auto range = state.range_at(address);
    ASSERT_NE(range, state.ranges.end()) << where << ": block at " << address << " in no range";
    EXPECT_LE(address + block.size, range->first + range->second.size) << where;
  }
  EXPECT_EQ(state.reserved, reserved) << where;
  EXPECT_EQ(state.held, held) << where;
}

void expect_same_state(const AllocatorState& a, const AllocatorState& b) {
  ASSERT_EQ(a.ranges.size(), b.ranges.size());
  for (const auto& [address, range] : a.ranges) {
    auto it = b.ranges.find(address);
    ASSERT_NE(it, b.ranges.end()) << "range at " << address;
    EXPECT_EQ(it->second.size, range.size);
  }
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (const auto& [address, block] : a.blocks) {
    auto it = b.blocks.find(address);
    ASSERT_NE(it, b.blocks.end()) << "block at " << address;
    EXPECT_EQ(it->second.size, block.size);
    EXPECT_EQ(it->second.requested, block.requested);
    EXPECT_EQ(it->second.state, block.state);
  }
  EXPECT_EQ(a.reserved, b.reserved);
  EXPECT_EQ(a.held, b.held);
}

// One 20 MiB segment made in the trace; 1000 bytes and 3 MiB allocated, the
// first freed. The dump agrees: one block of 3 MiB at kBase + 1024.
Snapshot whole_trace() {
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 1);
  b.alloc(kBase, 1000, 2);
  b.alloc(kBase + 1024, 3 * kMiB, 3);
  b.event(Action::kFreeRequested, kBase, 1000, 4);
  b.event(Action::kFreeCompleted, kBase, 1000, 5);
  dump_segment(b.model, kBase, 20 * kMiB,
               {{kBase, 1024, 0, BlockState::kInactive},
                {kBase + 1024, 3 * kMiB, 3 * kMiB, BlockState::kActiveAllocated},
                {kBase + 1024 + 3 * kMiB, 17 * kMiB - 1024, 0, BlockState::kInactive}});
  return std::move(b.model);
}

TEST(AllocatorHistory, AWholeTraceReplaysToTheDumpBlockForBlock) {
  const Snapshot s = whole_trace();
  AllocatorHistory history(s, 0);
  const HistoryCheck& c = history.check();
  EXPECT_TRUE(c.possible) << c.impossible_reason;
  EXPECT_TRUE(c.exact) << c.first_difference;
  EXPECT_EQ(c.differences, 0u);
  EXPECT_TRUE(c.first_difference.empty());
  EXPECT_EQ(c.entries, 5u);
  EXPECT_EQ(c.misfits_back, 0u);
  EXPECT_EQ(c.misfits_forward, 0u);
  // The trace made everything: nothing was there before it.
  EXPECT_EQ(c.ranges_at_start, 0u);
  EXPECT_EQ(c.blocks_at_start, 0u);
  EXPECT_EQ(c.rounding, RoundingRule::kCuda);
  EXPECT_EQ(history.trace_entries(), 5u);
  expect_same_state(history.at(history.trace_entries()), state_at_dump(s, 0));
}

TEST(AllocatorHistory, TheStateAtEachPosition) {
  const Snapshot s = whole_trace();
  AllocatorHistory history(s, 0);
  const AllocatorState start = history.at(0);
  EXPECT_TRUE(start.ranges.empty());
  EXPECT_EQ(start.reserved, 0u);
  EXPECT_EQ(start.largest_free(), 0u);

  const AllocatorState one = history.at(1);
  EXPECT_EQ(one.reserved, 20 * kMiB);
  EXPECT_EQ(one.held, 0u);
  EXPECT_EQ(one.largest_free(), 20 * kMiB);

  // 1000 bytes round up to 1024; the 3 MiB block sits right after it.
  const AllocatorState three = history.at(3);
  ASSERT_EQ(three.blocks.size(), 2u);
  EXPECT_EQ(three.blocks.at(kBase).size, 1024u);
  EXPECT_EQ(three.blocks.at(kBase).requested, 1000u);
  EXPECT_EQ(three.blocks.at(kBase + 1024).size, 3 * kMiB);
  EXPECT_EQ(three.held, 1024 + 3 * kMiB);
  EXPECT_EQ(three.largest_free(), 20 * kMiB - 1024 - 3 * kMiB);

  // free_requested: the block is held still, awaiting free.
  EXPECT_EQ(history.at(4).blocks.at(kBase).state, BlockState::kActivePendingFree);
  EXPECT_EQ(history.at(4).held, three.held);
  EXPECT_FALSE(history.at(5).blocks.contains(kBase));

  // Past the end: the state at the end.
  expect_same_state(history.at(1000), history.at(5));
}

TEST(AllocatorHistory, EveryStateOfTheWalkIsConsistentAndTilesItsRanges) {
  const Snapshot s = whole_trace();
  AllocatorHistory history(s, 0);
  uint64_t observed = 0;
  history.walk(history.trace_entries(), [&](uint64_t position, const AllocatorState& state) {
    ++observed;
    expect_consistent(state, "position " + std::to_string(position));
    for (const auto& [address, range] : state.ranges) {
      // for_each_block visits the range end to end, free gaps included, in order.
      uint64_t cursor = address;
      uint64_t free = 0;
      state.for_each_block(address, range, [&](uint64_t at, uint64_t size, const HeldBlock* held) {
        EXPECT_EQ(at, cursor);
        cursor = at + size;
        if (held == nullptr) free += size;
      });
      EXPECT_EQ(cursor, address + range.size);
      EXPECT_EQ(free, state.reserved - state.held);  // one range here
    }
  });
  EXPECT_EQ(observed, 5u);
  // states_at gives what at() gives, in one walk.
  history.states_at({0, 2, 5}, [&](uint64_t position, const AllocatorState& state) {
    expect_same_state(state, history.at(position));
    return true;
  });
  // and stops where at() says so.
  std::vector<uint64_t> visited;
  history.states_at({0, 2, 5}, [&](uint64_t position, const AllocatorState&) {
    visited.push_back(position);
    return position < 2;
  });
  EXPECT_EQ(visited, (std::vector<uint64_t>{0, 2}));
}

// 120,000 entries: four segments, allocations that come and go at shifting
// addresses, a segment freed and made again now and then; the dump is what
// the walk ends with. Long enough for several checkpoints.
Snapshot long_trace() {
  testing::ModelBuilder b;
  int64_t t = 1;
  for (uint64_t s = 0; s < 4; ++s)
    b.event(Action::kSegmentAlloc, kBase + s * 64 * kMiB, 20 * kMiB, t++);
  std::vector<uint64_t> live;
  uint64_t seed = 12345;
  while (b.model.events.count() < 120'000) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t segment = (seed >> 33) % 4;
    const uint64_t slot = (seed >> 40) % 16;
    const uint64_t address = kBase + segment * 64 * kMiB + slot * kMiB;
    auto it = std::find(live.begin(), live.end(), address);
    if (it == live.end()) {
      b.alloc(address, 1000 + (seed >> 50) % 4000, t++);
      live.push_back(address);
    } else {
      b.event(Action::kFreeRequested, address, 1, t++);
      b.event(Action::kFreeCompleted, address, 1, t++);
      live.erase(it);
    }
  }
  AllocatorHistory walked(b.model, 0);
  const AllocatorState end = walked.at(walked.trace_entries());
  for (const auto& [address, range] : end.ranges) {
    std::vector<DumpBlock> blocks;
    end.for_each_block(address, range, [&](uint64_t at, uint64_t size, const HeldBlock* held) {
      blocks.push_back(held == nullptr ? DumpBlock{at, size, 0, BlockState::kInactive}
                                       : DumpBlock{at, size, held->requested, held->state});
    });
    dump_segment(b.model, address, range.size, blocks);
  }
  return std::move(b.model);
}

TEST(AllocatorHistory, StatesFromCheckpointsEqualTheWalkFromTheStart) {
  const Snapshot s = long_trace();
  AllocatorHistory history(s, 0);
  ASSERT_TRUE(history.check().exact) << history.check().first_difference;
  // Positions around where checkpoints fall (every 2^14 entries here) and in between.
  std::vector<uint64_t> positions;
  for (uint64_t k = 1; k * 16384 <= history.trace_entries(); ++k) {
    for (uint64_t p : {k * 16384 - 1, k * 16384, k * 16384 + 1, k * 16384 + 5000}) {
      positions.push_back(p);
    }
  }
  positions.push_back(history.trace_entries());
  std::vector<AllocatorState> walked(positions.size());
  size_t next = 0;
  history.walk(history.trace_entries(), [&](uint64_t position, const AllocatorState& state) {
    // walk() observes allocator entries only, and every entry here is one.
    while (next < positions.size() && positions[next] == position) walked[next++] = state;
  });
  ASSERT_EQ(next, positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    SCOPED_TRACE("position " + std::to_string(positions[i]));
    expect_same_state(history.at(positions[i]), walked[i]);
  }
  size_t seen = 0;
  history.states_at(positions, [&](uint64_t position, const AllocatorState& state) {
    EXPECT_EQ(position, positions[seen]);
    expect_same_state(state, walked[seen++]);
    return true;
  });
  EXPECT_EQ(seen, positions.size());
}

TEST(AllocatorHistory, ATraceThatStartsMidRunInfersWhatWasThere) {
  // Recording started after the segment and two blocks were made: the trace
  // frees one of them (never allocated in it) and allocates a third.
  testing::ModelBuilder b;
  b.event(Action::kFreeRequested, kBase + 4096, 2000, 10);
  b.event(Action::kFreeCompleted, kBase + 4096, 2000, 11);
  b.alloc(kBase + 8192, 512, 12);
  dump_segment(b.model, kBase, 2 * kMiB,
               {{kBase, 4096, 4096, BlockState::kActiveAllocated},
                {kBase + 4096, 4096, 0, BlockState::kInactive},
                {kBase + 8192, 512, 512, BlockState::kActiveAllocated},
                {kBase + 8704, 2 * kMiB - 8704, 0, BlockState::kInactive}});
  AllocatorHistory history(b.model, 0);
  const HistoryCheck& c = history.check();
  EXPECT_TRUE(c.exact) << c.first_difference;
  EXPECT_EQ(c.ranges_at_start, 1u);
  EXPECT_EQ(c.blocks_at_start, 2u);  // the one live throughout, the one freed in the trace
  EXPECT_EQ(c.inferred_sizes, 1u);   // ... whose size only the split rule gives: 2000 -> 2048
  const AllocatorState& start = history.start();
  ASSERT_TRUE(start.blocks.contains(kBase + 4096));
  EXPECT_EQ(start.blocks.at(kBase + 4096).size, 2048u);
  EXPECT_TRUE(start.blocks.at(kBase + 4096).size_inferred);
  // Walked back past its free_requested: allocated again before the trace.
  EXPECT_EQ(start.blocks.at(kBase + 4096).state, BlockState::kActiveAllocated);
  expect_consistent(start, "start");
  // Found going forward (its size settled at its free), as the walk back finds it.
  EXPECT_TRUE(history.derived_forward());
  const AllocatorHistory back(b.model, 0, StartDerivation::kWalkBack);
  expect_same_state(start, back.start());
  EXPECT_EQ(history.peak_free().bytes, back.peak_free().bytes);
  EXPECT_EQ(history.peak_free().position, back.peak_free().position);
}

TEST(AllocatorHistory, ADumpThatDisagreesIsNotExactAndSaysWhere) {
  // The trace's 1000-byte request makes a 1024-byte block; the dump says 2048.
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 2 * kMiB, 1);
  b.alloc(kBase, 1000, 2);
  dump_segment(b.model, kBase, 2 * kMiB,
               {{kBase, 2048, 1000, BlockState::kActiveAllocated},
                {kBase + 2048, 2 * kMiB - 2048, 0, BlockState::kInactive}});
  AllocatorHistory history(b.model, 0);
  const HistoryCheck& c = history.check();
  EXPECT_TRUE(c.possible);
  EXPECT_FALSE(c.exact);
  EXPECT_EQ(c.differences, 1u);
  EXPECT_NE(c.first_difference.find("dump: allocated block at 0x7f0000000000 of 2048 bytes"),
            std::string::npos)
      << c.first_difference;
  EXPECT_NE(c.first_difference.find("replayed: allocated block at 0x7f0000000000 of 1024 bytes"),
            std::string::npos)
      << c.first_difference;
}

TEST(AllocatorHistory, NpuRoundingIsFoundWhenItExplainsTheDump) {
  // torch_npu: 1000 + 32 bytes, rounded to 512: 1536, which CUDA's rule does not give.
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 2 * kMiB, 1);
  b.alloc(kBase, 1000, 2);
  dump_segment(b.model, kBase, 2 * kMiB,
               {{kBase, 1536, 1000, BlockState::kActiveAllocated},
                {kBase + 1536, 2 * kMiB - 1536, 0, BlockState::kInactive}});
  AllocatorHistory history(b.model, 0);
  EXPECT_TRUE(history.check().exact) << history.check().first_difference;
  EXPECT_EQ(history.check().rounding, RoundingRule::kNpu);
  EXPECT_EQ(history.at(2).blocks.at(kBase).size, 1536u);  // later walks use the rule that won
}

TEST(AllocatorHistory, EntriesThatFitNoStateAreMisfits) {
  // A free of a block that is nowhere, outside every segment.
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 2 * kMiB, 1);
  b.event(Action::kFreeCompleted, 0x1000, 512, 2);
  dump_segment(b.model, kBase, 2 * kMiB, {{kBase, 2 * kMiB, 0, BlockState::kInactive}});
  AllocatorHistory history(b.model, 0);
  EXPECT_EQ(history.check().misfits_back, 1u);
  EXPECT_EQ(history.check().misfits_forward, 1u);
  expect_consistent(history.at(2), "after the misfit");
}

TEST(AllocatorHistory, ExpandableRangesJoinAndSplit) {
  // Two adjacent maps of one expandable segment make one range; unmapping
  // its second half leaves the first.
  testing::ModelBuilder b;
  b.event(Action::kSegmentMap, kBase, 2 * kMiB, 1);
  b.event(Action::kSegmentMap, kBase + 2 * kMiB, 2 * kMiB, 2);
  b.event(Action::kSegmentUnmap, kBase + 2 * kMiB, 2 * kMiB, 3);
  dump_segment(b.model, kBase, 2 * kMiB, {{kBase, 2 * kMiB, 0, BlockState::kInactive}}, true);
  AllocatorHistory history(b.model, 0);
  EXPECT_TRUE(history.check().exact) << history.check().first_difference;
  const AllocatorState joined = history.at(2);
  ASSERT_EQ(joined.ranges.size(), 1u);
  EXPECT_EQ(joined.ranges.begin()->second.size, 4 * kMiB);
  EXPECT_TRUE(joined.ranges.begin()->second.expandable);
  EXPECT_EQ(joined.reserved, 4 * kMiB);
  EXPECT_EQ(history.at(3).reserved, 2 * kMiB);
}

TEST(AllocatorHistory, ImpossibleWithoutTheDumpsBlocks) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, kBase, 2 * kMiB, 1);
  dump_segment(b.model, kBase, 2 * kMiB, {});
  AllocatorHistory history(b.model, 0);
  EXPECT_FALSE(history.check().possible);
  EXPECT_FALSE(history.check().exact);
  EXPECT_NE(history.check().impossible_reason.find("segment 0x7f0000000000 lists no blocks"),
            std::string::npos)
      << history.check().impossible_reason;

  b.model.blocks.push_back(Block{kBase, 2 * kMiB, 0, BlockState::kInactive, {}});
  b.model.segments.back().block_count = 1;
  b.model.legacy_block_history = true;
  AllocatorHistory legacy(b.model, 0);
  EXPECT_FALSE(legacy.check().possible);
  EXPECT_NE(legacy.check().impossible_reason.find("no addresses"), std::string::npos);
}

TEST(AllocatorHistory, StateAtDumpIsPerDeviceAndHoldsOnlyActiveBlocks) {
  Snapshot s = whole_trace();
  dump_segment(s, 0x10000, 2 * kMiB, {{0x10000, 2 * kMiB, 2 * kMiB, BlockState::kActiveAllocated}},
               false, 1);
  const AllocatorState zero = state_at_dump(s, 0);
  EXPECT_EQ(zero.ranges.size(), 1u);
  EXPECT_EQ(zero.blocks.size(), 1u);  // the inactive blocks are gaps, not blocks
  EXPECT_EQ(zero.held, 3 * kMiB);
  EXPECT_EQ(zero.largest_free(), 17 * kMiB - 1024);
  const AllocatorState one = state_at_dump(s, 1);
  EXPECT_EQ(one.reserved, 2 * kMiB);
  EXPECT_EQ(one.held, 2 * kMiB);
  EXPECT_EQ(one.largest_free(), 0u);
  expect_consistent(zero, "device 0");
  expect_consistent(one, "device 1");
}

TEST(AllocatorHistory, FragmentationHistoryPeaksWhereFreeMemoryDoes) {
  const Snapshot s = whole_trace();
  AllocatorHistory history(s, 0);
  // Free memory peaks right after the segment is made (20 MiB, nothing held).
  EXPECT_EQ(history.peak_free().bytes, 20 * kMiB);
  EXPECT_EQ(history.peak_free().position, 1u);
  const FragmentationHistory f = fragmentation_history(history, 1);
  EXPECT_TRUE(f.known);
  EXPECT_TRUE(f.exact);
  EXPECT_EQ(f.reserved_peak, 20 * kMiB);
  EXPECT_EQ(f.free_at_reserved_peak, 20 * kMiB);
  EXPECT_EQ(f.peak_free, 20 * kMiB);
  EXPECT_EQ(f.largest_free_at_peak_free, 20 * kMiB);
}

}  // namespace
}  // namespace memsnap

namespace memsnap {
namespace {

// A trace where the walk back misfits: the history asked forward first is
// the walk back's (not derived), misfits and start state alike.
void expect_the_walk_backs(const AllocatorHistory& forward, const AllocatorHistory& back) {
  EXPECT_FALSE(forward.derived_forward());
  EXPECT_GT(back.check().misfits_back, 0u);
  EXPECT_EQ(forward.check().misfits_back, back.check().misfits_back);
  expect_same_state(forward.start(), back.start());
}

// Blocks for requests past max_split_size take their whole free block. Here
// X (4 MiB at +16 MiB) and then A (10 MiB at the base, so the 16 MiB before
// X) are carved, X is freed and then A: going forward nothing misfits and
// the end is the dump, but the walk back puts A back with the whole 20 MiB
// that is free when A is freed, over X's address, and misfits from there.
// The forward start state must not be taken then (it would say no misfit):
// the history is the walk back's, whichever way it was asked for.
TEST(AllocatorHistory, AForwardStartIsNotTakenWhereTheWalkBackWouldSizeABlockLarger) {
  testing::ModelBuilder b;
  b.model.allocator_settings.max_split_size = 4 * kMiB;
  b.event(Action::kSegmentAlloc, kBase, 20 * kMiB, 1);
  b.alloc(kBase + 16 * kMiB, 4 * kMiB, 2);
  b.alloc(kBase, 10 * kMiB, 3);
  b.event(Action::kFreeRequested, kBase + 16 * kMiB, 4 * kMiB, 4);
  b.event(Action::kFreeCompleted, kBase + 16 * kMiB, 4 * kMiB, 5);
  b.event(Action::kFreeRequested, kBase, 10 * kMiB, 6);
  b.event(Action::kFreeCompleted, kBase, 10 * kMiB, 7);
  dump_segment(b.model, kBase, 20 * kMiB, {{kBase, 20 * kMiB, 0, BlockState::kInactive}});
  const AllocatorHistory forward(b.model, 0, StartDerivation::kForwardFirst);
  const AllocatorHistory back(b.model, 0, StartDerivation::kWalkBack);
  expect_the_walk_backs(forward, back);
  EXPECT_EQ(forward.check().misfits_forward, back.check().misfits_forward);
  EXPECT_EQ(forward.check().exact, back.check().exact);
}

// A block from before the trace, freed late with 1500 bytes requested, is
// settled at 1536 bytes; while it was held an allocation was placed 1024
// bytes after it. The walk back puts it back over that allocation and
// misfits; the forward start must not be taken.
TEST(AllocatorHistory, AForwardStartIsNotTakenWhereABlockFromBeforeWouldCoverALaterOne) {
  testing::ModelBuilder b;
  b.alloc(kBase + 1024, 512, 1);
  b.event(Action::kFreeRequested, kBase + 1024, 512, 2);
  b.event(Action::kFreeCompleted, kBase + 1024, 512, 3);
  b.event(Action::kFreeCompleted, kBase, 1500, 4);
  dump_segment(b.model, kBase, 2 * kMiB, {{kBase, 2 * kMiB, 0, BlockState::kInactive}});
  const AllocatorHistory forward(b.model, 0, StartDerivation::kForwardFirst);
  const AllocatorHistory back(b.model, 0, StartDerivation::kWalkBack);
  expect_the_walk_backs(forward, back);
  EXPECT_EQ(forward.check().inferred_sizes, back.check().inferred_sizes);
}

// The whole-trace example takes the forward start, and it is the walk back's.
TEST(AllocatorHistory, AForwardStartEqualsTheWalkBacksWhereItIsTaken) {
  const Snapshot s = whole_trace();
  const AllocatorHistory forward(s, 0, StartDerivation::kForwardFirst);
  const AllocatorHistory back(s, 0, StartDerivation::kWalkBack);
  EXPECT_TRUE(forward.derived_forward());
  EXPECT_FALSE(back.derived_forward());
  expect_same_state(forward.start(), back.start());
  EXPECT_EQ(forward.check().entries, back.check().entries);
  EXPECT_EQ(forward.peak_free().bytes, back.peak_free().bytes);
  EXPECT_EQ(forward.peak_free().position, back.peak_free().position);
}

}  // namespace
}  // namespace memsnap
