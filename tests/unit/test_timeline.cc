// The plot's data: downsampling keeps every peak within its point budget, and
// the embedded lifetimes give the same live set as the replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/time_report.h"
#include "analysis/reports/timeline.h"
#include "model_builder.h"

namespace memsnap {
namespace {

TEST(Bucketize, KeepsThePeakAndTheBudget) {
  std::mt19937_64 random(7);
  std::vector<double> positions;
  std::vector<double> values;
  double value = 0;
  double peak = 0;
  for (int i = 0; i < 200000; ++i) {
    positions.push_back(i * 3.0);
    value += static_cast<double>(static_cast<int>(random() % 2001) - 1000);
    values.push_back(value);
    peak = std::max(peak, value);
  }
  for (uint64_t budget : {1, 7, 1000, 65536}) {
    Buckets buckets = bucketize(positions, values, positions.back(), 1.0, budget);
    ASSERT_LE(buckets.max.size(), budget);
    ASSERT_EQ(buckets.min.size(), buckets.max.size());
    EXPECT_EQ(*std::max_element(buckets.max.begin(), buckets.max.end()), peak) << budget;
  }
}

TEST(Bucketize, EmptyBucketsCarryTheLastValue) {
  Buckets buckets = bucketize({0, 100}, {5, 9}, 100, 10, 1000);
  ASSERT_EQ(buckets.max.size(), 11u);
  EXPECT_EQ(buckets.min[0], 0);  // the value carried in: the trace starts at delta 0
  EXPECT_EQ(buckets.max[0], 5);
  for (size_t b = 1; b < 10; ++b) {
    EXPECT_EQ(buckets.min[b], 5);
    EXPECT_EQ(buckets.max[b], 5);
  }
  EXPECT_EQ(buckets.max[10], 9);
}

TEST(Timeline, LifetimesReproduceTheReplay) {
  testing::ModelBuilder b;
  StackId forward = b.stack({{"forward", "/home/me/model.py", 10}});
  StackId backward = b.stack({{"backward", "/home/me/model.py", 20}});
  std::mt19937_64 random(11);
  std::vector<uint64_t> live;
  int64_t time = 1'000'000;
  for (int i = 0; i < 3000; ++i) {
    time += static_cast<int64_t>(random() % 50);
    if (!live.empty() && random() % 3 == 0) {
      size_t pick = random() % live.size();
      b.free(live[pick], 0, time);
      live.erase(live.begin() + static_cast<ptrdiff_t>(pick));
    } else {
      uint64_t addr = 0x1000 * (1 + random() % 500);  // reuse happens: replaced blocks
      b.alloc(addr, 512 + random() % 4096, time, random() % 2 == 0 ? forward : backward);
      if (std::find(live.begin(), live.end(), addr) == live.end()) live.push_back(addr);
    }
  }
  FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  RunTimeline run = build_timeline(file, "test", 1.0, SourceKeyOptions{});
  const Lifetimes& life = run.lifetimes;
  for (double seconds : {0.0, 0.01, 0.02, 0.05, 1.0}) {
    TimeSide side = replay_to_time(file, seconds, SourceKeyOptions{});
    auto limit = static_cast<uint64_t>(std::llround(side.time_s * 1e6));
    std::map<std::string, std::pair<uint64_t, uint64_t>> from_lifetimes;
    for (size_t i = 0; i < life.start_us.size(); ++i) {
      bool live_at = life.start_us[i] <= limit &&
                     (life.end_us[i] == Lifetimes::kStillLive || life.end_us[i] > limit);
      if (!live_at) continue;
      auto& [bytes, count] = from_lifetimes[run.sources[life.source[i]]];
      bytes += life.size[i];
      ++count;
    }
    ASSERT_EQ(from_lifetimes.size(), side.sources.size()) << seconds;
    for (const SourceUsage& row : side.sources) {
      EXPECT_EQ(from_lifetimes[row.source].first, row.bytes) << row.source << " at " << seconds;
      EXPECT_EQ(from_lifetimes[row.source].second, row.count) << row.source << " at " << seconds;
    }
  }
  // The time buckets' maximum is the replay's peak delta.
  EXPECT_EQ(*std::max_element(run.time_buckets.max.begin(), run.time_buckets.max.end()),
            static_cast<double>(file.trace_analysis().totals.peak_delta));
}

// Past max_lifetimes the page gets moments: each moment's rows are what
// replay-to-time gives at that moment's time, source by source.
// The drill-down adds up to the line: at any time the lifetimes live then
// plus the unlisted rows (memory from before the trace less its frees so
// far, allocations at reused addresses) are baseline + delta, what
// replay-to-time calls absolute; with moments instead of lifetimes, at every
// moment.
TEST(Timeline, UnlistedMemoryAddsUpToTheLine) {
  testing::ModelBuilder b;
  const StackId sites[] = {b.stack({{"forward", "/home/me/model.py", 10}}),
                           b.stack({{"backward", "/home/me/model.py", 20}})};
  std::vector<StackId> freed_by;
  for (int line = 1; line <= 12; ++line) {
    freed_by.push_back(b.stack({{"zero_grad", "/usr/lib/torch/optim/optimizer.py", 975},
                                {"train", "/home/me/train.py", 100 + line}}));
  }
  std::mt19937_64 random(21);
  std::vector<uint64_t> live;
  int64_t time = 3'000'000;
  uint64_t before = 0x70000000;  // blocks from before the trace, freed as it runs
  for (int i = 0; i < 5000; ++i) {
    time += static_cast<int64_t>(random() % 30);
    const uint64_t pick = random() % 10;
    if (pick == 0 && before < 0x70000000 + 0x1000 * 300) {
      b.free(before, 4096 * (1 + random() % 64), time, freed_by[random() % freed_by.size()]);
      before += 0x1000;
    } else if (!live.empty() && pick < 4) {
      const size_t at = random() % live.size();
      b.free(live[at], 0, time);
      live.erase(live.begin() + static_cast<ptrdiff_t>(at));
    } else {
      const uint64_t addr = 0x1000 * (1 + random() % 600);  // reuse happens: replaced blocks
      b.alloc(addr, 512 + random() % 8192, time, sites[random() % 2]);
      if (std::find(live.begin(), live.end(), addr) == live.end()) live.push_back(addr);
    }
  }
  b.segment(0, uint64_t{1} << 34, uint64_t{3} << 30);  // no blocks: the rest is "no block matches"
  FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  ASSERT_GT(file.baseline().baseline_at_start, 0);

  const auto unlisted_at = [](const UnlistedMemory& u, uint64_t t_us) {
    int64_t bytes = 0;
    for (int64_t start : u.start_bytes) bytes += start;
    for (size_t k = 0; k < u.change_us.size(); ++k) {
      if (u.change_us[k] <= t_us) bytes += u.change_bytes[k];
    }
    return bytes;
  };
  RunTimeline run = build_timeline(file, "test", 1.0, SourceKeyOptions{});
  const UnlistedMemory& u = run.unlisted;
  ASSERT_FALSE(run.moments);
  EXPECT_LE(u.rows.size(), kUnlistedTopSources + 2);  // + other, + reused addresses
  EXPECT_NE(std::find(u.rows.begin(), u.rows.end(), "address reused without a free"), u.rows.end());
  EXPECT_EQ(u.change_us.size(), file.trace_analysis().totals.unmatched_free_count +
                                    std::count(u.change_row.begin(), u.change_row.end(),
                                               static_cast<uint32_t>(u.rows.size() - 1)));
  EXPECT_TRUE(std::is_sorted(u.change_event.begin(), u.change_event.end()));
  const Lifetimes& life = run.lifetimes;
  for (double seconds : {0.0, 0.001, 0.01, 0.02, 0.04, 0.07, 1.0}) {
    TimeSide side = replay_to_time(file, seconds, SourceKeyOptions{});
    const auto t = static_cast<uint64_t>(std::llround(side.time_s * 1e6));
    int64_t listed = 0;
    for (size_t i = 0; i < life.start_us.size(); ++i) {
      if (life.start_us[i] <= t && (life.end_us[i] == Lifetimes::kStillLive || life.end_us[i] > t))
        listed += static_cast<int64_t>(life.size[i]);
    }
    EXPECT_EQ(listed, static_cast<int64_t>(side.live_bytes)) << seconds;
    EXPECT_EQ(listed + unlisted_at(u, t), side.absolute) << seconds;
  }

  RunTimeline sparse = build_timeline(file, "test", 1.0, SourceKeyOptions{}, /*max_lifetimes=*/100);
  ASSERT_TRUE(sparse.moments);
  const LiveMoments& m = *sparse.moments;
  EXPECT_LE(sparse.unlisted.change_us.size(), m.time_us.size() * sparse.unlisted.rows.size());
  for (size_t k = 0; k < m.time_us.size(); k += 61) {
    TimeSide side =
        replay_to_time(file, static_cast<double>(m.time_us[k]) / 1e6, SourceKeyOptions{});
    int64_t listed = 0;
    for (uint64_t row = m.row_begin[k]; row < m.row_begin[k + 1]; ++row)
      listed += static_cast<int64_t>(m.bytes[row]);
    EXPECT_EQ(listed + unlisted_at(sparse.unlisted, m.time_us[k]), side.absolute) << m.time_us[k];
  }
}

TEST(Timeline, MomentsAreTheReplayAtTheirTimes) {
  testing::ModelBuilder b;
  const StackId sites[] = {b.stack({{"forward", "/home/me/model.py", 10}}),
                           b.stack({{"backward", "/home/me/model.py", 20}}),
                           b.stack({{"step", "/home/me/optim.py", 30}})};
  std::mt19937_64 random(12);
  std::vector<uint64_t> live;
  int64_t time = 2'000'000;
  for (int i = 0; i < 4000; ++i) {
    time += static_cast<int64_t>(random() % 40);
    if (!live.empty() && random() % 3 == 0) {
      size_t pick = random() % live.size();
      b.free(live[pick], 0, time);
      live.erase(live.begin() + static_cast<ptrdiff_t>(pick));
    } else {
      uint64_t addr = 0x1000 * (1 + random() % 700);
      b.alloc(addr, 512 + random() % 8192, time, sites[random() % 3]);
      if (std::find(live.begin(), live.end(), addr) == live.end()) live.push_back(addr);
    }
  }
  FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  RunTimeline whole = build_timeline(file, "test", 1.0, SourceKeyOptions{});
  EXPECT_FALSE(whole.moments);
  RunTimeline run = build_timeline(file, "test", 1.0, SourceKeyOptions{}, /*max_lifetimes=*/100);
  ASSERT_TRUE(run.moments);
  const LiveMoments& m = *run.moments;
  EXPECT_EQ(m.allocations, whole.lifetimes.start_us.size());
  EXPECT_TRUE(run.lifetimes.start_us.empty());  // the page does not get them
  ASSERT_GT(m.time_us.size(), 100u);
  ASSERT_LE(m.time_us.size(), kMaxLiveMoments);
  ASSERT_EQ(m.row_begin.size(), m.time_us.size() + 1);
  EXPECT_EQ(m.time_us.front(), 0u);
  EXPECT_EQ(m.time_us.back(), static_cast<uint64_t>(std::llround(run.duration_s * 1e6)));
  EXPECT_TRUE(std::is_sorted(m.time_us.begin(), m.time_us.end()));
  for (size_t k = 0; k < m.time_us.size(); k += 97) {
    const double seconds = static_cast<double>(m.time_us[k]) / 1e6;
    TimeSide side = replay_to_time(file, seconds, SourceKeyOptions{});
    std::map<std::string, std::pair<uint64_t, uint64_t>> at_moment;
    for (uint64_t row = m.row_begin[k]; row < m.row_begin[k + 1]; ++row) {
      at_moment[run.sources[m.source[row]]] = {m.bytes[row], m.count[row]};
    }
    ASSERT_EQ(at_moment.size(), side.sources.size()) << seconds;
    for (const SourceUsage& row : side.sources) {
      EXPECT_EQ(at_moment[row.source].first, row.bytes) << row.source << " at " << seconds;
      EXPECT_EQ(at_moment[row.source].second, row.count) << row.source << " at " << seconds;
    }
  }
}

}  // namespace
}  // namespace memsnap
