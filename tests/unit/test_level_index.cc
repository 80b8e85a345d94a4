// The level index and the memory line built on it: every range's min and max
// equal a walk over the levels, every column holds the level carried in and
// each one reached in it, and the line's highest point is the peak. The
// allocation spans equal a replay written here, and the allocation layout
// draws the largest visible allocations with a band that makes up the line.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/allocation_layout.h"
#include "analysis/reports/memory_line.h"
#include "expect_error.h"
#include "memsnap/error.h"
#include "model_builder.h"

namespace memsnap {
namespace {

// A trace of `n` allocs and frees with random sizes, one microsecond apart.
testing::ModelBuilder random_trace(int n, uint32_t seed) {
  testing::ModelBuilder b;
  std::mt19937 random(seed);
  std::vector<uint64_t> live;
  for (int i = 0; i < n; ++i) {
    const int64_t time_us = 1'000'000 + i;
    if (live.empty() || random() % 3 != 0) {
      const uint64_t addr = 0x1000 * static_cast<uint64_t>(i + 1);
      b.alloc(addr, 512 * (1 + random() % 100), time_us);
      live.push_back(addr);
    } else {
      const size_t k = random() % live.size();
      b.free(live[k], 0, time_us);  // the size comes from its alloc
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return b;
}

TEST(LevelIndex, RangesEqualAWalkOverTheLevels) {
  testing::ModelBuilder b = random_trace(20'000, 7);
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  const LevelIndex& levels = file.levels();
  ASSERT_EQ(levels.count(), file.trace().count());
  std::vector<int64_t> all;
  for (uint64_t p = 0; p <= levels.count(); ++p) all.push_back(levels.at(p));
  EXPECT_EQ(all.front(), 0);
  EXPECT_EQ(*std::max_element(all.begin(), all.end()), file.trace_analysis().totals.peak_delta);
  EXPECT_EQ(levels.at(levels.count()), file.trace_analysis().totals.end_delta);
  std::mt19937 random(11);
  for (int k = 0; k < 2000; ++k) {
    uint64_t from = random() % (levels.count() + 1);
    uint64_t to = random() % (levels.count() + 1);
    if (k % 4 == 0) to = std::min<uint64_t>(levels.count(), from + random() % 70);
    if (from > to) std::swap(from, to);
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(from);
    const auto last = all.begin() + static_cast<std::ptrdiff_t>(to) + 1;
    const auto [low, high] = levels.range(from, to);
    ASSERT_EQ(low, *std::min_element(first, last)) << from << ".." << to;
    ASSERT_EQ(high, *std::max_element(first, last)) << from << ".." << to;
    const uint64_t peak = levels.peak_position(from, to);
    ASSERT_EQ(peak, static_cast<uint64_t>(std::max_element(first, last) - all.begin()));
  }
}

// alloc entry -> [begin, end) positions, by a replay of the model written here.
std::map<uint64_t, std::pair<uint64_t, uint64_t>> spans_by_hand(const Snapshot& model,
                                                                const DeviceTrace& trace) {
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> out;
  std::map<uint64_t, uint64_t> live;  // address -> alloc entry
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    const uint64_t entry = i - trace.begin;
    const Action action = model.events.action[i];
    if (action != Action::kAlloc && action != Action::kFreeCompleted) continue;
    const auto found = live.find(model.events.addr[i]);
    if (found != live.end()) {
      out[found->second].second = entry + 1;
      live.erase(found);
    }
    if (action == Action::kAlloc) {
      out[entry] = {entry + 1, trace.count() + 1};
      live[model.events.addr[i]] = entry;
    }
  }
  return out;
}

TEST(AllocationSpans, EqualAReplayAndComeLargestFirst) {
  testing::ModelBuilder b = random_trace(3'000, 5);
  b.alloc(0x1000, 4096, 2'000'000);  // an alloc at a live address replaces it
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  const AllocationSpans& spans = file.spans();
  const auto expected = spans_by_hand(b.model, file.trace());
  ASSERT_EQ(spans.by_size().size(), expected.size());
  uint64_t previous = UINT64_MAX;
  for (const AllocationSpan& span : spans.by_size()) {
    const uint64_t size = spans.size_of(span);
    EXPECT_LE(size, previous);
    previous = size;
    ASSERT_EQ(expected.count(span.entry()), 1U);
    EXPECT_EQ(expected.at(span.entry()), std::make_pair(span.begin, span.end));
    EXPECT_EQ(spans.find(span.entry(), size), &span);
  }
  EXPECT_EQ(spans.find(0, 1), nullptr);
}

// What was live at a position, read from the levels and spans (serve's
// replay-to-time), equals the replay from the start: rows by every grouping,
// counts and bytes, with stacks, address reuse and frees without an alloc.
TEST(LiveAt, FromSpansEqualsTheReplay) {
  testing::ModelBuilder b;
  std::mt19937 random(17);
  std::vector<StackId> stacks;
  stacks.reserve(12);
  for (int s = 0; s < 12; ++s) {
    stacks.push_back(b.stack({{"f" + std::to_string(s), "/home/u/train.py", s + 1},
                              {"forward", "/site-packages/torch/nn/module.py", 10}}));
  }
  std::vector<uint64_t> live;
  for (int i = 0; i < 6'000; ++i) {
    const int64_t time_us = 1'000'000 + i;
    const StackId stack = stacks[random() % stacks.size()];
    const uint32_t pick = random() % 10;
    if (live.empty() || pick < 5) {
      const uint64_t addr = 0x1000 * (1 + random() % 4'000);  // reuse replaces a live one
      b.alloc(addr, 512 * (random() % 64), time_us, stack);   // zero bytes too
      live.push_back(addr);
    } else if (pick == 5) {
      b.free(0x9000'0000 + 0x1000 * static_cast<uint64_t>(i), 4096, time_us, stack);  // no alloc
    } else {
      const size_t k = random() % live.size();
      b.free(live[k], 0, time_us, stack);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  EXPECT_FALSE(file.has_levels());  // a one-shot command never builds them
  const uint64_t count = file.trace().count();
  for (GroupBy group : {GroupBy::kSource, GroupBy::kCategory, GroupBy::kFile}) {
    SourceKeyOptions options;
    options.group = group;
    SourceIndex replayed(b.model, options);
    SourceIndex scanned(b.model, options);
    std::vector<uint64_t> positions{0, 1, count - 1, count, count + 5};
    for (int k = 0; k < 60; ++k) positions.push_back(random() % (count + 1));
    for (uint64_t position : positions) {
      const LiveAt slow = live_at(b.model, file.trace(), replayed, position);
      const LiveAt fast =
          live_at(b.model, file.trace(), file.levels(), file.spans(), scanned, position);
      SCOPED_TRACE(position);
      EXPECT_EQ(fast.alloc_count, slow.alloc_count);
      EXPECT_EQ(fast.free_count, slow.free_count);
      EXPECT_EQ(fast.delta, slow.delta);
      EXPECT_EQ(fast.live_count, slow.live_count);
      EXPECT_EQ(fast.live_bytes, slow.live_bytes);
      ASSERT_EQ(fast.sources.size(), slow.sources.size());
      for (size_t r = 0; r < fast.sources.size(); ++r) {
        EXPECT_EQ(fast.sources[r].source, slow.sources[r].source);
        EXPECT_EQ(fast.sources[r].bytes, slow.sources[r].bytes);
        EXPECT_EQ(fast.sources[r].count, slow.sources[r].count);
        EXPECT_EQ(fast.sources[r].kind, slow.sources[r].kind);
      }
    }
  }
  EXPECT_TRUE(file.has_levels());
}

TEST(AllocationLayout, BandAndDrawnMakeUpTheLineAndTheLargestAreDrawn) {
  testing::ModelBuilder b = random_trace(4'000, 9);
  // A dump that holds what the trace left live (and more, from before it):
  // the line never falls below the allocations live, so the band is >= 0.
  b.segment(0, uint64_t{1} << 34, uint64_t{1} << 33);
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  ASSERT_GE(file.baseline().baseline_at_start, 0);
  const auto spans = spans_by_hand(b.model, file.trace());
  const auto count = static_cast<double>(file.trace().count());
  for (const LineWindow window : {LineWindow{LineAxis::kEvent, 0, count, 300},
                                  LineWindow{LineAxis::kEvent, count / 3, count / 2, 97},
                                  LineWindow{LineAxis::kTime, 0, file.time().duration_s(), 50}}) {
    for (const size_t budget : {size_t{1}, size_t{40}, size_t{15'000}}) {
      const AllocationLayout layout = allocation_layout(file, window, budget, "", {});
      const MemoryLine line = memory_line(file, window);
      ASSERT_EQ(layout.line.high, line.high);
      ASSERT_LE(layout.drawn.size(), budget);
      // Visible: live at a column's position; the drawn are the largest of them.
      uint64_t smallest_drawn = UINT64_MAX;
      std::set<uint64_t> drawn;
      for (const DrawnAllocation& a : layout.drawn) {
        drawn.insert(a.entry);
        smallest_drawn = std::min(smallest_drawn, a.size);
      }
      uint64_t largest_left = 0;
      size_t visible = 0;
      for (const auto& [entry, span] : spans) {
        const bool live_somewhere = std::any_of(
            layout.sample.begin(), layout.sample.end(),
            [from = span.first, to = span.second](uint64_t p) { return from <= p && p < to; });
        visible += live_somewhere ? 1 : 0;
        if (live_somewhere && drawn.count(entry) == 0) {
          largest_left = std::max(largest_left, b.model.events.size[entry]);
        }
      }
      EXPECT_EQ(layout.complete, visible == layout.drawn.size());
      if (!layout.drawn.empty() && largest_left > 0) EXPECT_LE(largest_left, smallest_drawn);
      for (size_t c = 0; c < layout.sample.size(); ++c) {
        int64_t sum = layout.band[c];
        for (const DrawnAllocation& a : layout.drawn) {
          const auto& span = spans.at(a.entry);
          const bool live = span.first <= layout.sample[c] && layout.sample[c] < span.second;
          EXPECT_EQ(live,
                    a.first_column <= static_cast<int>(c) && static_cast<int>(c) <= a.last_column);
          if (live) sum += static_cast<int64_t>(a.size);
        }
        ASSERT_EQ(sum, line.high[c]) << c;
        EXPECT_GE(layout.band[c], 0) << c;
      }
    }
  }
  testing::expect_error_code(
      [&] {
        allocation_layout(file, {LineAxis::kEvent, 0, 10, 10}, 0, "", {});
      },
      ErrorCode::kBadParameter);
}

TEST(MemoryLine, ColumnsHoldWhatTheyReachAndThePeakShows) {
  testing::ModelBuilder b = random_trace(5'000, 3);
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  const int64_t peak = file.absolute_peak();
  for (int width : {1, 7, 300, 8192}) {
    const MemoryLine by_time =
        memory_line(file, {LineAxis::kTime, 0, file.time().duration_s(), width});
    EXPECT_EQ(*std::max_element(by_time.high.begin(), by_time.high.end()), peak) << width;
    const MemoryLine by_event =
        memory_line(file, {LineAxis::kEvent, 0, static_cast<double>(file.trace().count()), width});
    EXPECT_EQ(*std::max_element(by_event.high.begin(), by_event.high.end()), peak) << width;
    ASSERT_EQ(by_event.low.size(), static_cast<size_t>(width));
    for (int c = 0; c < width; ++c) EXPECT_LE(by_event.low[c], by_event.high[c]);
  }
  // One column over entries 10..20: the level after 10 entries and each to 20.
  const MemoryLine one = memory_line(file, {LineAxis::kEvent, 10, 20, 1});
  const LevelIndex& levels = file.levels();
  int64_t low = levels.at(10);
  int64_t high = low;
  for (uint64_t p = 10; p <= 20; ++p) {
    low = std::min(low, levels.at(p));
    high = std::max(high, levels.at(p));
  }
  EXPECT_EQ(one.low[0], one.baseline + low);
  EXPECT_EQ(one.high[0], one.baseline + high);
  testing::expect_error_code(
      [&] {
        memory_line(file, {LineAxis::kTime, 0, 1, 0});
      },
      ErrorCode::kBadParameter);
  testing::expect_error_code(
      [&] {
        memory_line(file, {LineAxis::kTime, 2, 1, 10});
      },
      ErrorCode::kBadParameter);
  // A device without entries has no line: said as the file's fact, not a bad window.
  testing::ModelBuilder empty;
  empty.segment(0, 1 << 20, 4096);
  const FileAnalysis dump_only = analyze_file("dump", empty.model, std::nullopt);
  testing::expect_error_code(
      [&] {
        memory_line(dump_only, {LineAxis::kEvent, 0, 1, 10});
      },
      ErrorCode::kNoTrace);
}

}  // namespace
}  // namespace memsnap
