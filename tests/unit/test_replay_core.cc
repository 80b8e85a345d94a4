// The replay core's observer protocol: every consumer (steps, live by source,
// timeline, parse) relies on these calls, their order and their arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/core/sources.h"
#include "memsnap/replay.h"
#include "model_builder.h"

namespace memsnap {
namespace {

// Records every call as a line, with the delta the replay reports at that moment.
struct Recorder {
  const Replay* replay = nullptr;
  std::vector<std::string> calls;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    calls.push_back("alloc " + std::to_string(event) + " size " + std::to_string(added.size) +
                    " ordinal " + std::to_string(added.ordinal) + " delta " +
                    std::to_string(replay->delta()));
  }
  void on_replace(uint64_t event, const LiveAllocation& replaced) {
    calls.push_back("replace " + std::to_string(event) + " old " + std::to_string(replaced.size) +
                    " from " + std::to_string(replaced.event));
  }
  void on_free(uint64_t event, const LiveAllocation& freed) {
    calls.push_back("free " + std::to_string(event) + " size " + std::to_string(freed.size) +
                    " from " + std::to_string(freed.event) + " delta " +
                    std::to_string(replay->delta()));
  }
  void on_unmatched_free(uint64_t event, uint64_t size) {
    calls.push_back("unmatched " + std::to_string(event) + " size " + std::to_string(size));
  }
  void on_other(uint64_t event) { calls.push_back("other " + std::to_string(event)); }
};

// Only one hook: the others must simply not be called (and must compile).
struct AllocsOnly {
  uint64_t bytes = 0;
  void on_alloc(uint64_t /*event*/, const LiveAllocation& added) { bytes += added.size; }
};

TEST(ReplayCore, ObserversSeeWhatEachEventDid) {
  testing::ModelBuilder b;
  b.alloc(0x10, 100);                            // 0
  b.alloc(0x20, 50);                             // 1
  b.alloc(0x10, 30);                             // 2: replaces the live block at 0x10
  b.free(0x20, 50);                              // 3 free_requested, 4 free_completed
  b.event(Action::kFreeCompleted, 0x99, 7);      // 5: never allocated
  b.event(Action::kSegmentAlloc, 0x1000, 4096);  // 6
  Replay replay(b.model);
  Recorder recorder;
  recorder.replay = &replay;
  AllocsOnly allocs;
  replay.run(0, b.model.events.count(), recorder, allocs);
  std::vector<std::string> expected = {
      "alloc 0 size 100 ordinal 0 delta 100",
      "alloc 1 size 50 ordinal 1 delta 150",
      "replace 2 old 100 from 0",  // before the alloc that replaced it
      "alloc 2 size 30 ordinal 2 delta 180",
      "other 3",  // free_requested changes nothing
      "free 4 size 50 from 1 delta 130",
      "unmatched 5 size 7",
      "other 6",
  };
  EXPECT_EQ(recorder.calls, expected);
  EXPECT_EQ(allocs.bytes, 180u);
  ReplayTotals totals = replay.totals();
  EXPECT_EQ(totals.end_delta, 123);
  EXPECT_EQ(totals.peak_delta, 180);
  EXPECT_EQ(totals.peak_event, 2u);
  EXPECT_EQ(totals.live_count_at_end, 1u);  // 0x10 (the replacement)
  EXPECT_EQ(totals.live_bytes_at_end, 30u);
  EXPECT_EQ(totals.unmatched_free_count, 1u);
  EXPECT_EQ(totals.unmatched_free_bytes, 7u);
}

// Running in pieces with run() is the same as one pass: consumers that stop
// at positions (live by source, time) depend on it.
TEST(ReplayCore, RunInPiecesEqualsOnePass) {
  testing::ModelBuilder b;
  for (uint64_t i = 0; i < 50; ++i) {
    b.alloc(0x100 + (i % 7) * 0x10, 10 + i);
    if (i % 3 == 0) b.free(0x100 + ((i + 2) % 7) * 0x10, 1);
  }
  uint64_t n = b.model.events.count();
  Replay whole(b.model);
  whole.run(0, n);
  Replay pieces(b.model);
  for (uint64_t at = 0; at < n; at += 9) pieces.run(at, std::min(at + 9, n));
  ReplayTotals a = whole.totals();
  ReplayTotals c = pieces.totals();
  EXPECT_EQ(a.end_delta, c.end_delta);
  EXPECT_EQ(a.peak_delta, c.peak_delta);
  EXPECT_EQ(a.peak_event, c.peak_event);
  EXPECT_EQ(a.live_bytes_at_end, c.live_bytes_at_end);
  EXPECT_EQ(a.unmatched_free_count, c.unmatched_free_count);
  EXPECT_EQ(whole.live().size(), pieces.live().size());
}

}  // namespace
}  // namespace memsnap

