#include "analysis/reports/check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "analysis/core/categories.h"
#include "analysis/reports/run_compare.h"
#include "memsnap/error.h"

namespace memsnap {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const SourceUsage* find_row(const std::vector<SourceUsage>& rows, std::string_view name) {
  for (const SourceUsage& row : rows) {
    if (row.source == name) return &row;
  }
  return nullptr;
}

double round_up_mib(double bytes) {
  return std::ceil(bytes / kMiB) * kMiB;
}

}  // namespace

const std::vector<LimitInfo>& all_limit_infos() {
  static const std::vector<LimitInfo> infos = {
      {LimitKind::kMaxPeak, "max_peak", "absolute peak", false, false},
      {LimitKind::kMaxPeakDelta, "max_peak_delta", "peak delta", false, false},
      {LimitKind::kMaxReserved, "max_reserved", "reserved peak", false, false},
      {LimitKind::kMaxFragmentation, "max_fragmentation", "fragmentation at the dump", true, false},
      {LimitKind::kMaxGrowth, "max_growth", "growth of the absolute peak", true, true},
      {LimitKind::kMaxSourceGrowth, "max_source_growth", "growth of one source at the peak", true,
       true},
      {LimitKind::kMaxUnmatchedFrees, "max_unmatched_frees", "unmatched frees", false, false},
      {LimitKind::kNoOom, "no_oom", "oom entries", false, false},
      {LimitKind::kStepMaxPeak, "step_max_peak", "highest step's absolute peak", false, false},
      {LimitKind::kCategory, "category", "live at the peak", false, false},
  };
  return infos;
}

const LimitInfo& limit_info(LimitKind kind) {
  return all_limit_infos()[static_cast<size_t>(kind)];
}

std::string Limit::name() const {
  if (kind == LimitKind::kCategory) return "category." + category;
  return std::string(limit_info(kind).name);
}

Amount parse_amount(std::string_view text, std::string_view what, bool percent_allowed) {
  auto bad = [&](std::string_view why) {
    return Error(ErrorCode::kBadParameter,
                 fmt::format("{}: '{}' {} (sizes like 12GiB, 512MiB, 1.5GB, 1000{})", what,
                             text.substr(0, 40), why, percent_allowed ? ", or 5%" : ""));
  };
  std::string_view rest = text;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  double value = 0;
  auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (error != std::errc() || !std::isfinite(value) || value < 0) {
    throw bad("is not a non-negative number with a unit");
  }
  std::string unit(end, rest.data() + rest.size());
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  if (unit == "%") {
    if (!percent_allowed) throw bad("is a percent, and this limit takes a size");
    return Amount{value, true};
  }
  struct Scale {
    const char* suffix;
    double factor;
  };
  static constexpr Scale kScales[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kb", 1024.0},
      {"kib", 1024.0},
      {"m", kMiB},
      {"mb", kMiB},
      {"mib", kMiB},
      {"g", kMiB * 1024},
      {"gb", kMiB * 1024},
      {"gib", kMiB * 1024},
      {"t", kMiB * kMiB},
      {"tb", kMiB * kMiB},
      {"tib", kMiB * kMiB},
  };
  for (const Scale& scale : kScales) {
    if (unit == scale.suffix) {
      const double bytes = value * scale.factor;
      if (bytes > 0x1p62) throw bad("is more than 4 EiB, the most a limit takes");
      return Amount{bytes, false};
    }
  }
  throw bad("has an unknown unit");
}

void require_category(const std::string& name, std::string_view where) {
  if (parse_category(name)) return;
  std::vector<std::string_view> known;
  for (size_t i = 0; i < kCategoryCount; ++i)
    known.push_back(category_name(static_cast<Category>(i)));
  throw Error(ErrorCode::kBadParameter,
              fmt::format("{}: '{}' is not a category ({})", where, name, fmt::join(known, ", ")));
}

namespace {

// Why the run (or, for a growth limit, its baseline) cannot give this limit's
// value; std::monostate when it can.
std::pair<Doubt, LimitNote> doubt_of(LimitKind kind, const RunSummary& current,
                                     const RunSummary* baseline) {
  const SummaryDoubts& doubts = current.doubts;
  const auto mine = [](const Doubt& doubt) { return std::pair{doubt, LimitNote::kUnmeasurable}; };
  const auto either = [&](Doubt SummaryDoubts::*measure) {
    if (!holds(doubts.*measure)) return mine(doubts.*measure);
    if (baseline != nullptr && !holds(baseline->doubts.*measure)) {
      return std::pair{baseline->doubts.*measure, LimitNote::kBaselineUnmeasurable};
    }
    return mine(Doubt{});
  };
  switch (kind) {
    case LimitKind::kMaxPeak:
    case LimitKind::kStepMaxPeak: return mine(doubts.absolute);
    case LimitKind::kMaxGrowth: return either(&SummaryDoubts::absolute);
    case LimitKind::kMaxSourceGrowth: return either(&SummaryDoubts::trace);
    case LimitKind::kMaxReserved: return mine(doubts.reserved);
    case LimitKind::kMaxFragmentation: return mine(doubts.fragmentation);
    case LimitKind::kMaxPeakDelta:
    case LimitKind::kMaxUnmatchedFrees:
    case LimitKind::kNoOom:
    case LimitKind::kCategory: return mine(doubts.trace);
  }
  return mine(Doubt{});
}

}  // namespace

