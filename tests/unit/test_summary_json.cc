// Unit tests of the run summary file (`memsnap summarize` writes it, `ranks`
// and `check` read it back): a written summary reads back equal, field by
// field, and a document that is not one is refused naming the key at fault.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "expect_error.h"
#include "formats/budget_file.h"
#include "formats/summary_json.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

RunSummary full_summary() {
  RunSummary s;
  s.path = "/runs/b/snapshot_rank7.pickle.gz";
  s.size_bytes = 123456789;
  s.head_hash = "0123456789abcdef0123456789abcdef";
  s.compression = "gzip";
  s.rank = 7;
  s.device = 1;
  s.devices = {0, 1};
  s.group = GroupBy::kCategory;
  s.allocator_settings = ordered_json{{"max_split_size", -1}, {"expandable_segments", true}};
  s.segments.count = 12;
  s.segments.total_size = uint64_t{40} << 30;
  s.segments.allocated_size = uint64_t{30} << 30;
  s.segments.active_size = uint64_t{31} << 30;
  s.segments.awaiting_free_size = uint64_t{1} << 30;
  s.segments.inactive_size = uint64_t{9} << 30;
  s.segments.fragmentation = 0.225;
  s.segments.expandable_count = 2;
  s.segments.private_pool_count = 1;
  s.segments.block_count = 345;
  s.facts.reserved_peak = uint64_t{41} << 30;
  s.facts.reserved_peak_time_s = 12.5;
  s.facts.baseline = -(int64_t{1} << 20);  // a trace that starts mid-run can go below zero
  s.facts.peak_delta = int64_t{20} << 30;
  s.facts.absolute_peak = (int64_t{20} << 30) - (int64_t{1} << 20);
  s.facts.peak_time_s = std::nullopt;
  s.facts.peak_event = 4242;
  s.facts.event_count = 100000;
  s.facts.alloc_count = 50000;
  s.facts.unmatched_free_count = 3;
  s.facts.unmatched_free_bytes = 4096;
  s.facts.has_time = true;
  s.facts.trace_duration_s = 61.25;
  s.steps = {{1, true, 250.5, int64_t{19} << 30, int64_t{2} << 30},
             {2, false, 0, int64_t{18} << 30, 0}};
  s.step_count = 2;
  s.live_at_peak = {{"forward@model.py:10", uint64_t{12} << 30, 40}, {"<no frames>", 512, 1}};
  s.live_at_peak_sources = 5;
  s.live_at_peak_bytes = uint64_t{13} << 30;
  s.live_at_peak_by_category = {{"activation", uint64_t{12} << 30, 40}};
  s.throughput = {{"forward@model.py:10", uint64_t{100} << 30, 900}};
  s.throughput_sources = 9;
  s.ooms = {SummaryOom{99, uint64_t{2} << 30, uint64_t{1} << 30, 60.0},
            SummaryOom{100, 512, std::nullopt, std::nullopt}};
  s.oom_count = 2;
  return s;
}

std::string written(const RunSummary& s) {
  return render_summary_json(s).dump(2);
}

void expect_usage_equal(const std::vector<SourceUsage>& a, const std::vector<SourceUsage>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].source, b[i].source);
    EXPECT_EQ(a[i].bytes, b[i].bytes);
    EXPECT_EQ(a[i].count, b[i].count);
  }
}