namespace memsnap {
namespace {

// Live at the dump from the segments' blocks: active allocated blocks only,
// grouped by the source of their own stacks, one device at a time.
TEST(LiveAtDump, GroupsActiveBlocksBySource) {
  testing::ModelBuilder b;
  StackId model = b.stack({{"build", "/home/me/model.py", 10}});
  StackId data = b.stack({{"load", "/home/me/data.py", 3}});
  auto add_segment = [&](int device, std::vector<Block> blocks) {
    Segment segment;
    segment.device = device;
    segment.first_block = static_cast<uint32_t>(b.model.blocks.size());
    segment.block_count = static_cast<uint32_t>(blocks.size());
    for (const Block& block : blocks) b.model.blocks.push_back(block);
    b.model.segments.push_back(segment);
  };
  add_segment(0, {Block{0x0, 100, 100, BlockState::kActiveAllocated, model},
                  Block{0x100, 50, 50, BlockState::kInactive, model},
                  Block{0x200, 30, 30, BlockState::kActiveAllocated, data}});
  add_segment(0, {Block{0x1000, 200, 200, BlockState::kActiveAllocated, model},
                  Block{0x2000, 7, 7, BlockState::kActivePendingFree, data}});
  add_segment(1, {Block{0x0, 999, 999, BlockState::kActiveAllocated, data}});
  SourceIndex sources(b.model, SourceKeyOptions{});
  std::vector<SourceUsage> rows = live_at_dump_by_source(b.model, 0, sources);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].source, "build@model.py:10");
  EXPECT_EQ(rows[0].bytes, 300u);
  EXPECT_EQ(rows[0].count, 2u);
  EXPECT_EQ(rows[1].source, "load@data.py:3");
  EXPECT_EQ(rows[1].bytes, 30u);
  EXPECT_EQ(rows[1].count, 1u);
  // Blocks without frames are one "<no frames>" row, so that the table adds
  // up to what was live; by size class for compare.
  testing::ModelBuilder bare;
  Segment segment;
  segment.block_count = 3;
  bare.model.blocks.push_back(
      Block{0x0, 3u << 20, 3u << 20, BlockState::kActiveAllocated, StackId{}});
  bare.model.blocks.push_back(
      Block{0x0, 2u << 20, 2u << 20, BlockState::kActiveAllocated, StackId{}});
  bare.model.blocks.push_back(Block{0x0, 512, 512, BlockState::kActiveAllocated, StackId{}});
  bare.model.segments.push_back(segment);
  SourceIndex bare_sources(bare.model, SourceKeyOptions{});
  const std::vector<SourceUsage> one = live_at_dump_by_source(bare.model, 0, bare_sources);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].source, kNoFrames);
  EXPECT_EQ(one[0].bytes, (5u << 20) + 512);
  EXPECT_EQ(one[0].kind, KeyKind::kOther);
  const std::vector<SourceUsage> by_size =
      live_at_dump_by_source(bare.model, 0, bare_sources, FramelessBlocks::kBySizeClass);
  ASSERT_EQ(by_size.size(), 2u);
  EXPECT_EQ(by_size[0].source, "<no frames: blocks of 2 MiB to 4 MiB>");
  EXPECT_EQ(by_size[0].count, 2u);
  EXPECT_EQ(by_size[1].source, "<no frames: blocks of 512 B to 1 KiB>");
  EXPECT_EQ(frameless_size_class(1), "<no frames: blocks of 1 B to 2 B>");
  EXPECT_EQ(frameless_size_class(uint64_t{1} << 40), "<no frames: blocks of 1 TiB to 2 TiB>");
}

}  // namespace
}  // namespace memsnap