namespace {

// The highest step's absolute peak, which step, and where the run's steps
// came from.
void measure_step_peak(const RunSummary& current, LimitResult& r) {
  if (current.steps.empty()) {
    r.status = LimitStatus::kNotApplicable;
    r.note = LimitNote::kNoSteps;
    r.step_source = current.step_source;
    r.step_marks = current.step_marks;
    return;
  }
  for (const SummaryStep& step : current.steps) {
    if (!r.step || static_cast<double>(step.absolute_peak) > r.measured) {
      r.measured = static_cast<double>(step.absolute_peak);
      r.step = step.number;
    }
  }
  r.steps_origin = current.steps_origin;
}

// What the limit measures on the run (and its allowance where it depends on
// the baseline); a limit the run gives nothing to measure is not applicable.
void measure(const Limit& limit, const RunSummary& current, const RunSummary* baseline,
             const CheckReport& report, LimitResult& r) {
  switch (limit.kind) {
    case LimitKind::kMaxPeak: r.measured = static_cast<double>(current.facts.absolute_peak); break;
    case LimitKind::kMaxPeakDelta:
      r.measured = static_cast<double>(current.facts.peak_delta);
      break;
    case LimitKind::kMaxReserved:
      r.measured = static_cast<double>(current.facts.reserved_peak);
      break;
    case LimitKind::kMaxFragmentation:
      r.measured = current.segments.fragmentation;
      r.allowed = limit.amount.percent ? limit.amount.value / 100 : limit.amount.value;
      break;
    case LimitKind::kMaxGrowth:
      r.measured = static_cast<double>(current.facts.absolute_peak - baseline->facts.absolute_peak);
      if (limit.amount.percent) {
        r.allowed = limit.amount.value / 100 * static_cast<double>(baseline->facts.absolute_peak);
      }
      break;
    case LimitKind::kMaxSourceGrowth: {
      if (limit.amount.percent) {
        r.allowed = limit.amount.value / 100 * static_cast<double>(baseline->facts.absolute_peak);
      }
      // The source that grew most (rows are by |B - A|: the first that grew).
      for (const SourceDiff& row : report.sources.rows) {
        if (row.delta() > 0 && static_cast<double>(row.delta()) > r.measured) {
          r.measured = static_cast<double>(row.delta());
          r.subject = row.source;
        }
      }
      break;
    }
    case LimitKind::kMaxUnmatchedFrees:
      r.measured = static_cast<double>(current.facts.unmatched_free_count);
      break;
    case LimitKind::kNoOom:
      r.measured = static_cast<double>(current.oom_count);
      r.allowed = 0;
      break;
    case LimitKind::kStepMaxPeak: measure_step_peak(current, r); break;
    case LimitKind::kCategory: {
      if (current.live_at_peak_by_category.empty()) {
        r.status = LimitStatus::kNotApplicable;
        r.note = LimitNote::kNothingLive;
        break;
      }
      const SourceUsage* row = find_row(current.live_at_peak_by_category, limit.category);
      r.measured = row != nullptr ? static_cast<double>(row->bytes) : 0.0;
      r.subject = limit.category;
      break;
    }
  }
}

}  // namespace

CheckReport run_check(const RunSummary& current, const RunSummary* baseline,
                      const std::vector<Limit>& limits, const CheckOptions& options) {
  CheckReport report;
  report.findings = current.findings;
  report.warnings = current.warnings;
  report.current_file = current.path;
  report.rank = current.rank;
  report.peak = current.facts.absolute_peak;
  if (baseline != nullptr) {
    report.baseline_file = baseline->path;
    report.baseline_is_summary = options.baseline_is_summary;
    report.baseline_peak = baseline->facts.absolute_peak;
    report.sources = compare_sources(baseline->live_at_peak, current.live_at_peak);
    report.categories =
        compare_sources(baseline->live_at_peak_by_category, current.live_at_peak_by_category);
  }
  for (const Limit& limit : limits) {
    const LimitInfo& info = limit_info(limit.kind);
    LimitResult r;
    r.limit = limit;
    r.allowed = limit.amount.value;
    if (info.needs_baseline && baseline == nullptr) {
      if (!limit.from_budget && !options.no_baseline_rank) {
        // The front ends refuse it first, naming their parameters (runs/run_check).
        throw Error(ErrorCode::kBadParameter,
                    fmt::format("{}: needs a baseline to grow from", info.name));
      }
      // No baseline at all (a budget's growth limit, no --baseline): not
      // applicable. A baseline folder without this rank: the limit was asked
      // of this rank and cannot be measured, so it fails as any unmeasured
      // limit does (else a folder whose ranks match none passes unchecked).
      r.measurable = !options.no_baseline_rank;
      r.status = options.no_baseline_rank && !options.allow_unmeasured
                     ? LimitStatus::kFail
                     : LimitStatus::kNotApplicable;
      r.note = options.no_baseline_rank ? LimitNote::kNoBaselineRank : LimitNote::kNeedsBaseline;
      report.results.push_back(std::move(r));
      continue;
    }
    if (auto [doubt, note] = doubt_of(limit.kind, current, baseline); !holds(doubt)) {
      r.measurable = false;
      r.doubt = std::move(doubt);
      r.note = note;
      r.status = options.allow_unmeasured ? LimitStatus::kNotApplicable : LimitStatus::kFail;
      report.results.push_back(std::move(r));
      continue;
    }
    measure(limit, current, baseline, report, r);
    if (r.status != LimitStatus::kNotApplicable) {
      r.status = r.measured <= r.allowed ? LimitStatus::kPass : LimitStatus::kFail;
    }
    report.results.push_back(std::move(r));
  }
  for (const LimitResult& result : report.results) {
    if (result.status == LimitStatus::kFail) ++report.failed;
    if (result.status == LimitStatus::kNotApplicable) ++report.not_checked;
  }
  return report;
}

