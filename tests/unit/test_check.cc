// Unit tests of `memsnap check`'s analysis (analysis/check): amounts as the
// user writes them, each limit at its threshold, growth against a baseline,
// limits that cannot apply, and the budget written from a run, which that run
// passes and a grown one fails.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "analysis/reports/check.h"
#include "expect_error.h"
#include "memsnap/error.h"
#include "report/check_render.h"
#include "report/findings.h"

namespace memsnap {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

RunSummary run(int64_t peak, const std::string& path = "run.pickle") {
  RunSummary s;
  s.path = path;
  s.facts.absolute_peak = peak;
  s.facts.peak_delta = peak / 2;
  s.facts.reserved_peak = static_cast<uint64_t>(peak) + (64 << 20);
  s.segments.fragmentation = 0.125;
  s.facts.unmatched_free_count = 3;
  s.steps = {{1, true, 10.0, peak - (8 << 20), 1 << 20}, {2, true, 11.0, peak, 2 << 20}};
  s.live_at_peak = {{"forward@model.py:10", static_cast<uint64_t>(peak / 2), 4},
                    {"load@data.py:3", static_cast<uint64_t>(peak / 4), 1}};
  s.live_at_peak_by_category = {{"activation", static_cast<uint64_t>(peak / 2), 4},
                                {"parameter", static_cast<uint64_t>(peak / 4), 1}};
  return s;
}

Limit limit(LimitKind kind, double value, bool percent = false, bool from_budget = false) {
  Limit l;
  l.kind = kind;
  l.amount = Amount{value, percent};
  l.from_budget = from_budget;
  return l;
}

const LimitResult& only(const CheckReport& report) {
  EXPECT_EQ(report.results.size(), 1u);
  return report.results.front();
}

TEST(CheckAmount, SizesAreBinaryWhateverTheSpelling) {
  EXPECT_EQ(parse_amount("12GiB", "--max-peak", false).value, 12 * kGiB);
  EXPECT_EQ(parse_amount("512 MiB", "--max-peak", false).value, 512 * kMiB);
  EXPECT_EQ(parse_amount("1.5GB", "--max-peak", false).value, 1.5 * kGiB);
  EXPECT_EQ(parse_amount("2k", "--max-peak", false).value, 2048.0);
  EXPECT_EQ(parse_amount(" 1000 ", "--max-peak", false).value, 1000.0);
  EXPECT_EQ(parse_amount("3 tib", "--max-peak", false).value, 3 * kGiB * 1024);
  const Amount percent = parse_amount("5%", "--max-growth", true);
  EXPECT_TRUE(percent.percent);
  EXPECT_EQ(percent.value, 5.0);
  EXPECT_FALSE(parse_amount("5", "--max-growth", true).percent);
}

TEST(CheckAmount, RefusalsNameTheFlagAndWhatIsWrong) {
  auto usage_error = [](std::string_view text, bool percent_allowed, std::string_view says) {
    try {
      parse_amount(text, "--max-peak", percent_allowed);
      ADD_FAILURE() << text << ": no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kBadParameter) << text;
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
    }
  };
  usage_error("5%", false, "--max-peak: '5%' is a percent, and this limit takes a size");
  usage_error("lots", false, "--max-peak: 'lots' is not a non-negative number with a unit");
  usage_error("-1GiB", false, "is not a non-negative number with a unit");
  usage_error("3 parsecs", false, "'3 parsecs' has an unknown unit");
  usage_error("1e30GiB", false, "is more than 4 EiB, the most a limit takes");
  // The hint lists percents only where they are allowed.
  usage_error("x", true, "1000, or 5%)");
}

TEST(Check, ASizeLimitPassesAtItsThresholdAndFailsAByteAbove) {
  const RunSummary current = run(int64_t{8} << 30);
  const CheckReport at = run_check(current, nullptr, {limit(LimitKind::kMaxPeak, 8 * kGiB)});
  EXPECT_EQ(only(at).status, LimitStatus::kPass);
  EXPECT_EQ(only(at).measured, 8 * kGiB);
  EXPECT_EQ(at.failed, 0u);
  const CheckReport below = run_check(current, nullptr, {limit(LimitKind::kMaxPeak, 8 * kGiB - 1)});
  EXPECT_EQ(only(below).status, LimitStatus::kFail);
  EXPECT_EQ(only(below).allowed, 8 * kGiB - 1);
  EXPECT_EQ(below.failed, 1u);
  EXPECT_EQ(below.peak, current.facts.absolute_peak);
}

TEST(Check, EachMeasureComesFromItsField) {
  const RunSummary current = run(int64_t{1} << 30);
  const std::vector<Limit> limits = {
      limit(LimitKind::kMaxPeakDelta, 0), limit(LimitKind::kMaxReserved, 0),
      limit(LimitKind::kMaxFragmentation, 25, true), limit(LimitKind::kMaxUnmatchedFrees, 3),
      limit(LimitKind::kStepMaxPeak, 0)};
  const CheckReport report = run_check(current, nullptr, limits);
  ASSERT_EQ(report.results.size(), limits.size());
  EXPECT_EQ(report.results[0].measured, static_cast<double>(current.facts.peak_delta));
  EXPECT_EQ(report.results[1].measured, static_cast<double>(current.facts.reserved_peak));
  // A percent of fragmentation is a fraction.
  EXPECT_EQ(report.results[2].allowed, 0.25);
  EXPECT_EQ(report.results[2].measured, 0.125);
  EXPECT_EQ(report.results[2].status, LimitStatus::kPass);
  EXPECT_EQ(report.results[3].status, LimitStatus::kPass);  // 3 <= 3
  // The highest step, named.
  EXPECT_EQ(report.results[4].measured, static_cast<double>(current.facts.absolute_peak));
  EXPECT_EQ(report.results[4].step, 2);
  EXPECT_EQ(report.failed, 3u);  // peak delta, reserved, step peak against 0
}

TEST(Check, GrowthIsAgainstTheBaselineAndAPercentIsOfItsPeak) {
  const RunSummary baseline = run(int64_t{1000} << 20, "a.pickle");
  const RunSummary current = run(int64_t{1100} << 20, "b.pickle");
  const CheckReport ten = run_check(current, &baseline, {limit(LimitKind::kMaxGrowth, 10, true)},
                                    {.baseline_is_summary = true});
  EXPECT_EQ(only(ten).measured, 100 * kMiB);
  EXPECT_DOUBLE_EQ(only(ten).allowed, 100 * kMiB);
  EXPECT_EQ(only(ten).status, LimitStatus::kPass);
  EXPECT_EQ(ten.baseline_file, "a.pickle");
  EXPECT_TRUE(ten.baseline_is_summary);
  EXPECT_EQ(ten.baseline_peak, baseline.facts.absolute_peak);
  const CheckReport nine = run_check(current, &baseline, {limit(LimitKind::kMaxGrowth, 9, true)});
  EXPECT_EQ(only(nine).status, LimitStatus::kFail);
  const CheckReport bytes =
      run_check(current, &baseline, {limit(LimitKind::kMaxGrowth, 100 * kMiB - 1)});
  EXPECT_EQ(only(bytes).status, LimitStatus::kFail);
  // Shrinking is no growth.
  const CheckReport shrunk = run_check(baseline, &current, {limit(LimitKind::kMaxGrowth, 0)});
  EXPECT_EQ(only(shrunk).status, LimitStatus::kPass);
  EXPECT_LT(only(shrunk).measured, 0);
}

TEST(Check, SourceGrowthNamesTheSourceThatGrewMost) {
  RunSummary baseline = run(int64_t{1} << 30);
  RunSummary current = baseline;
  current.live_at_peak = {{"forward@model.py:10", baseline.live_at_peak[0].bytes, 4},
                          {"load@data.py:3", baseline.live_at_peak[1].bytes + (300 << 20), 2},
                          {"new@x.py:1", 10 << 20, 1}};
  const CheckReport report =
      run_check(current, &baseline, {limit(LimitKind::kMaxSourceGrowth, 256 * kMiB)});
  EXPECT_EQ(only(report).subject, "load@data.py:3");
  EXPECT_EQ(only(report).measured, 300 * kMiB);
  EXPECT_EQ(only(report).status, LimitStatus::kFail);
  // The comparison at the peaks is B - A by source.
  ASSERT_FALSE(report.sources.rows.empty());
  EXPECT_EQ(report.sources.rows.front().source, "load@data.py:3");
  EXPECT_EQ(report.sources.rows.front().delta(), 300 << 20);
}

TEST(Check, AGrowthFlagWithoutABaselineIsAUsageError) {
  testing::expect_error_code(
      [] { run_check(run(1 << 30), nullptr, {limit(LimitKind::kMaxGrowth, 5, true)}); },
      ErrorCode::kBadParameter);
  testing::expect_error_code(
      [] { run_check(run(1 << 30), nullptr, {limit(LimitKind::kMaxSourceGrowth, 1)}); },
      ErrorCode::kBadParameter);
  // From a budget file, the same limit is reported as not checked, and fails nothing.
  const CheckReport report =
      run_check(run(1 << 30), nullptr, {limit(LimitKind::kMaxGrowth, 5, true, true)});
  EXPECT_EQ(only(report).status, LimitStatus::kNotApplicable);
  EXPECT_EQ(only(report).note, LimitNote::kNeedsBaseline);
  EXPECT_EQ(report.failed, 0u);
}

TEST(Check, LimitsOnWhatARunLacksDoNotApply) {
  RunSummary bare = run(1 << 30);
  bare.steps.clear();
  bare.live_at_peak_by_category.clear();
  Limit category = limit(LimitKind::kCategory, 0);
  category.category = "activation";
  const CheckReport report =
      run_check(bare, nullptr, {limit(LimitKind::kStepMaxPeak, 0), category});
  ASSERT_EQ(report.results.size(), 2u);
  EXPECT_EQ(report.results[0].status, LimitStatus::kNotApplicable);
  EXPECT_EQ(report.results[0].note, LimitNote::kNoSteps);
  EXPECT_EQ(report.results[1].status, LimitStatus::kNotApplicable);
  EXPECT_EQ(report.results[1].note, LimitNote::kNothingLive);
  EXPECT_EQ(report.failed, 0u);
}

// A measure the file cannot give fails its limit (not checked with
// allow_unmeasured), typed with why; only the renderer says it in words, and
// a growth limit names the baseline when it is the baseline that doubts.
TEST(Check, AnUnmeasurableLimitCarriesItsDoubtTyped) {
  RunSummary current = run(1 << 30);
  current.doubts.absolute = doubt::DumpBelowTrace{4096};
  const CheckReport failed = run_check(current, nullptr, {limit(LimitKind::kMaxPeak, 8 * kGiB)});
  EXPECT_FALSE(only(failed).measurable);
  EXPECT_EQ(only(failed).status, LimitStatus::kFail);
  EXPECT_EQ(only(failed).note, LimitNote::kUnmeasurable);
  ASSERT_TRUE(std::holds_alternative<doubt::DumpBelowTrace>(only(failed).doubt));
  EXPECT_EQ(std::get<doubt::DumpBelowTrace>(only(failed).doubt).bytes, 4096);
  EXPECT_EQ(limit_sentence(only(failed)),
            "max_peak: not measurable on this file: the dump's segments hold 4096 bytes less than "
            "the trace leaves live (the dump does not match the trace) (--allow-unmeasured skips "
            "it)");
  const CheckReport skipped = run_check(current, nullptr, {limit(LimitKind::kMaxPeak, 8 * kGiB)},
                                        {.allow_unmeasured = true});
  EXPECT_EQ(only(skipped).status, LimitStatus::kNotApplicable);

  RunSummary baseline = run(1 << 30, "baseline.pickle");
  baseline.doubts.absolute = doubt::SkippedDump{2, 3};
  const CheckReport growth =
      run_check(run(1 << 30), &baseline, {limit(LimitKind::kMaxGrowth, 5, true)});
  EXPECT_EQ(only(growth).note, LimitNote::kBaselineUnmeasurable);
  EXPECT_EQ(limit_sentence(only(growth)),
            "max_growth: not measurable on this file: the baseline: 2 malformed segments and 3 "
            "malformed blocks were skipped (--allow-unmeasured skips it)");
  // A doubt read back from a summary file keeps its words.
  baseline.doubts.absolute = doubt::InWords{"written by an older memsnap"};
  EXPECT_EQ(phrase(run_check(run(1 << 30), &baseline, {limit(LimitKind::kMaxGrowth, 5, true)})
                       .results[0]
                       .doubt),
            "written by an older memsnap");
}

// The one count: every renderer and the exit message read the report's
// counts through check_verdict, limits not checked left out of "of N".
TEST(Check, OneCountForTheReportAndTheExitMessage) {
  RunSummary current = run(1 << 30);
  current.steps.clear();
  const CheckReport report =
      run_check(current, nullptr,
                {limit(LimitKind::kMaxPeak, 512 * kMiB), limit(LimitKind::kMaxReserved, 8 * kGiB),
                 limit(LimitKind::kMaxUnmatchedFrees, 0), limit(LimitKind::kStepMaxPeak, 0),
                 limit(LimitKind::kMaxGrowth, 5, true, true)});
  size_t failed = 0;
  size_t not_checked = 0;
  for (const LimitResult& result : report.results) {
    failed += result.status == LimitStatus::kFail ? 1 : 0;
    not_checked += result.status == LimitStatus::kNotApplicable ? 1 : 0;
  }
  EXPECT_EQ(report.failed, failed);
  EXPECT_EQ(report.not_checked, not_checked);
  EXPECT_EQ(report.checked() + report.not_checked, report.results.size());
  EXPECT_EQ(check_verdict(report), "2 of 3 limits violated (2 not checked)");
  const std::string text = render_check_text(report, 10);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "memsnap check: FAIL, 2 of 3 limits violated (2 not checked) by run.pickle");
  const auto json = render_check_json(report, 10);
  EXPECT_EQ(json["failed"], 2);
  EXPECT_EQ(json["checked"], 3);
  EXPECT_EQ(json["not_checked"], 2);

