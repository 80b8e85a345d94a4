#include "analysis/replay_reports.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "io/error.h"
#include "report/format.h"

namespace memsnap {
namespace {

constexpr double kCudaGraphAllocRatio = 10.0;
constexpr int kTopShareSources = 5;
constexpr double kUnmatchedShare = 0.05;
constexpr uint64_t kUnmatchedCount = 10;
constexpr uint64_t kBaselineGapBytes = uint64_t{64} << 20;
constexpr double kBaselineGapShare = 0.10;

// "3-7, 9, 12-14": compact list of step numbers for messages.
std::string step_ranges(const std::vector<int64_t>& numbers) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(numbers[i])
                           : fmt::format("{}-{}", numbers[i], numbers[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<int64_t> complete_steps(const FileAnalysis& file) {
  std::vector<int64_t> out;
  for (const StepStats& s : file.analysis.steps) {
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
  static const std::regex kRank(R"(_(\d+)(\.[A-Za-z0-9]+)*$)");
  std::string name = path.substr(path.find_last_of('/') + 1);
  std::smatch match;
  if (std::regex_search(name, match, kRank)) return match[1].str();
  return std::nullopt;
}

uint64_t magnitude(int64_t value) {
  return value < 0 ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
}

}  // namespace

const StepStats* FileAnalysis::step(int64_t number) const {
  for (const StepStats& s : analysis.steps) {
    if (s.step.number == number) return &s;
  }
  return nullptr;
}

FileAnalysis analyze_file(const std::string& path, const Snapshot& snapshot,
                          std::optional<int> device) {
  FileAnalysis file;
  file.path = path;
  file.snapshot = &snapshot;
  file.device = choose_device(snapshot, device);
  const DeviceTrace* trace = snapshot.trace_of(file.device);
  file.trace = trace != nullptr ? *trace : DeviceTrace{file.device, 0, 0};
  file.segments = segment_totals(snapshot, file.device);
  file.steps = profiler_steps(snapshot, file.device);
  file.analysis = analyze_trace(snapshot, file.trace, file.steps);
  file.baseline = compute_baseline(file.segments, file.analysis.totals);
  return file;
}

ReplayStepResult replay_steps(FileAnalysis& file, std::optional<int64_t> step, int top,
                              int frame_depth) {
  if (file.steps.empty()) {
    throw Error(fmt::format(
        "{} has no ProfilerStep annotations. The file is fine: step boundaries come from the "
        "PyTorch profiler (run the loop under torch.profiler.profile(...) and call prof.step() "
        "each iteration; use_pytorch_profiler=True in the reference scripts). compare, plot and "
        "replay-to-time still work on this file.",
        file.path));
  }
  std::vector<const StepStats*> chosen;
  if (step) {
    const StepStats* stats = file.step(*step);
    if (stats == nullptr) {
      std::vector<int64_t> numbers;
      for (const StepStats& s : file.analysis.steps) numbers.push_back(s.step.number);
      throw Error(fmt::format("step {} is not in {}; available steps: {}", *step, file.path,
                              step_ranges(numbers)));
    }
    chosen.push_back(stats);
  } else {
    for (const StepStats& s : file.analysis.steps) chosen.push_back(&s);
  }
  // One pass for every step's peak: positions ascending.
  std::vector<size_t> order(chosen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return chosen[x]->peak_position(file.trace) < chosen[y]->peak_position(file.trace);
  });
  std::vector<uint64_t> positions;
  positions.reserve(order.size());
  for (size_t i : order) positions.push_back(chosen[i]->peak_position(file.trace));
  SourceIndex sources(*file.snapshot, frame_depth);
  std::vector<std::vector<SourceUsage>> at_peaks =
      live_by_source(*file.snapshot, file.trace, sources, positions);

  ReplayStepResult result;
  result.file = file.path;
  result.device = file.device;
  result.baseline = file.baseline.baseline_at_start;
  result.steps.resize(chosen.size());
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    StepReport& report = result.steps[i];
    report.stats = *chosen[i];
    report.duration_ms = chosen[i]->step.duration_ms();
    report.absolute_peak = file.step_absolute_peak(*chosen[i]);
    report.sources_at_peak = at_peaks[k].size();
    report.top_sources_at_peak = std::move(at_peaks[k]);
    if (top >= 0 && report.top_sources_at_peak.size() > static_cast<size_t>(top)) {
      report.top_sources_at_peak.resize(static_cast<size_t>(top));
    }
    int64_t end_us = chosen[i]->step.complete ? chosen[i]->step.end_us
                                              : trace_end_us(*file.snapshot, file.trace);
    report.annotations =
        annotations_between(*file.snapshot, file.device, chosen[i]->step.start_us, end_us);
  }
  return result;
}

TimeSide replay_to_time(FileAnalysis& file, double seconds, int frame_depth) {
  const Snapshot& snapshot = *file.snapshot;
  TimeSide side;
  side.file = file.path;
  side.device = file.device;
  int64_t start = trace_start_us(snapshot, file.trace);
  if (file.trace.count() > 0 && start == 0) {
    throw Error(
        fmt::format("{}: trace entries carry no time_us (PyTorch before 2.2), so --time "
                    "cannot be used; parse and compare still work",
                    file.path));
  }
  side.trace_duration_s = static_cast<double>(trace_end_us(snapshot, file.trace) - start) / 1e6;
  side.time_s = seconds;
  if (seconds > side.trace_duration_s) {
    side.time_s = side.trace_duration_s;
    side.clamped = true;
  }
  uint64_t position = position_at_time(snapshot, file.trace, side.time_s);
  Replay replay(snapshot);
  replay.apply(file.trace.begin, file.trace.begin + position);
  const ReplayTotals& t = replay.totals();
  side.baseline = file.baseline.baseline_at_start;
  side.delta = t.end_delta;
  side.absolute = add_bytes(side.baseline, static_cast<uint64_t>(side.delta));
  side.alloc_count = t.alloc_count;
  side.free_count = t.free_count;
  side.live_count = t.live_count_at_end;
  side.live_bytes = t.live_bytes_at_end;
  SourceIndex sources(snapshot, frame_depth);
  std::vector<uint64_t> positions{position};
  side.sources = std::move(live_by_source(snapshot, file.trace, sources, positions)[0]);
  return side;
}

std::vector<SourceDiff> diff_sources(const std::vector<SourceUsage>& a,
                                     const std::vector<SourceUsage>& b) {
  std::map<std::string, SourceDiff> joined;
  for (const SourceUsage& row : a) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
    d.bytes_a = row.bytes;
    d.count_a = row.count;
  }
  for (const SourceUsage& row : b) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
    d.bytes_b = row.bytes;
    d.count_b = row.count;
  }
  std::vector<SourceDiff> rows;
  rows.reserve(joined.size());
  for (auto& [name, row] : joined) rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(), [](const SourceDiff& x, const SourceDiff& y) {
    return magnitude(x.delta()) > magnitude(y.delta());
  });
  return rows;
}