RankedCheck check_ranked(const std::vector<RunSummary>& current,
                         const std::vector<RunSummary>* baseline, const std::vector<Limit>& limits,
                         const CheckOptions& options) {
  RankedCheck out;
  if (baseline == nullptr) {
    for (const RunSummary& run : current) {
      out.ranks.push_back(
          run_check(run, nullptr, limits, {.allow_unmeasured = options.allow_unmeasured}));
    }
  } else {
    const RunComparison matched = compare_runs(*baseline, current);
    // By rank: matched ranks against their baseline rank; a current rank
    // without one is still held to every absolute limit (it must not slip
    // past --max-peak because its baseline is missing).
    std::vector<std::pair<int64_t, CheckReport>> by_rank;
    for (const RankPair& pair : matched.pairs) {
      by_rank.emplace_back(pair.rank,
                           run_check(current[pair.b], &(*baseline)[pair.a], limits, options));
    }
    for (size_t i : matched.only_b) {
      by_rank.emplace_back(
          current[i].rank.value_or(std::numeric_limits<int64_t>::max()),
          run_check(current[i], nullptr, limits,
                    {.allow_unmeasured = options.allow_unmeasured, .no_baseline_rank = true}));
      out.only_current.push_back(current[i].path);
    }
    std::stable_sort(by_rank.begin(), by_rank.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [rank, report] : by_rank) out.ranks.push_back(std::move(report));
    for (size_t i : matched.only_a) out.only_baseline.push_back((*baseline)[i].path);
  }
  for (const CheckReport& report : out.ranks) {
    if (report.failed > 0) ++out.failed_ranks;
    out.failed_limits += report.failed;
  }
  return out;
}

std::vector<Limit> budget_from_run(const RunSummary& run, double headroom) {
  const double scale = 1 + headroom;
  auto size = [&](LimitKind kind, double bytes) {
    return Limit{kind, Amount{round_up_mib(std::max(bytes, 0.0) * scale), false}, {}};
  };
  std::vector<Limit> limits;
  limits.push_back(size(LimitKind::kMaxPeak, static_cast<double>(run.facts.absolute_peak)));
  limits.push_back(size(LimitKind::kMaxPeakDelta, static_cast<double>(run.facts.peak_delta)));
  limits.push_back(size(LimitKind::kMaxReserved, static_cast<double>(run.facts.reserved_peak)));
  limits.push_back(
      Limit{LimitKind::kMaxFragmentation,
            Amount{std::min(1.0, std::ceil(run.segments.fragmentation * scale * 100) / 100), false},
            {}});
  limits.push_back(Limit{LimitKind::kMaxGrowth, Amount{headroom * 100, true}, {}});
  limits.push_back(
      Limit{LimitKind::kMaxUnmatchedFrees,
            Amount{std::ceil(static_cast<double>(run.facts.unmatched_free_count) * scale), false},
            {}});
  if (run.oom_count == 0) limits.push_back(Limit{LimitKind::kNoOom, Amount{0, false}, {}});
  if (!run.steps.empty()) {
    int64_t highest = run.steps.front().absolute_peak;
    for (const SummaryStep& step : run.steps) highest = std::max(highest, step.absolute_peak);
    limits.push_back(size(LimitKind::kStepMaxPeak, static_cast<double>(highest)));
  }
  for (const SourceUsage& row : run.live_at_peak_by_category) {
    if (row.bytes < (uint64_t{1} << 20)) continue;  // a budget for what matters
    // Memory no block names (<before the trace: no block matches>) is in
    // the live set, yet no category: no limit can name it.
    if (!parse_category(row.source)) continue;
    Limit limit = size(LimitKind::kCategory, static_cast<double>(row.bytes));
    limit.category = row.source;
    limits.push_back(limit);
  }
  // A measure the run cannot give is no starting point: left out, so that
  // the budget holds only what was measured (parse says why).
  std::erase_if(limits, [&run](const Limit& limit) {
    return !holds(doubt_of(limit.kind, run, nullptr).first);
  });
  return limits;
}

}  // namespace memsnap