TEST(SummaryJson, WrittenThenReadIsTheSameSummary) {
  const RunSummary s = full_summary();
  const RunSummary back = read_summary_json(written(s), "s.json");
  EXPECT_EQ(back.path, s.path);
  EXPECT_EQ(back.size_bytes, s.size_bytes);
  EXPECT_EQ(back.head_hash, s.head_hash);
  EXPECT_EQ(back.compression, s.compression);
  EXPECT_EQ(back.rank, s.rank);
  EXPECT_EQ(back.device, s.device);
  EXPECT_EQ(back.devices, s.devices);
  EXPECT_EQ(back.group, s.group);
  EXPECT_EQ(back.allocator_settings, s.allocator_settings);
  EXPECT_EQ(back.segments.count, s.segments.count);
  EXPECT_EQ(back.segments.total_size, s.segments.total_size);
  EXPECT_EQ(back.segments.allocated_size, s.segments.allocated_size);
  EXPECT_EQ(back.segments.active_size, s.segments.active_size);
  EXPECT_EQ(back.segments.awaiting_free_size, s.segments.awaiting_free_size);
  EXPECT_EQ(back.segments.inactive_size, s.segments.inactive_size);
  EXPECT_EQ(back.segments.fragmentation, s.segments.fragmentation);
  EXPECT_EQ(back.segments.expandable_count, s.segments.expandable_count);
  EXPECT_EQ(back.segments.private_pool_count, s.segments.private_pool_count);
  EXPECT_EQ(back.segments.block_count, s.segments.block_count);
  EXPECT_EQ(back.facts.reserved_peak, s.facts.reserved_peak);
  EXPECT_EQ(back.facts.reserved_peak_time_s, s.facts.reserved_peak_time_s);
  EXPECT_EQ(back.facts.baseline, s.facts.baseline);
  EXPECT_EQ(back.facts.peak_delta, s.facts.peak_delta);
  EXPECT_EQ(back.facts.absolute_peak, s.facts.absolute_peak);
  EXPECT_EQ(back.facts.peak_time_s, s.facts.peak_time_s);
  EXPECT_EQ(back.facts.peak_event, s.facts.peak_event);
  EXPECT_EQ(back.facts.event_count, s.facts.event_count);
  EXPECT_EQ(back.facts.alloc_count, s.facts.alloc_count);
  EXPECT_EQ(back.facts.unmatched_free_count, s.facts.unmatched_free_count);
  EXPECT_EQ(back.facts.unmatched_free_bytes, s.facts.unmatched_free_bytes);
  EXPECT_EQ(back.facts.has_time, s.facts.has_time);
  EXPECT_EQ(back.facts.trace_duration_s, s.facts.trace_duration_s);
  EXPECT_EQ(back.step_count, s.step_count);
  ASSERT_EQ(back.steps.size(), s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_EQ(back.steps[i].number, s.steps[i].number);
    EXPECT_EQ(back.steps[i].complete, s.steps[i].complete);
    EXPECT_EQ(back.steps[i].duration_ms, s.steps[i].duration_ms);
    EXPECT_EQ(back.steps[i].absolute_peak, s.steps[i].absolute_peak);
    EXPECT_EQ(back.steps[i].peak_delta, s.steps[i].peak_delta);
  }
  expect_usage_equal(back.live_at_peak, s.live_at_peak);
  EXPECT_EQ(back.live_at_peak_sources, s.live_at_peak_sources);
  EXPECT_EQ(back.live_at_peak_bytes, s.live_at_peak_bytes);
  expect_usage_equal(back.live_at_peak_by_category, s.live_at_peak_by_category);
  ASSERT_EQ(back.throughput.size(), 1u);
  EXPECT_EQ(back.throughput[0].source, s.throughput[0].source);
  EXPECT_EQ(back.throughput[0].bytes, s.throughput[0].bytes);
  EXPECT_EQ(back.throughput[0].count, s.throughput[0].count);
  EXPECT_EQ(back.throughput_sources, s.throughput_sources);
  ASSERT_EQ(back.ooms.size(), 2u);
  EXPECT_EQ(back.ooms[0].event, 99u);
  EXPECT_EQ(back.ooms[0].requested, s.ooms[0].requested);
  EXPECT_EQ(back.ooms[0].device_free, s.ooms[0].device_free);
  EXPECT_EQ(back.ooms[0].time_s, s.ooms[0].time_s);
  EXPECT_FALSE(back.ooms[1].device_free.has_value());
  EXPECT_FALSE(back.ooms[1].time_s.has_value());
  EXPECT_EQ(back.oom_count, 2u);
  // And writing what was read gives the same document: a fixed point.
  EXPECT_EQ(written(back), written(s));
}

