#include "analysis/reports/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>
#include <set>

#include "memsnap/error.h"
#include "snapshot/allocator_settings.h"
#include "util/pattern.h"

namespace memsnap {
namespace {

constexpr double kCudaGraphAllocRatio = 10.0;
constexpr int kTopShareSources = 5;
constexpr double kUnmatchedShare = 0.05;
constexpr uint64_t kUnmatchedCount = 10;
constexpr uint64_t kBaselineGapBytes = uint64_t{64} << 20;
constexpr double kBaselineGapShare = 0.10;

std::vector<int64_t> complete_steps(const FileAnalysis& file) {
  std::vector<int64_t> out;
  for (const StepStats& s : file.trace_analysis().steps) {
    if (s.step.complete) out.push_back(s.step.number);
  }
  return out;
}

bool looks_truncated(const ReplayTotals& t) {
  return t.unmatched_free_count >= kUnmatchedCount &&
         static_cast<double>(t.unmatched_free_count) >=
             kUnmatchedShare * static_cast<double>(std::max<uint64_t>(t.free_count, 1));
}

std::optional<std::string> rank_of(const std::string& path) {
  // "snapshot_3.pickle", "rank3.pickle", "mem_rank_12.pkl.gz"; not dates or
  // run ids ("run_20240101"): a rank has at most 6 digits.
  static const Pattern kRank(R"((?:rank|_)(\d{1,6})(\.[A-Za-z0-9]+)*$)", "rank pattern",
                             /*ignore_case=*/true);
  const std::string_view name = std::string_view(path).substr(path.find_last_of('/') + 1);
  if (std::optional<std::string_view> rank = kRank.first_group(name)) return std::string(*rank);
  return std::nullopt;
}

// Seconds from the trace start of the last event applied after `position`
// events (the peak's own event), when the trace has time_us.
std::optional<double> time_of_position(const FileAnalysis& file, uint64_t position) {
  if (position > 0) return file.seconds_at(file.trace().begin + position - 1);
  return file.time().timed() ? std::optional(0.0) : std::nullopt;
}

struct DrillMoment {
  uint64_t position_a = 0, position_b = 0;  // trace entries applied at each side's peak
  uint64_t alloc_a = 0, alloc_b = 0;        // allocations in the drill-down's scope
};

// Settings: compared as values, key order ignored (nested dicts included).
void compare_settings(const FileAnalysis& a, const FileAnalysis& b, CompareResult& r) {
  const nlohmann::ordered_json settings_a =
      allocator_settings_json(a.snapshot().allocator_settings);
  const nlohmann::ordered_json settings_b =
      allocator_settings_json(b.snapshot().allocator_settings);
  r.settings_a = settings_a.is_object();
  r.settings_b = settings_b.is_object();
  std::set<std::string> keys;
  if (r.settings_a)
    for (const auto& [key, value] : settings_a.items()) keys.insert(key);
  if (r.settings_b)
    for (const auto& [key, value] : settings_b.items()) keys.insert(key);
  for (const std::string& key : keys) {
    nlohmann::json va = r.settings_a && settings_a.contains(key) ? nlohmann::json(settings_a[key])
                                                                 : nlohmann::json();
    nlohmann::json vb = r.settings_b && settings_b.contains(key) ? nlohmann::json(settings_b[key])
                                                                 : nlohmann::json();
    if (va != vb) {
      r.config_diffs.push_back(SettingDiff{
          key,
          r.settings_a && settings_a.contains(key) ? settings_a[key] : nlohmann::ordered_json(),
          r.settings_b && settings_b.contains(key) ? settings_b[key] : nlohmann::ordered_json()});
    }
  }
}

// The steps complete in both, in one only, incomplete; the matching ones side by side.
void compare_steps(const FileAnalysis& a, const FileAnalysis& b, CompareResult& r) {
  std::vector<int64_t> complete_a = complete_steps(a);
  std::vector<int64_t> complete_b = complete_steps(b);
  std::set_intersection(complete_a.begin(), complete_a.end(), complete_b.begin(), complete_b.end(),
                        std::back_inserter(r.matching_steps));
  std::set_difference(complete_a.begin(), complete_a.end(), complete_b.begin(), complete_b.end(),
                      std::back_inserter(r.steps_only_a));
  std::set_difference(complete_b.begin(), complete_b.end(), complete_a.begin(), complete_a.end(),
                      std::back_inserter(r.steps_only_b));
  for (const StepStats& s : a.trace_analysis().steps)
    if (!s.step.complete) r.incomplete_a.push_back(s.step.number);
  for (const StepStats& s : b.trace_analysis().steps)
    if (!s.step.complete) r.incomplete_b.push_back(s.step.number);

  for (int64_t number : r.matching_steps) {
    const StepStats& sa = *a.step(number);
    const StepStats& sb = *b.step(number);
    r.step_results.push_back(StepComparison{
        number, sa.peak_delta, sb.peak_delta, a.step_absolute_peak(sa), b.step_absolute_peak(sb),
        sa.alloc_count, sb.alloc_count, sa.alloc_bytes, sb.alloc_bytes});
  }
}

// Drill-down scope: the step asked for, else the matching step whose
// absolute peaks differ most, else the full trace.
void choose_drill_step(std::optional<int64_t> step, CompareResult& r) {
  if (step) {
    if (std::find(r.matching_steps.begin(), r.matching_steps.end(), *step) ==
        r.matching_steps.end()) {
      throw Error(
          ErrorCode::kStepNotFound,
          fmt::format("step {} is not complete in both files; steps complete in both: {}", *step,
                      r.matching_steps.empty() ? "none" : step_ranges(r.matching_steps)));
    }
    r.drill_step = *step;
  } else if (!r.step_results.empty()) {
    const StepComparison* widest = &r.step_results.front();
    for (const StepComparison& row : r.step_results) {
      if (magnitude(row.absolute_peak_b - row.absolute_peak_a) >
          magnitude(widest->absolute_peak_b - widest->absolute_peak_a)) {
        widest = &row;
      }
    }
    r.drill_step = widest->step;
  }
}

// Where each side's drill-down looks: the full trace's peak, or the drill
// step's; sets the peaks it reports.
DrillMoment drill_moment(const FileAnalysis& a, const FileAnalysis& b, CompareResult& r) {
  const ReplayTotals& ta = a.trace_analysis().totals;
  const ReplayTotals& tb = b.trace_analysis().totals;
  DrillMoment m{a.full_peak_position(), b.full_peak_position(), ta.alloc_count, tb.alloc_count};
  r.drill_peak_a = a.absolute_peak();
  r.drill_peak_b = b.absolute_peak();
  r.drill_peak_delta_a = ta.peak_delta;
  r.drill_peak_delta_b = tb.peak_delta;
  if (r.drill_step) {
    const StepStats& sa = *a.step(*r.drill_step);
    const StepStats& sb = *b.step(*r.drill_step);
    m = {sa.peak_position(a.trace()), sb.peak_position(b.trace()), sa.alloc_count, sb.alloc_count};
    r.drill_peak_a = a.step_absolute_peak(sa);
    r.drill_peak_b = b.step_absolute_peak(sb);
    r.drill_peak_delta_a = sa.peak_delta;
    r.drill_peak_delta_b = sb.peak_delta;
  }
  r.drill_peak_time_a = time_of_position(a, m.position_a);
  r.drill_peak_time_b = time_of_position(b, m.position_b);
  return m;
}

// The two live sets at the drill-down moments, by source and by category,
// and the phase each side peaked in.
void compare_live_sets(const FileAnalysis& a, const FileAnalysis& b,
                       const SourceKeyOptions& key_options, const DrillMoment& m,
                       CompareResult& r) {
  SourceIndex sources_a(a.snapshot(), key_options);
  SourceIndex sources_b(b.snapshot(), key_options);
  const std::vector<uint64_t> pa{m.position_a};
  const std::vector<uint64_t> pb{m.position_b};
  // Where neither trace says anything of its peak (no trace, or a PyTorch
  // 2.0 dump's single entry: its allocations reach under a tenth of the absolute
  // peak), the only live sets worth comparing are the dumps': the segments'
  // blocks, by their own frames, frameless ones by size class.
  // A trace whose peak stands above everything the dump holds shows that
  // peak however small its own share of it (a ring buffer that wrapped keeps
  // only the last entries, yet the peak lies among them): only the trace
  // can say what was live then.
  const auto trace_says_little = [](const FileAnalysis& file) {
    if (file.trace().count() == 0) return true;
    const int64_t peak = file.absolute_peak();
    if (peak > 0 && static_cast<uint64_t>(peak) > file.segments().active_size) return false;
    // In doubles: deltas reach 2^60, and ten times that is no int64.
    return static_cast<double>(file.trace_analysis().totals.peak_delta) * 10.0 <
           static_cast<double>(peak);
  };
  r.drill_from_blocks = trace_says_little(a) && trace_says_little(b);
  const auto from_blocks = [](const FileAnalysis& file, SourceIndex& sources) {
    return live_at_dump_by_source(file.snapshot(), file.device(), sources,
                                  FramelessBlocks::kBySizeClass);
  };
  // One side's live set at its drill-down moment, grouped by `sources`.
  const auto live_set = [&](const FileAnalysis& file, SourceIndex& sources,
                            const std::vector<uint64_t>& position) {
    return r.drill_from_blocks
               ? from_blocks(file, sources)
               : live_by_source(file.snapshot(), file.trace(), sources, position)[0];
  };
  r.drill = compare_sources(live_set(a, sources_a, pa), live_set(b, sources_b, pb));
  // The same live sets by category, and what each side was doing at its peak.
  SourceKeyOptions by_category = key_options;
  by_category.group = GroupBy::kCategory;
  SourceIndex categories_a(a.snapshot(), by_category);
  SourceIndex categories_b(b.snapshot(), by_category);
  // By category every byte live then counts, memory from before the trace
  // included (explain's, oom's and check's category tables count the same).
  const auto live_categories = [&](const FileAnalysis& file, SourceIndex& categories,
                                   const std::vector<uint64_t>& position) {
    if (r.drill_from_blocks) return from_blocks(file, categories);
    const BaselineSources before_trace =
        baseline_sources(file.snapshot(), file.baseline_pieces(), categories);
    return live_by_source(file.snapshot(), file.trace(), categories, position, &before_trace)[0];
  };
  r.drill_by_category =
      compare_sources(live_categories(a, categories_a, pa), live_categories(b, categories_b, pb));
  if (key_options.group == GroupBy::kCategory) r.drill = r.drill_by_category;
  const auto phase_at = [&](const FileAnalysis& file,
                            uint64_t position) -> std::optional<PeakPhase> {
    if (r.drill_from_blocks || position == 0) return std::nullopt;
    const uint64_t event = file.trace().begin + position - 1;
    if (file.snapshot().events.action[event] != Action::kAlloc) return std::nullopt;
    Categorizer categorizer(file.snapshot(), key_options.category_rules);
    const Categorized reached = categorizer.classify(event, file.snapshot().events.stack[event]);
    return made_in_optimizer_step(reached) ? PeakPhase::kOptimizerStep : phase_of(reached.category);
  };
  r.peak_phase_a = phase_at(a, m.position_a);
  r.peak_phase_b = phase_at(b, m.position_b);
}

// What the comparison found, in the order a reader needs it.
void add_findings(const FileAnalysis& a, const FileAnalysis& b, const DrillMoment& m,
                  CompareResult& r) {
  const uint64_t alloc_a = m.alloc_a;
  const uint64_t alloc_b = m.alloc_b;
  auto& found = r.findings;
  bool no_trace_a = a.trace().count() == 0;
  bool no_trace_b = b.trace().count() == 0;
  if (no_trace_a || no_trace_b) found.emplace_back(finding::NoTrace{no_trace_a, no_trace_b});
  for (const auto& [side, file] : {std::pair{Side::kA, &a}, std::pair{Side::kB, &b}}) {
    const DeviceChoice& choice = file->device_choice();
    if (!file->device_requested() && choice.others()) {
      std::vector<int> oom_devices = choice.oom_devices;
      std::erase(oom_devices, file->device());
      found.emplace_back(
          finding::OtherDevices{side, file->device(), choice.reason, choice.devices, oom_devices});
    }
  }
  if (alloc_a > 0 && alloc_b > 0) {
    double ratio = static_cast<double>(std::max(alloc_a, alloc_b)) /
                   static_cast<double>(std::min(alloc_a, alloc_b));
    if (ratio > kCudaGraphAllocRatio) {
      found.emplace_back(finding::CudaGraphsLikely{alloc_a > alloc_b ? Side::kA : Side::kB, ratio,
                                                   r.drill_step, std::max(alloc_a, alloc_b),
                                                   std::min(alloc_a, alloc_b)});
    }
  }
  const std::vector<SourceDiff>& rows = r.drill.rows;
  uint64_t total_diff = 0;
  for (const SourceDiff& row : rows) total_diff += magnitude(row.delta());
  if (total_diff > 0 && rows.size() > static_cast<size_t>(kTopShareSources)) {
    uint64_t top = 0;
    for (int i = 0; i < kTopShareSources; ++i)
      top += magnitude(rows[static_cast<size_t>(i)].delta());
    found.emplace_back(finding::TopSourcesShare{
        kTopShareSources, static_cast<double>(top) / static_cast<double>(total_diff),
        r.drill_from_blocks});
  }
  for (const auto& [side, file] : {std::pair{Side::kA, &a}, std::pair{Side::kB, &b}}) {
    const ReplayTotals& totals = file->trace_analysis().totals;
    if (looks_truncated(totals)) {
      found.emplace_back(finding::SideTruncated{
          side, totals.unmatched_free_count, totals.free_count, trace_cut(file->trace().count())});
    }
  }
  int64_t base_a = r.baseline_a.baseline_at_start;
  int64_t base_b = r.baseline_b.baseline_at_start;
  uint64_t gap = magnitude(base_b - base_a);
  // Advice about peak deltas is only worth giving where the traces have peaks.
  if (!r.drill_from_blocks && !no_trace_a && !no_trace_b && gap >= kBaselineGapBytes &&
      static_cast<double>(gap) >=
          kBaselineGapShare * static_cast<double>(std::max(magnitude(base_a), magnitude(base_b)))) {
    found.emplace_back(finding::BaselinesDiffer{base_a, base_b});
  }
  if (a.device() != b.device())
    found.emplace_back(finding::DifferentDevices{a.device(), b.device()});
  if ((a.segments().private_pool_count > 0) != (b.segments().private_pool_count > 0)) {
    const bool in_a = a.segments().private_pool_count > 0;
    const SegmentTotals& with = in_a ? a.segments() : b.segments();
    found.emplace_back(finding::PrivatePoolsOneSide{
        in_a ? Side::kA : Side::kB, with.private_pool_count, with.private_pool_size});
  }
  std::optional<std::string> rank_a = rank_of(a.path());
  std::optional<std::string> rank_b = rank_of(b.path());
  if (rank_a && rank_b && *rank_a != *rank_b) {
    found.emplace_back(finding::DifferentRanks{*rank_a, *rank_b});
  }
}

}  // namespace

PeakPhase phase_of(Category category) {
  switch (category) {
    case Category::kActivation: return PeakPhase::kForward;
    case Category::kGradient:
    case Category::kAutogradDetail: return PeakPhase::kBackward;
    case Category::kOptimizerState: return PeakPhase::kOptimizerStep;
    case Category::kInput: return PeakPhase::kDataLoading;
    case Category::kParameter:
    case Category::kTemporary:
    case Category::kCommunication:
    case Category::kWorkspace: return PeakPhase::kOther;
    case Category::kPersistent:
    case Category::kUnknown: break;
  }
  return PeakPhase::kUnknown;
}

CompareResult compare_files(const FileAnalysis& a, const FileAnalysis& b,
                            std::optional<int64_t> step, const SourceKeyOptions& key_options) {
  // The allocator replays (for fragmentation, read last) run beside the rest.
  a.start_allocator_history();
  b.start_allocator_history();
  CompareResult r;
  r.group = key_options.group;
  r.file_a = a.path();
  r.file_b = b.path();
  r.device_a = a.device();
  r.device_b = b.device();
  r.device_requested = a.device_requested() || b.device_requested();
  r.steps_origin_a = a.step_windows().inference();
  r.steps_origin_b = b.step_windows().inference();

  compare_settings(a, b, r);
  r.segments_a = a.segments();
  r.reserved_a = a.reserved();
  r.reserved_b = b.reserved();
  r.segments_b = b.segments();
  r.baseline_a = a.baseline();
  r.baseline_b = b.baseline();
  compare_steps(a, b, r);
  const ReplayTotals& ta = a.trace_analysis().totals;
  const ReplayTotals& tb = b.trace_analysis().totals;
  r.full_trace = FullTraceComparison{
      ta.peak_delta,           tb.peak_delta,           a.absolute_peak(),
      b.absolute_peak(),       ta.alloc_bytes,          tb.alloc_bytes,
      ta.alloc_count,          tb.alloc_count,          ta.unmatched_free_count,
      tb.unmatched_free_count, ta.unmatched_free_bytes, tb.unmatched_free_bytes};

  choose_drill_step(step, r);
  const DrillMoment moment = drill_moment(a, b, r);
  compare_live_sets(a, b, key_options, moment, r);
  add_findings(a, b, moment, r);
  r.fragmentation_a = a.fragmentation();
  r.fragmentation_b = b.fragmentation();
  return r;
}

}  // namespace memsnap
