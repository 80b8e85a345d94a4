// The level index and the memory line built on it: every range's min and max
// equal a walk over the levels, every column holds the level carried in and
// each one reached in it, and the line's highest point is the peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "analysis/core/file_analysis.h"
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
  }
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
  testing::expect_error_containing<Error>(
      [&] { memory_line(file, {LineAxis::kTime, 0, 1, 0}); }, "width must be 1 to 8192");
  testing::expect_error_containing<Error>(
      [&] { memory_line(file, {LineAxis::kTime, 2, 1, 10}); }, "0 <= from < to");
  // A device without entries has no line: said as the file's fact, not a bad window.
  testing::ModelBuilder empty;
  empty.segment(0, 1 << 20, 4096);
  const FileAnalysis dump_only = analyze_file("dump", empty.model, std::nullopt);
  try {
    memory_line(dump_only, {LineAxis::kEvent, 0, 1, 10});
    ADD_FAILURE() << "a line of a trace without entries";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), Error::Kind::kInput);
    EXPECT_NE(std::string(error.what()).find("no trace entries"), std::string::npos);
  }
}

}  // namespace
}  // namespace memsnap