  const CheckReport passing = run_check(
      current, nullptr, {limit(LimitKind::kMaxPeak, 2 * kGiB), limit(LimitKind::kStepMaxPeak, 0)});
  EXPECT_EQ(check_verdict(passing), "1 limit holds (1 not checked)");

  RunSummary small = run(256 << 20, "rank_1.pickle");
  small.facts.unmatched_free_count = 0;
  const RankedCheck ranked = check_ranked(
      {run(1 << 30, "rank_0.pickle"), small, run(1 << 30, "rank_2.pickle")}, nullptr,
      {limit(LimitKind::kMaxPeak, 512 * kMiB), limit(LimitKind::kMaxUnmatchedFrees, 0)});
  EXPECT_EQ(ranked.failed_ranks, 2u);
  EXPECT_EQ(ranked.failed_limits, 4u);
  EXPECT_EQ(check_verdict(ranked), "2 of 3 ranks violate 4 limits");
  const std::string ranked_text = render_check_text(ranked, 10);
  EXPECT_EQ(ranked_text.rfind("memsnap check: FAIL, 2 of 3 ranks violate 4 limits: ", 0), 0u)
      << ranked_text;
}

TEST(Check, CategoryAndOomLimits) {
  RunSummary current = run(1 << 30);
  Limit activation = limit(LimitKind::kCategory, 512 * kMiB);
  activation.category = "activation";
  Limit gradient = limit(LimitKind::kCategory, 0);
  gradient.category = "gradient";  // nothing of it live: 0 bytes
  EXPECT_EQ(activation.name(), "category.activation");
  const CheckReport clean =
      run_check(current, nullptr, {activation, gradient, limit(LimitKind::kNoOom, 0)});
  EXPECT_EQ(clean.results[0].status, LimitStatus::kPass);  // exactly 512 MiB
  EXPECT_EQ(clean.results[0].subject, "activation");
  EXPECT_EQ(clean.results[1].measured, 0.0);
  EXPECT_EQ(clean.results[1].status, LimitStatus::kPass);
  EXPECT_EQ(clean.results[2].status, LimitStatus::kPass);
  current.ooms.push_back(SummaryOom{7, 1 << 30, std::nullopt, std::nullopt});
  current.oom_count = 1;
  const CheckReport oom = run_check(current, nullptr, {limit(LimitKind::kNoOom, 0)});
  EXPECT_EQ(only(oom).status, LimitStatus::kFail);
  EXPECT_EQ(only(oom).measured, 1.0);
  // The count, not the first few the summary lists (issue 56, finding 8).
  current.oom_count = 10000;
  EXPECT_EQ(only(run_check(current, nullptr, {limit(LimitKind::kNoOom, 0)})).measured, 10000.0);
}