namespace {

// Sources live on one side only (the other has no allocation of them), above
// kOnlyOneSideMinBytes.
OnlyOnOneSide only_on_one_side(const std::vector<SourceDiff>& rows, bool side_a) {
  OnlyOnOneSide only;
  for (const SourceDiff& row : rows) {
    uint64_t bytes = side_a ? row.bytes_a : row.bytes_b;
    uint64_t other_count = side_a ? row.count_b : row.count_a;
    if (other_count == 0 && bytes > kOnlyOneSideMinBytes) {
      ++only.sources;
      only.bytes += bytes;
    }
  }
  return only;
}

}  // namespace

OnlyOnOneSide only_in_a(const std::vector<SourceDiff>& rows) {
  return only_on_one_side(rows, true);
}
OnlyOnOneSide only_in_b(const std::vector<SourceDiff>& rows) {
  return only_on_one_side(rows, false);
}

CompareResult compare_files(FileAnalysis& a, FileAnalysis& b, std::optional<int64_t> step,
                            int frame_depth) {
  CompareResult r;
  r.file_a = a.path;
  r.file_b = b.path;
  r.device_a = a.device;
  r.device_b = b.device;

  // Settings: compared as values, key order ignored (nested dicts included).
  const auto& settings_a = a.snapshot->allocator_settings;
  const auto& settings_b = b.snapshot->allocator_settings;
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

  r.segments_a = a.segments;
  r.segments_b = b.segments;
  r.baseline_a = a.baseline;
  r.baseline_b = b.baseline;

  std::vector<int64_t> complete_a = complete_steps(a);
  std::vector<int64_t> complete_b = complete_steps(b);
  std::set_intersection(complete_a.begin(), complete_a.end(), complete_b.begin(), complete_b.end(),
                        std::back_inserter(r.matching_steps));
  std::set_difference(complete_a.begin(), complete_a.end(), complete_b.begin(), complete_b.end(),
                      std::back_inserter(r.steps_only_a));
  std::set_difference(complete_b.begin(), complete_b.end(), complete_a.begin(), complete_a.end(),
                      std::back_inserter(r.steps_only_b));
  for (const StepStats& s : a.analysis.steps)
    if (!s.step.complete) r.incomplete_a.push_back(s.step.number);
  for (const StepStats& s : b.analysis.steps)
    if (!s.step.complete) r.incomplete_b.push_back(s.step.number);

  for (int64_t number : r.matching_steps) {
    const StepStats& sa = *a.step(number);
    const StepStats& sb = *b.step(number);
    r.step_results.push_back(StepComparison{
        number, sa.peak_delta, sb.peak_delta, a.step_absolute_peak(sa), b.step_absolute_peak(sb),
        sa.alloc_count, sb.alloc_count, sa.alloc_bytes, sb.alloc_bytes});
  }

  const ReplayTotals& ta = a.analysis.totals;
  const ReplayTotals& tb = b.analysis.totals;
  r.full_trace = FullTraceComparison{
      ta.peak_delta,           tb.peak_delta,           a.absolute_peak(),
      b.absolute_peak(),       ta.alloc_bytes,          tb.alloc_bytes,
      ta.alloc_count,          tb.alloc_count,          ta.unmatched_free_count,
      tb.unmatched_free_count, ta.unmatched_free_bytes, tb.unmatched_free_bytes};

  // Drill-down scope: --step, else the matching step whose absolute peaks
  // differ most, else the full trace.
  if (step) {
    if (std::find(r.matching_steps.begin(), r.matching_steps.end(), *step) ==
        r.matching_steps.end()) {
      throw Error(fmt::format("step {} is not complete in both files; steps complete in both: {}",
                              *step,
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
  uint64_t position_a = a.full_peak_position();
  uint64_t position_b = b.full_peak_position();
  uint64_t alloc_a = ta.alloc_count;
  uint64_t alloc_b = tb.alloc_count;
  r.drill_peak_a = a.absolute_peak();
  r.drill_peak_b = b.absolute_peak();
  if (r.drill_step) {
    const StepStats& sa = *a.step(*r.drill_step);
    const StepStats& sb = *b.step(*r.drill_step);
    position_a = sa.peak_position(a.trace);
    position_b = sb.peak_position(b.trace);
    alloc_a = sa.alloc_count;
    alloc_b = sb.alloc_count;
    r.drill_peak_a = a.step_absolute_peak(sa);
    r.drill_peak_b = b.step_absolute_peak(sb);
  }
  SourceIndex sources_a(*a.snapshot, frame_depth);
  SourceIndex sources_b(*b.snapshot, frame_depth);
  std::vector<uint64_t> pa{position_a};
  std::vector<uint64_t> pb{position_b};
  auto live_a = live_by_source(*a.snapshot, a.trace, sources_a, pa)[0];
  auto live_b = live_by_source(*b.snapshot, b.trace, sources_b, pb)[0];
  r.drill_sources = diff_sources(live_a, live_b);
  r.drill_only_a = only_in_a(r.drill_sources);
  r.drill_only_b = only_in_b(r.drill_sources);

  // Observations.
  auto& notes = r.observations;
  std::string scope = r.drill_step ? fmt::format("in step {}", *r.drill_step) : "over the trace";
  if (alloc_a > 0 && alloc_b > 0) {
    double ratio = static_cast<double>(std::max(alloc_a, alloc_b)) /
                   static_cast<double>(std::min(alloc_a, alloc_b));
    if (ratio > kCudaGraphAllocRatio) {
      notes.push_back(fmt::format(
          "{} makes {:.1f}x the allocations of {} {} ({} vs {}): CUDA graphs likely (a graph "
          "replay allocates nothing per step; its memory sits in a private pool)",
          alloc_a > alloc_b ? "A" : "B", ratio, alloc_a > alloc_b ? "B" : "A", scope,
          format_count(std::max(alloc_a, alloc_b)), format_count(std::min(alloc_a, alloc_b))));
    }
  }
  uint64_t total_diff = 0;
  for (const SourceDiff& row : r.drill_sources) total_diff += magnitude(row.delta());
  if (total_diff > 0 && r.drill_sources.size() > static_cast<size_t>(kTopShareSources)) {
    uint64_t top = 0;
    for (int i = 0; i < kTopShareSources; ++i)
      top += magnitude(r.drill_sources[static_cast<size_t>(i)].delta());
    notes.push_back(
        fmt::format("the top {} sources account for {} of the per-source difference at the peak",
                    kTopShareSources,
                    format_percent(static_cast<double>(top) / static_cast<double>(total_diff))));
  }
  for (const auto& [label, totals] : {std::pair{"A", &ta}, std::pair{"B", &tb}}) {
    if (looks_truncated(*totals)) {
      notes.push_back(fmt::format(
          "{}: {} of {} frees have no alloc in the trace: truncated by the ring buffer "
          "(max_entries) or recording started mid-run; its peaks cover only the recorded part",
          label, format_count(totals->unmatched_free_count), format_count(totals->free_count)));
    }
  }
  int64_t base_a = r.baseline_a.baseline_at_start;
  int64_t base_b = r.baseline_b.baseline_at_start;
  uint64_t gap = magnitude(base_b - base_a);
  if (gap >= kBaselineGapBytes &&
      static_cast<double>(gap) >=
          kBaselineGapShare * static_cast<double>(std::max(magnitude(base_a), magnitude(base_b)))) {
    notes.push_back(fmt::format(
        "baselines differ (A {}, B {}): one trace probably started after model construction; "
        "compare peak deltas rather than absolute peaks",
        format_signed_bytes(base_a), format_signed_bytes(base_b)));
  }
  if (a.device != b.device) {
    notes.push_back(fmt::format("different devices compared: A is device {}, B is device {}",
                                a.device, b.device));
  }
  std::optional<std::string> rank_a = rank_of(a.path);
  std::optional<std::string> rank_b = rank_of(b.path);
  if (rank_a && rank_b && *rank_a != *rank_b) {
    notes.push_back(
        fmt::format("the file names suggest different ranks (_{} vs _{}): ranks can "
                    "legitimately differ in memory",
                    *rank_a, *rank_b));
  }
  return r;
}

}  // namespace memsnap
