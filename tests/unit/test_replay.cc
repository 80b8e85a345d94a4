// Replay semantics on hand-made traces.
#include <gtest/gtest.h>

#include "analysis/core/segments.h"
#include "analysis/core/steps.h"
#include "memsnap/replay.h"
#include "model_builder.h"

namespace memsnap {
namespace {

TEST(Replay, AllocFreePeakAndEnd) {
  testing::ModelBuilder b;
  b.alloc(0x100, 100);
  b.alloc(0x200, 50);
  b.free(0x100, 100);
  b.alloc(0x300, 10);
  ReplayTotals t = replay_device(b.model, b.model.devices[0]);
  EXPECT_EQ(t.peak_delta, 150);
  EXPECT_EQ(t.peak_event, 1u);
  EXPECT_EQ(t.end_delta, 60);
  EXPECT_EQ(t.alloc_count, 3u);
  EXPECT_EQ(t.free_count, 1u);
  EXPECT_EQ(t.live_count_at_end, 2u);
  EXPECT_EQ(t.live_bytes_at_end, 60u);
  EXPECT_EQ(t.unmatched_free_count, 0u);
}

TEST(Replay, UnmatchedFreeSubtractsItsOwnSize) {
  testing::ModelBuilder b;
  b.free(0x999, 70);
  b.alloc(0x100, 30);
  ReplayTotals t = replay_device(b.model, b.model.devices[0]);
  EXPECT_EQ(t.unmatched_free_count, 1u);
  EXPECT_EQ(t.unmatched_free_bytes, 70u);
  EXPECT_EQ(t.end_delta, -40);
  EXPECT_EQ(t.peak_delta, 0);  // peak starts at 0
  EXPECT_EQ(t.peak_event, kNoEvent);
}

TEST(Replay, AddressReuseReplacesTheLiveAllocation) {
  testing::ModelBuilder b;
  b.alloc(0x100, 100);
  b.alloc(0x100, 40);  // no free in between: the new block replaces the old
  b.free(0x100, 40);
  ReplayTotals t = replay_device(b.model, b.model.devices[0]);
  EXPECT_EQ(t.end_delta, 100);  // 100 + 40 - 40: the replaced bytes stay counted in the delta
  EXPECT_EQ(t.live_bytes_at_end, 0u);
  EXPECT_EQ(t.live_count_at_end, 0u);
}

TEST(Replay, BaselineFromSegments) {
  testing::ModelBuilder b;
  b.free(0x1, 30);      // allocated before recording: pre-existing
  b.alloc(0x100, 100);  // still live at the end
  b.segment(0, 1024, 500);
  ReplayTotals t = replay_device(b.model, b.model.devices[0]);
  Baseline baseline = compute_baseline(segment_totals(b.model, 0), t);
  EXPECT_EQ(baseline.baseline_at_start, 500 - 100 + 30);
  EXPECT_EQ(baseline.baseline_at_start + t.end_delta, 500);  // complete-trace invariant
}

TEST(Replay, OtherActionsLeaveTheDeltaAlone) {
  testing::ModelBuilder b;
  b.event(Action::kSegmentAlloc, 0x0, 2 << 20);
  b.event(Action::kSnapshot, 0, 12345);
  b.event(Action::kOom, 0, 1 << 30);
  b.event(Action::kFreeRequested, 0x5, 10);
  ReplayTotals t = replay_device(b.model, b.model.devices[0]);
  EXPECT_EQ(t.end_delta, 0);
  EXPECT_EQ(t.free_count, 0u);
}

TEST(Replay, DevicesAreIndependent) {
  testing::ModelBuilder b;
  b.device();
  b.alloc(0x100, 100);
  b.device();
  b.alloc(0x100, 7);
  EXPECT_EQ(replay_device(b.model, b.model.devices[0]).end_delta, 100);
  EXPECT_EQ(replay_device(b.model, b.model.devices[1]).end_delta, 7);
}

TEST(Steps, StartEndAndIncomplete) {
  testing::ModelBuilder b;
  b.annotation("ProfilerStep#3", Stage::kStart, 1000);
  b.annotation("ProfilerStep#3", Stage::kEnd, 3000);
  b.annotation("ProfilerStep#4", Stage::kStart, 3000);
  b.annotation("ProfilerStep#4", Stage::kEnd, 0);       // END without a time does not count
  b.annotation("ProfilerStep#5", Stage::kStart, 1, 1);  // another device
  b.annotation("Optimizer.step#AdamW.step", Stage::kStart, 2000);
  std::vector<ProfilerStep> steps = profiler_steps(b.model, 0);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].number, 3);
  EXPECT_TRUE(steps[0].complete);
  EXPECT_DOUBLE_EQ(steps[0].duration_ms(), 2.0);
  EXPECT_EQ(steps[1].number, 4);
  EXPECT_FALSE(steps[1].complete);
}

TEST(Segments, TotalsAndFragmentationPerDevice) {
  testing::ModelBuilder b;
  b.segment(0, 1000, 600);
  b.segment(0, 1000, 400);
  b.segment(1, 4096, 4096);
  SegmentTotals s = segment_totals(b.model, 0);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.total_size, 2000u);
  EXPECT_EQ(s.inactive_size, 1000u);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.5);
}

}  // namespace
}  // namespace memsnap