TEST(CheckBudget, ARunPassesItsOwnBudgetAndAGrownOneFailsIt) {
  const RunSummary good = run(int64_t{3} << 30);
  std::vector<Limit> budget = budget_from_run(good, 0.1);
  for (Limit& l : budget) l.from_budget = true;  // as read back from the file
  // Sizes are whole MiB and leave the headroom.
  for (const Limit& l : budget) {
    const LimitInfo& info = limit_info(l.kind);
    if (l.kind == LimitKind::kMaxFragmentation || l.kind == LimitKind::kMaxUnmatchedFrees ||
        l.kind == LimitKind::kNoOom || info.needs_baseline) {
      continue;
    }
    EXPECT_EQ(std::fmod(l.amount.value, kMiB), 0.0) << l.name();
  }
  const CheckReport same = run_check(good, nullptr, budget);
  EXPECT_EQ(same.failed, 0u);
  for (const LimitResult& r : same.results) {
    EXPECT_NE(r.status, LimitStatus::kFail) << r.limit.name();
    if (limit_info(r.limit.kind).needs_baseline) {
      EXPECT_EQ(r.status, LimitStatus::kNotApplicable) << r.limit.name();
    } else if (r.limit.kind != LimitKind::kNoOom) {
      // Every measure is within its limit, with room: 10% more fits too.
      EXPECT_LE(r.measured * 1.1, r.allowed + 1) << r.limit.name();
    }
  }
  // The budget holds the categories of 1 MiB or more, by name.
  bool activation = false;
  for (const Limit& l : budget) activation = activation || l.name() == "category.activation";
  EXPECT_TRUE(activation);

  // 20% more peak: max_peak fails, and against the good run, max_growth (10%) too.
  RunSummary grown = run(static_cast<int64_t>(3.6 * kGiB));
  grown.steps = good.steps;
  const CheckReport alone = run_check(grown, nullptr, budget);
  const CheckReport against = run_check(grown, &good, budget);
  auto status_of = [](const CheckReport& report, LimitKind kind) {
    for (const LimitResult& r : report.results) {
      if (r.limit.kind == kind) return r.status;
    }
    return LimitStatus::kNotApplicable;
  };
  EXPECT_EQ(status_of(alone, LimitKind::kMaxPeak), LimitStatus::kFail);
  EXPECT_EQ(status_of(alone, LimitKind::kMaxGrowth), LimitStatus::kNotApplicable);
  EXPECT_EQ(status_of(against, LimitKind::kMaxGrowth), LimitStatus::kFail);
  EXPECT_GT(against.failed, alone.failed);
}

