// `memsnap check`: a memory-regression gate. Limits (from flags or a budget
// file) are held against one run's summary and, for the growth limits, a
// baseline's; a failure comes with what grew, by source and by category, from
// the summaries' live sets at each run's peak. Plain data; report/ renders it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/findings.h"
#include "analysis/core/sources.h"
#include "analysis/reports/run_summary.h"

namespace memsnap {

enum class LimitKind : uint8_t {
  kMaxPeak,            // absolute peak <= bytes
  kMaxPeakDelta,       // peak delta (above the trace's start) <= bytes
  kMaxReserved,        // reserved peak <= bytes
  kMaxFragmentation,   // inactive / reserved at the dump <= fraction
  kMaxGrowth,          // absolute peak - the baseline's <= bytes, or % of the baseline's
  kMaxSourceGrowth,    // any one source at the peak - the baseline's <= bytes, or % of its peak
  kMaxUnmatchedFrees,  // frees of allocations the trace never saw <= count
  kNoOom,              // no oom entry
  kStepMaxPeak,        // every profiler step's absolute peak <= bytes
  kCategory,           // one category live at the peak <= bytes
};

// How a limit's numbers read: its unit, and whether it needs a baseline.
struct LimitInfo {
  LimitKind kind;
  std::string_view name;  // the budget file's key and the flag's name less --
  std::string_view what;  // "absolute peak", in sentences
  bool takes_percent;     // "5%" is allowed
  bool needs_baseline;
};
const LimitInfo& limit_info(LimitKind kind);
const std::vector<LimitInfo>& all_limit_infos();

// A limit's threshold: bytes (sizes), a count, a fraction, or a percent.
struct Amount {
  double value = 0;
  bool percent = false;  // value is a percent (5 for "5%")
};

struct Limit {
  LimitKind kind = LimitKind::kMaxPeak;
  Amount amount;
  std::string category;      // kCategory only
  bool from_budget = false;  // read from a budget file (a flag is a usage error without a baseline)
  [[nodiscard]] std::string name() const;  // max_peak, ..., category.activation
};

// "12GiB", "512 MiB", "1.5GB" (GB and GiB both 2^30: sizes are binary
// everywhere in memsnap), "1000" (bytes), "5%"; throws a usage Error naming
// `what` otherwise.
Amount parse_amount(std::string_view text, std::string_view what, bool percent_allowed);

enum class LimitStatus : uint8_t { kPass, kFail, kNotApplicable };

// Why a limit was not checked or could not be measured; report/check_render.h
// puts it in words.
enum class LimitNote : uint8_t {
  kNone,
  kNoSteps,               // the run has no steps (step_max_peak)
  kNothingLive,           // nothing live at the run's peak to categorise
  kNeedsBaseline,         // a budget's growth limit, and no baseline was given
  kNoBaselineRank,        // a rank of a folder whose baseline folder lacks that rank
  kUnmeasurable,          // the run cannot give the value: `doubt` says why
  kBaselineUnmeasurable,  // the baseline cannot give it: `doubt` says why
};

struct LimitResult {
  Limit limit;
  LimitStatus status = LimitStatus::kPass;
  double measured = 0;  // in the limit's unit: bytes, count or fraction
  double allowed = 0;   // the threshold in that unit (a percent resolved against the baseline)
  std::string subject;  // what the value is about: the source that grew, the category
  // step_max_peak: the highest step, and where the run's steps came from (an
  // inferred iteration's number is not the profiler's).
  std::optional<int64_t> step;
  StepsInference steps_origin;
  // kNoSteps on a run read from a snapshot: what --steps asked and the marks
  // there are (RunSummary::step_marks).
  StepSource step_source = StepSource::kAuto;
  std::optional<StepMarks> step_marks;
  LimitNote note = LimitNote::kNone;
  Doubt doubt;  // with kUnmeasurable and kBaselineUnmeasurable
  // False when the file cannot give the value (RunSummary::doubts): a fail
  // unless --allow-unmeasured, then not checked; `measured` means nothing.
  bool measurable = true;
};

struct CheckReport {
  std::string current_file;
  std::optional<int64_t> rank;
  std::string baseline_file;  // empty without a baseline
  bool baseline_is_summary = false;
  int64_t peak = 0;
  std::optional<int64_t> baseline_peak;
  std::vector<LimitResult> results;  // in the order of all_limit_infos, categories last
  // The counts every renderer and the exit message read: `failed` of
  // checked() limits violated, `not_checked` left out (kNotApplicable).
  size_t failed = 0;
  size_t not_checked = 0;
  [[nodiscard]] size_t checked() const { return results.size() - not_checked; }
  // At each run's peak, baseline -> current (B - A), by source and category.
  SourceComparison sources;
  SourceComparison categories;
  // The current run's warnings (parse's), then the baseline's: in every format.
  std::vector<Finding> findings;
  std::vector<std::string> warnings;  // read from summary files, in words
};

struct CheckOptions {
  bool baseline_is_summary = false;
  // A limit the file cannot measure is not checked instead of failed.
  bool allow_unmeasured = false;
  // A rank of a folder without its baseline rank: its growth limits cannot
  // be measured (they fail, or with allow_unmeasured are not checked);
  // absolute ones still hold.
  bool no_baseline_rank = false;
};

// A category limit names one of analysis/core/categories.h's categories; anything
// else would pass at 0 B. Throws a usage Error ("WHERE: 'activaton' is not a
// category (parameter, ...)") otherwise.
void require_category(const std::string& name, std::string_view where);

// Throws a usage Error when a flag's limit needs a baseline and none is
// given; a budget file's such limit is reported as not checked instead, and
// so is every growth limit of a rank without its baseline rank
// (options.no_baseline_rank).
CheckReport run_check(const RunSummary& current, const RunSummary* baseline,
                      const std::vector<Limit>& limits, const CheckOptions& options = {});

// Many ranks: each rank of the current run checked against the same rank of
// the baseline run (or alone without one), by rank number.
struct RankedCheck {
  std::vector<CheckReport> ranks;          // by rank
  std::vector<std::string> only_current;   // files of the current run with no baseline rank
  std::vector<std::string> only_baseline;  // baseline files with no current rank
  size_t failed_ranks = 0;
  size_t failed_limits = 0;  // the ranks' `failed`, summed
};
RankedCheck check_ranked(const std::vector<RunSummary>& current,
                         const std::vector<RunSummary>* baseline, const std::vector<Limit>& limits,
                         const CheckOptions& options = {});

// A starting budget from a good run: each of its measures plus `headroom`
// (a fraction), sizes rounded up to the MiB; max_growth = headroom as a percent.
// Measures the run cannot give (RunSummary::doubts) are left out.
std::vector<Limit> budget_from_run(const RunSummary& run, double headroom);

}  // namespace memsnap