TEST(SummaryJson, AnEmptyRunRoundTripsToo) {
  RunSummary empty;
  empty.path = "empty.pickle";
  empty.compression = "none";
  const RunSummary back = read_summary_json(written(empty), "e.json");
  EXPECT_FALSE(back.rank.has_value());
  EXPECT_FALSE(back.facts.peak_event.has_value());
  EXPECT_TRUE(back.allocator_settings.is_null());
  EXPECT_TRUE(back.steps.empty());
  EXPECT_EQ(written(back), written(empty));
}

TEST(SummaryJson, TheDocumentSaysWhatItIs) {
  const ordered_json doc = render_summary_json(full_summary());
  EXPECT_EQ(doc["kind"], "memsnap-summary");
  EXPECT_EQ(doc["version"], 1);
  EXPECT_TRUE(looks_like_json(" \n{\"kind\""));
  EXPECT_FALSE(looks_like_json("\x80\x04\x95"));
  EXPECT_FALSE(looks_like_json("   "));
}

// Each refusal is bad_summary, and names the file and the key at fault (the
// words are the point).
class SummaryRefusal : public ::testing::Test {
 protected:
  void expect_refused(const std::function<void(ordered_json&)>& edit, const std::string& says) {
    ordered_json doc = render_summary_json(full_summary());
    edit(doc);
    testing::expect_error_code_saying([&] { read_summary_json(doc.dump(), "r.json"); },
                                      ErrorCode::kBadSummary,
                                      "r.json: not a memsnap summary: " + says);
  }
};

TEST_F(SummaryRefusal, NotJsonOrNotASummary) {
  testing::expect_error_code([] { read_summary_json("{\"kind\": ", "r.json"); },
                             ErrorCode::kBadSummary);
  testing::expect_error_code([] { read_summary_json("[1, 2]", "r.json"); }, ErrorCode::kBadSummary);
  expect_refused([](ordered_json& d) { d["kind"] = "memsnap-budget"; },
                 "kind is not \"memsnap-summary\" (write one with memsnap summarize)");
  expect_refused([](ordered_json& d) { d.erase("kind"); }, "kind is not \"memsnap-summary\"");
  expect_refused([](ordered_json& d) { d["version"] = 2; },
                 "version is not 1 (this memsnap reads version 1)");
}

TEST_F(SummaryRefusal, KeysOfTheWrongTypeOrRange) {
  expect_refused([](ordered_json& d) { d["file"].erase("path"); }, "file.path is missing");
  expect_refused([](ordered_json& d) { d["file"]["size_bytes"] = -1; },
                 "file.size_bytes is negative");
  expect_refused([](ordered_json& d) { d["absolute_peak"] = "12GiB"; },
                 "absolute_peak is not a whole number");
  expect_refused([](ordered_json& d) { d["absolute_peak"] = 1.5; },
                 "absolute_peak is not a whole number");
  expect_refused([](ordered_json& d) { d["event_count"] = uint64_t{1} << 63; },
                 "event_count is out of range");
  expect_refused([](ordered_json& d) { d["absolute_peak"] = int64_t{1} << 62; },
                 "absolute_peak is out of range");
  expect_refused([](ordered_json& d) { d["absolute_peak"] = -(int64_t{1} << 61); },
                 "absolute_peak is out of range");
  expect_refused([](ordered_json& d) { d["device"] = -1; }, "device is out of range");
  expect_refused(
      [](ordered_json& d) {
        d["devices"] = {0, "1"};
      },
      "devices[1] is not a device ordinal");
  expect_refused([](ordered_json& d) { d["group"] = "color"; },
                 "group names no grouping ('color')");
  expect_refused([](ordered_json& d) { d["has_time"] = 1; }, "has_time is not true or false");
  expect_refused([](ordered_json& d) { d["segments"] = ordered_json::array(); },
                 "segments is not an object");
  expect_refused([](ordered_json& d) { d["steps"] = ordered_json::object(); },
                 "steps is not a list");
  expect_refused([](ordered_json& d) { d["steps"][1]["complete"] = "yes"; },
                 "steps[1].complete is not true or false");
  expect_refused([](ordered_json& d) { d["live_at_peak"]["by_source"][0]["bytes"] = -5; },
                 "live_at_peak.by_source[0].bytes is negative");
  expect_refused([](ordered_json& d) { d["ooms"][0]["device_free"] = -1; },
                 "ooms[0].device_free is negative");
  expect_refused([](ordered_json& d) { d["peak_event"] = -3; }, "peak_event is negative");
  expect_refused([](ordered_json& d) { d["oom_count"] = 1; },
                 "oom_count is less than the oom entries listed");
}