TEST(CheckRanked, RanksArePairedByNumberAndTheRestListed) {
  auto ranked = [](int64_t rank, int64_t peak, const std::string& path) {
    RunSummary s = run(peak, path);
    s.rank = rank;
    return s;
  };
  const std::vector<RunSummary> baseline = {ranked(0, 1 << 30, "a0"), ranked(1, 1 << 30, "a1"),
                                            ranked(3, 1 << 30, "a3")};
  const std::vector<RunSummary> current = {ranked(1, int64_t{2} << 30, "b1"),
                                           ranked(0, 1 << 30, "b0"), ranked(2, 1 << 30, "b2")};
  const RankedCheck checked =
      check_ranked(current, &baseline, {limit(LimitKind::kMaxGrowth, 10, true)});
  // Every current rank, by rank whatever the order of the files; rank 2 has
  // no baseline rank: its growth cannot be measured, a failure.
  ASSERT_EQ(checked.ranks.size(), 3u);
  EXPECT_EQ(checked.ranks[0].rank, 0);
  EXPECT_EQ(checked.ranks[0].baseline_file, "a0");
  EXPECT_EQ(checked.ranks[1].rank, 1);
  EXPECT_EQ(checked.ranks[1].current_file, "b1");
  EXPECT_EQ(checked.ranks[1].failed, 1u);  // rank 1 doubled
  EXPECT_EQ(checked.ranks[2].rank, 2);
  EXPECT_EQ(checked.ranks[2].baseline_file, "");
  EXPECT_EQ(checked.ranks[2].not_checked, 0u);
  EXPECT_EQ(checked.ranks[2].failed, 1u);  // max_growth: no baseline rank
  EXPECT_EQ(checked.failed_ranks, 2u);
  EXPECT_EQ(checked.only_current, std::vector<std::string>{"b2"});
  EXPECT_EQ(checked.only_baseline, std::vector<std::string>{"a3"});
}

