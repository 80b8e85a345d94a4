// The report table (service/): parameters read and checked once for every
// front end, the entries' invariants, and the streams report it added.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/stream_report.h"
#include "expect_error.h"
#include "memsnap/error.h"
#include "model_builder.h"
#include "service/parameters.h"
#include "service/report_table.h"

namespace memsnap {
namespace {

using service::Parameter;
using service::ParameterKind;
using service::Spelling;
using service::Value;
using testing::expect_error_code;
using testing::expect_error_code_saying;

const Parameter kSeconds{.id = "time",
                         .kind = ParameterKind::kSeconds,
                         .limit_reason = "seconds from the start of the trace"};
const Parameter kWindow{.id = "window", .kind = ParameterKind::kSeconds, .above_minimum = true};
const Parameter kAt{.id = "at", .kind = ParameterKind::kWholeOrWord, .minimum = 1, .word = "peak"};
const Parameter kSize{.id = "max_input", .kind = ParameterKind::kSize};
const Parameter kSwitch{.id = "all_steps", .kind = ParameterKind::kSwitch};

TEST(Parameters, SpelledPerFrontEnd) {
  EXPECT_EQ(service::spelled(kSwitch, Spelling::kFlag), "--all-steps");
  EXPECT_EQ(service::spelled(kSwitch, Spelling::kKeyword), "all_steps");
}

TEST(Parameters, TextIsCheckedForItsKind) {
  EXPECT_EQ(service::syntax_problem(kSeconds, "1.5"), "");
  EXPECT_EQ(service::syntax_problem(kSeconds, "nan"), "expects a finite number, not 'nan'");
  EXPECT_EQ(service::syntax_problem(kSeconds, "inf"), "expects a finite number, not 'inf'");
  EXPECT_EQ(service::syntax_problem(kSeconds, ""), "expects a finite number, not ''");
  EXPECT_EQ(service::syntax_problem(kAt, "peak"), "");
  EXPECT_EQ(service::syntax_problem(kAt, "0"), "expects a whole number >= 1 or 'peak', not '0'");
  EXPECT_EQ(service::syntax_problem(kAt, "2x"), "expects a whole number >= 1 or 'peak', not '2x'");
  EXPECT_EQ(service::syntax_problem(kSwitch, "maybe"), "expects true or false, not 'maybe'");
  // Long and hostile text is cut and made printable.
  const std::string long_text(100, '9');
  EXPECT_EQ(service::syntax_problem(kAt, long_text + "x"),
            "expects a whole number >= 1 or 'peak', not '999999999999999999999999...'");
  EXPECT_NE(service::syntax_problem(kSeconds, "\x1b[2J").find("\\x1b"), std::string::npos);
}

TEST(Parameters, SizesReadAsTheCommandLineReadsThem) {
  EXPECT_EQ(service::size_of_text("1048576"), uint64_t{1048576});
  EXPECT_EQ(service::size_of_text("80GiB"), uint64_t{80} << 30);
  EXPECT_EQ(service::size_of_text("80 gb"), uint64_t{80} << 30);
  EXPECT_EQ(service::size_of_text("512M"), uint64_t{512} << 20);
  EXPECT_EQ(service::size_of_text("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(service::size_of_text("2kib"), uint64_t{2048});
  EXPECT_EQ(service::size_of_text("7b"), uint64_t{7});
  for (const char* bad : {"", "GiB", "1.5.5G", "1.", "-1", "80GiBs", "80XB", "1e3", "99999P"}) {
    EXPECT_FALSE(service::size_of_text(bad)) << bad;
  }
}

// The words are the point: each names the parameter as its front end spells it.
TEST(Parameters, RangeMessagesNameTheParameterAsTheFrontEndSpellsIt) {
  expect_error_code_saying(
      [] {
        service::checked({kSeconds}, {{"time", -1.0}}, Spelling::kFlag);
      },
      ErrorCode::kBadParameter, "--time must be >= 0 (seconds from the start of the trace)");
  expect_error_code_saying(
      [] {
        service::checked({kSeconds}, {{"time", int64_t{-3}}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "time must be >= 0 (seconds from the start of the trace)");
  expect_error_code_saying(
      [] {
        service::checked({kWindow}, {{"window", 0.0}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "window must be > 0");
  expect_error_code_saying(
      [] {
        service::checked({kAt}, {{"at", int64_t{0}}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "at must be >= 1 or 'peak'");
  expect_error_code_saying(
      [] {
        service::checked({kAt}, {{"at", std::string("top")}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "at: expects a whole number >= 1 or 'peak', not 'top'");
  expect_error_code_saying(
      [] {
        service::checked({kSize}, {{"max_input", int64_t{0}}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "max_input must be at least 1 byte, not 0");
  expect_error_code_saying(
      [] {
        service::checked({kSwitch}, {{"all_steps", int64_t{1}}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "all_steps must be True or False");
  expect_error_code_saying(
      [] {
        service::checked({kSeconds}, {{"tme", 1.0}}, Spelling::kKeyword);
      },
      ErrorCode::kBadParameter, "'tme' is not a parameter of this report");
}

TEST(Parameters, ValuesAreConvertedToTheirKind) {
  const service::Arguments arguments = service::checked({kSeconds, kAt, kSize, kSwitch},
                                                        {{"time", int64_t{2}},
                                                         {"at", std::string("peak")},
                                                         {"max_input", std::string("1KiB")},
                                                         {"all_steps", true}},
                                                        Spelling::kKeyword);
  EXPECT_EQ(arguments.seconds("time"), 2.0);
  EXPECT_EQ(arguments.word("at"), "peak");
  EXPECT_EQ(arguments.bytes("max_input"), 1024u);
  EXPECT_TRUE(arguments.on("all_steps"));
  // None (monostate) is "not given".
  const service::Arguments none =
      service::checked({kSeconds}, {{"time", Value{}}}, Spelling::kKeyword);
  EXPECT_FALSE(none.has("time"));
  const Parameter required{.id = "time", .required = true};
  expect_error_code_saying([&] { service::checked({required}, {}, Spelling::kFlag); },
                           ErrorCode::kBadParameter, "--time");
}

TEST(ReportTable, EntriesAreCompleteAndDistinct) {
  std::set<std::string_view> names;
  for (const service::ReportEntry& entry : service::report_table()) {
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    EXPECT_FALSE(entry.description.empty()) << entry.name;
    EXPECT_TRUE(entry.example.starts_with("memsnap " + std::string(entry.name) + " "))
        << entry.name << ": " << entry.example;
    EXPECT_FALSE(entry.schema.empty()) << entry.name;
    EXPECT_NE(entry.answer, nullptr) << entry.name;
    EXPECT_GE(entry.default_top, 0) << entry.name;
    std::set<std::string_view> ids{"top"};
    for (const Parameter& parameter : entry.parameters) {
      EXPECT_TRUE(ids.insert(parameter.id).second) << entry.name << ": " << parameter.id;
      EXPECT_FALSE(parameter.help.empty()) << entry.name << ": " << parameter.id;
    }
    EXPECT_EQ(service::find_report(entry.name), &entry);
  }
  EXPECT_EQ(service::find_report("replay_to_time"), service::find_report("replay-to-time"));
  EXPECT_EQ(service::find_report("nope"), nullptr);
}

TEST(ReportTable, RequestsTakeTheEntrysDefaultsAndRules) {
  const service::ReportEntry& steps = *service::find_report("replay-step");
  const service::ReportRequest request =
      service::request_for(steps, {{"all_steps", true}}, {}, Spelling::kFlag);
  EXPECT_EQ(request.top, steps.default_top);
  expect_error_code([&] { service::request_for(steps, {}, {}, Spelling::kFlag); },
                    ErrorCode::kBadParameter);
  expect_error_code(
      [&] {
        service::request_for(steps, {{"step", int64_t{1}}, {"all_steps", true}}, {},
                             Spelling::kKeyword);
      },
      ErrorCode::kBadParameter);
  expect_error_code(
      [&] {
        service::request_for(steps, {{"top", int64_t{-1}}, {"all_steps", true}}, {},
                             Spelling::kKeyword);
      },
      ErrorCode::kBadParameter);
  const service::ReportEntry& oom = *service::find_report("oom");
  const OomOptions options = service::oom_options(
      service::request_for(oom, {{"at", std::string("peak")}, {"capacity", std::string("80GiB")}},
                           {}, Spelling::kKeyword));
  EXPECT_TRUE(options.at_peak);
  EXPECT_EQ(options.capacity, uint64_t{80} << 30);
  EXPECT_EQ(options.window_s, 1.0);
}

// --top is cut where the rows are shown, never in the analysis: the report
// holds every source, and what it says about them (explain's "memory from
// before the trace under its own source") does not depend on how many rows
// are shown.
TEST(ReportTable, TopCutsOnlyTheRowsShown) {
  testing::ModelBuilder b;
  b.alloc(0x1000, 300, 1'000'000, b.stack({{"load", "data.py", 3}}));
  b.alloc(0x2000, 200, 2'000'000, b.stack({{"forward", "model.py", 7}}));
  b.alloc(0x3000, 100, 3'000'000, b.stack({{"step", "train.py", 9}}));
  b.free(0x9000, 4096, 3'500'000, b.stack({{"old", "setup.py", 1}}));  // allocated before
  b.segment(0, 1 << 20, 600 + 4096);
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  const service::ReportEntry& parse = *service::find_report("parse");
  const service::ReportEntry& explain = *service::find_report("explain");
  const auto json = [&](const service::ReportEntry& entry, int64_t top) {
    return entry
        .answer(file, service::request_for(entry, {{"top", top}}, {}, Spelling::kKeyword),
                service::Format::kJson)
        .json;
  };
  EXPECT_EQ(json(parse, 1)["top_sources"].size(), 1u);
  EXPECT_EQ(json(parse, 1)["top_sources"][0]["throughput_bytes"], 300);
  EXPECT_EQ(json(parse, 10)["top_sources"].size(), 3u);
  const auto one = json(explain, 1)["peak"];
  const auto none = json(explain, 0)["peak"];
  EXPECT_EQ(one["by_source"]["rows"].size(), 1u);
  EXPECT_EQ(none["by_source"]["rows"].size(), 0u);
  EXPECT_EQ(one["by_source"]["rest"]["sources"],
            json(explain, 10)["peak"]["by_source"]["rows"].size() - 1);
  EXPECT_EQ(none["by_source"]["rest"]["bytes"], 600 + 4096);
  EXPECT_TRUE(none["includes_baseline"]);
  EXPECT_EQ(one["includes_baseline"], none["includes_baseline"]);
}

// Two streams: a free counts against the stream its allocation was made on;
// a stream with segments and no trace entries has its row.
TEST(StreamReport, PeaksPerStreamFromTheOneReplay) {
  testing::ModelBuilder b;
  b.alloc(0x1000, 100, 1'000'000);
  b.alloc(0x2000, 200, 2'000'000);
  b.event(Action::kSegmentAlloc, 0x9000, 1 << 20, 2'500'000);
  b.free(0x2000, 200, 3'000'000);
  b.alloc(0x3000, 50, 4'000'000);
  std::vector<uint64_t>& stream = b.model.events.stream;
  stream[1] = stream[2] = stream[3] = stream[4] = stream[5] = 7;  // the second alloc onwards
  b.segment(0, 2 << 20, 100);
  b.segment(0, 4 << 20, 0);
  b.model.segments.back().stream = 9;
  const FileAnalysis file = analyze_file("test", b.model, std::nullopt);
  const StreamReport report = stream_report(file);
  ASSERT_EQ(report.rows.size(), 3u);
  EXPECT_EQ(report.rows[0].stream, 9u);  // the most reserved first
  EXPECT_EQ(report.rows[0].dump.reserved, uint64_t{4} << 20);
  EXPECT_EQ(report.rows[0].alloc_count, 0u);
  const StreamRow& side = report.rows[1];
  EXPECT_EQ(side.stream, 0u);
  EXPECT_EQ(side.peak_live, 100);
  EXPECT_EQ(side.end_live, 100);
  const StreamRow& seven = report.rows[2];
  EXPECT_EQ(seven.stream, 7u);
  EXPECT_EQ(seven.alloc_count, 2u);
  EXPECT_EQ(seven.alloc_bytes, 250u);
  EXPECT_EQ(seven.free_count, 1u);
  EXPECT_EQ(seven.segment_allocs, 1u);
  EXPECT_EQ(seven.peak_live, 200);
  EXPECT_EQ(seven.end_live, 50);
  ASSERT_TRUE(seven.peak_time_s);
  EXPECT_DOUBLE_EQ(*seven.peak_time_s, 1.0);
}

}  // namespace
}  // namespace memsnap
