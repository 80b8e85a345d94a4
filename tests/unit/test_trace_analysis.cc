// Step windows of the replay engine on hand-made traces.
#include <gtest/gtest.h>

#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "analysis/core/trace_time.h"
#include "expect_error.h"
#include "memsnap/error.h"
#include "model_builder.h"

namespace memsnap {
namespace {

ProfilerStep step(int64_t number, int64_t start, int64_t end) {
  return ProfilerStep{number, start, end, end > 0};
}

TEST(TraceAnalysis, WindowThatOnlyFreesCarriedMemory) {
  testing::ModelBuilder b;
  b.alloc(0x100, 100, 10);
  b.alloc(0x200, 50, 20);
  b.free(0x100, 100, 30);  // step 1: [25, 40] only frees a block from before it
  b.free(0x200, 50, 35);
  TraceAnalysis analysis = analyze_trace(b.model, b.model.devices[0], {step(1, 25, 40)});
  const StepStats& s = analysis.steps[0];
  EXPECT_EQ(s.start_delta, 150);
  EXPECT_EQ(s.peak_delta, 0);  // peaks start at 0: the window start
  EXPECT_EQ(s.peak_event, kNoEvent);
  EXPECT_EQ(s.end_delta, -150);
  EXPECT_EQ(s.alloc_count, 0u);
  EXPECT_EQ(s.free_count, 2u);
  EXPECT_EQ(s.pre_existing_free_count, 2u);
  EXPECT_EQ(s.pre_existing_free_bytes, 150u);
}

TEST(TraceAnalysis, EventsOnTheBoundaryBelongToTheWindow) {
  testing::ModelBuilder b;
  b.alloc(0x100, 10, 100);  // exactly at START
  b.alloc(0x200, 20, 200);  // exactly at END, and at the next START
  b.alloc(0x300, 40, 201);
  TraceAnalysis analysis =
      analyze_trace(b.model, b.model.devices[0], {step(1, 100, 200), step(2, 200, 300)});
  EXPECT_EQ(analysis.steps[0].alloc_count, 2u);
  EXPECT_EQ(analysis.steps[0].peak_delta, 30);
  EXPECT_EQ(analysis.steps[1].alloc_count, 2u);
  EXPECT_EQ(analysis.steps[1].start_delta, 10);
  EXPECT_EQ(analysis.steps[1].peak_delta, 60);
}

TEST(TraceAnalysis, StepWithoutEndRunsToTheTraceEnd) {
  testing::ModelBuilder b;
  b.alloc(0x100, 10, 100);
  b.alloc(0x200, 20, 500);
  TraceAnalysis analysis = analyze_trace(b.model, b.model.devices[0], {step(3, 50, 0)});
  EXPECT_FALSE(analysis.steps[0].step.complete);
  EXPECT_EQ(analysis.steps[0].alloc_count, 2u);
  EXPECT_EQ(analysis.steps[0].end_delta, 30);
}

TEST(TraceAnalysis, EmptyWindowsInsideAndAfterTheTrace) {
  testing::ModelBuilder b;
  b.alloc(0x100, 10, 100);
  b.alloc(0x200, 20, 300);
  TraceAnalysis analysis =
      analyze_trace(b.model, b.model.devices[0], {step(1, 150, 200), step(2, 400, 500)});
  EXPECT_EQ(analysis.steps[0].start_delta, 10);
  EXPECT_EQ(analysis.steps[0].end_delta, 0);
  EXPECT_EQ(analysis.steps[1].start_delta, 30);
  EXPECT_EQ(analysis.steps[1].end_delta, 0);
}

TEST(TraceAnalysis, TimePositionsAndClamping) {
  testing::ModelBuilder b;
  b.alloc(0x100, 10, 1'000'000);
  b.alloc(0x200, 20, 1'500'000);
  b.free(0x100, 10, 2'000'000);
  const TraceTime time(b.model, b.model.devices[0]);
  EXPECT_EQ(time.position_at(0.0), 1u);
  EXPECT_EQ(time.position_at(0.5), 2u);
  EXPECT_EQ(time.position_at(0.9999), 2u);
  EXPECT_EQ(time.position_at(1.0), 4u);
  EXPECT_EQ(time.position_at(100.0), 4u);  // past the end: everything
  EXPECT_EQ(time.position_at(1e300), 4u);  // beyond 2^53 us: clamped, no overflow
  EXPECT_EQ(time.positions_at({0.0, 0.5, 1.0, 100.0}), (std::vector<uint64_t>{1, 2, 4, 4}));
  EXPECT_DOUBLE_EQ(time.duration_s(), 1.0);
  EXPECT_DOUBLE_EQ(time.clamped(7.0), 1.0);
  EXPECT_DOUBLE_EQ(time.clamped(0.25), 0.25);
  EXPECT_EQ(time.seconds_at(1), std::optional<double>(0.5));
}

TEST(TraceAnalysis, ATraceWithoutTimesRefusesATime) {
  testing::ModelBuilder b;
  b.alloc(0x100, 10);
  const TraceTime time(b.model, b.model.devices[0]);
  EXPECT_FALSE(time.timed());
  EXPECT_EQ(time.seconds_at(0), std::nullopt);
  // Said with what still works.
  testing::expect_error_code_saying([&] { time.require_times("f.pickle", "parse still works"); },
                                    ErrorCode::kNoTimestamps, "; parse still works");
}

TEST(TraceAnalysis, LiveBySourceAtPositions) {
  testing::ModelBuilder b;
  StackId a = b.stack({{"a", "/x/a.py", 1}});
  StackId c = b.stack({{"c", "/x/c.py", 2}});
  b.alloc(0x100, 10, 1, a);
  b.alloc(0x200, 20, 2, c);
  b.free(0x100, 10, 3);
  SourceIndex sources(b.model, SourceKeyOptions{});
  std::vector<uint64_t> positions{0, 2, 4};
  auto rows = live_by_source(b.model, b.model.devices[0], sources, positions);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0].empty());
  ASSERT_EQ(rows[1].size(), 2u);
  EXPECT_EQ(rows[1][0].source, "c@c.py:2");  // largest first
  EXPECT_EQ(rows[1][0].bytes, 20u);
  ASSERT_EQ(rows[2].size(), 1u);
  EXPECT_EQ(rows[2][0].bytes, 20u);
}

}  // namespace
}  // namespace memsnap

namespace memsnap {
namespace {

// A ring buffer that wrapped holds exactly max_entries, a round number;
// any other count is a late start, where raising max_entries helps nothing.
TEST(TraceCut, RoundCountsAreRingBuffersOthersLateStarts) {
  for (uint64_t wrapped : {1000u, 12000u, 100000u, 1000000u, 1024u, 131072u})
    EXPECT_EQ(trace_cut(wrapped), TraceCut::kRingBuffer) << wrapped;
  for (uint64_t late : {0u, 512u, 999u, 1937u, 19430u, 100001u})
    EXPECT_EQ(trace_cut(late), TraceCut::kLateStart) << late;
}

}  // namespace
}  // namespace memsnap