// A current rank whose baseline rank is missing may not slip past an
// absolute limit (it passed --max-peak before).
TEST(CheckRanked, ARankWithoutItsBaselineRankIsHeldToAbsoluteLimits) {
  auto ranked = [](int64_t rank, int64_t peak, const std::string& path) {
    RunSummary s = run(peak, path);
    s.rank = rank;
    return s;
  };
  const std::vector<RunSummary> baseline = {ranked(0, 1 << 30, "a0")};
  const std::vector<RunSummary> current = {ranked(0, 1 << 30, "b0"),
                                           ranked(1, int64_t{3} << 30, "b1")};
  const RankedCheck checked = check_ranked(
      current, &baseline,
      {limit(LimitKind::kMaxPeak, 2.0 * (1 << 30)), limit(LimitKind::kMaxGrowth, 10, true)});
  ASSERT_EQ(checked.ranks.size(), 2u);
  EXPECT_EQ(checked.ranks[1].rank, 1);
  // max_peak: 3 GiB > 2 GiB; max_growth: asked of rank 1, not measurable
  // without its baseline rank, so it fails (issue 40, finding 5).
  EXPECT_EQ(checked.ranks[1].failed, 2u);
  EXPECT_EQ(checked.ranks[1].not_checked, 0u);
  EXPECT_EQ(checked.ranks[1].results[1].note, LimitNote::kNoBaselineRank);
  EXPECT_FALSE(checked.ranks[1].results[1].measurable);
  EXPECT_EQ(checked.failed_ranks, 1u);
  // --allow-unmeasured: the growth limit not checked, max_peak still failing.
  const RankedCheck allowed = check_ranked(
      current, &baseline,
      {limit(LimitKind::kMaxPeak, 2.0 * (1 << 30)), limit(LimitKind::kMaxGrowth, 10, true)},
      {.allow_unmeasured = true});
  EXPECT_EQ(allowed.ranks[1].failed, 1u);
  EXPECT_EQ(allowed.ranks[1].not_checked, 1u);
}

// A folder whose ranks match none of the baseline's is not a pass: every
// growth limit is unmeasured.
TEST(CheckRanked, NoRankMatchingTheBaselineFails) {
  RunSummary base = run(1 << 30, "rank_0");
  base.rank = 0;
  RunSummary grown = run(int64_t{6} << 28, "rank_1");  // 1.5 GiB: 50% more
  grown.rank = 1;
  const std::vector<RunSummary> baseline = {base};
  const std::vector<RunSummary> current = {grown};
  const RankedCheck checked =
      check_ranked(current, &baseline, {limit(LimitKind::kMaxGrowth, 1, true)});
  EXPECT_EQ(checked.failed_ranks, 1u);
  EXPECT_EQ(checked.ranks[0].results[0].status, LimitStatus::kFail);
}

}  // namespace
}  // namespace memsnap