// Issue 56, finding 8: a summary lists its first oom entries and counts them
// all; one written before the count (every entry listed) counts its list.
TEST(SummaryJson, OomEntriesAreCountedBeyondTheFirstFew) {
  RunSummary s = full_summary();
  s.oom_count = 10000;
  EXPECT_EQ(read_summary_json(written(s), "s.json").oom_count, 10000u);
  ordered_json older = render_summary_json(full_summary());
  older.erase("oom_count");
  EXPECT_EQ(read_summary_json(older.dump(), "old.json").oom_count, 2u);
}

TEST_F(SummaryRefusal, ALargeFileIsNoSummary) {
  const std::string huge(kMaxSummaryBytes + 1, ' ');
  testing::expect_error_code([&] { read_summary_json(huge, "big.json"); },
                             ErrorCode::kLimitExceeded);
}

// Nesting is counted before anything recursive touches the document: a
// summary whose allocator_settings nest 300,000 levels, or a budget with a
// 50,000-part dotted key, overflowed the stack (in a JSON copy, in toml++).
TEST(FileNesting, CountsBracketsAndKeyPartsOutsideStrings) {
  EXPECT_EQ(text_nesting(R"({"a": [1, {"b": "[[[{{{"}]})", false), 3);
  EXPECT_EQ(text_nesting("max_peak = \"1.5GiB\"\nmax_fragmentation = 0.3\n", true), 0);
  EXPECT_EQ(text_nesting("[category]\nactivation = \"1GiB\" # a.b.c.d\n", true), 1);
  EXPECT_EQ(text_nesting("a.b.c = 1\n", true), 3);
  EXPECT_EQ(text_nesting("x = {a.b = 1, c.d.e = [1.5, 2.5]}\n", true), 4);
  EXPECT_EQ(text_nesting("s = 'a.b.c.d.e'\n", true), 0);
}

TEST(FileNesting, DeepSummariesAndBudgetsAreRefused) {
  const std::string deep_json = R"({"kind": "memsnap-summary", "allocator_settings": )" +
                                std::string(300000, '[') + std::string(300000, ']') + "}";
  testing::expect_error_code([&] { read_summary_json(deep_json, "deep.json"); },
                             ErrorCode::kLimitExceeded);
  // A budget is the user's own file: too deep is bad_config_file (exit 2).
  std::string dotted = "a";
  for (int i = 0; i < 50000; ++i) dotted += ".a";
  testing::expect_error_code([&] { read_budget(dotted + " = 1\n", "b.toml"); },
                             ErrorCode::kBadConfigFile);
  testing::expect_error_code([&] { read_budget("x = " + std::string(100000, '{'), "b.toml"); },
                             ErrorCode::kBadConfigFile);
  testing::expect_error_code(
      [&] { read_budget("{\"category\": " + std::string(100000, '['), "b.json"); },
      ErrorCode::kBadConfigFile);
  // A budget of the usual shape still reads.
  EXPECT_EQ(
      read_budget("max_peak = \"12GiB\"\n[category]\nactivation = \"4GiB\"\n", "ok.toml").size(),
      2U);
}

}  // namespace
}  // namespace memsnap
