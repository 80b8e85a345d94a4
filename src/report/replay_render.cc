#include "report/replay_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "report/format.h"
#include "report/json_fields.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

size_t limit(int top, size_t size) {
  return top < 0 ? size : std::min(size, static_cast<size_t>(top));
}

ordered_json usage_json(const std::vector<SourceUsage>& rows, int top) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    out.push_back({{"source", rows[i].source}, {"bytes", rows[i].bytes}, {"count", rows[i].count}});
  }
  return out;
}

std::string usage_table(const std::vector<SourceUsage>& rows, int top) {
  TextTable table({"bytes", "count", "source"}, {true, true, false});
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    table.add_row({format_bytes(rows[i].bytes), format_count(rows[i].count), rows[i].source});
  }
  return table.empty() ? "  (nothing live)\n" : table.render();
}

std::string diff_table(const std::vector<SourceDiff>& rows, int top) {
  TextTable table({"A", "B", "B - A", "count A", "count B", "source"},
                  {true, true, true, true, true, false});
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    const SourceDiff& r = rows[i];
    table.add_row({format_bytes(r.bytes_a), format_bytes(r.bytes_b), format_signed_bytes(r.delta()),
                   format_count(r.count_a), format_count(r.count_b), r.source});
  }
  return table.empty() ? "  (nothing live on either side)\n" : table.render();
}

ordered_json diff_json(const std::vector<SourceDiff>& rows, int top, bool counts) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < limit(top, rows.size()); ++i) {
    const SourceDiff& r = rows[i];
    if (counts) {
      out.push_back({{"source", r.source},
                     {"bytes_a", r.bytes_a},
                     {"count_a", r.count_a},
                     {"bytes_b", r.bytes_b},
                     {"count_b", r.count_b},
                     {"delta", r.delta()}});
    } else {
      out.push_back({{"source", r.source},
                     {"peak_a", r.bytes_a},
                     {"peak_b", r.bytes_b},
                     {"delta", r.delta()},
                     {"count_a", r.count_a},
                     {"count_b", r.count_b}});
    }
  }
  return out;
}

std::string signed_diff(uint64_t a, uint64_t b) {
  return format_signed_bytes(static_cast<int64_t>(b) - static_cast<int64_t>(a));
}

std::string count_diff(uint64_t a, uint64_t b) {
  int64_t d = static_cast<int64_t>(b) - static_cast<int64_t>(a);
  return d > 0 ? fmt::format("+{}", d) : fmt::format("{}", d);
}

std::string short_list(const std::vector<int64_t>& numbers) {
  if (numbers.empty()) return "none";
  if (numbers.size() <= 12) return fmt::format("{}", fmt::join(numbers, ", "));
  return fmt::format("{}, ... {} ({} steps)", fmt::join(numbers.begin(), numbers.begin() + 5, ", "),
                     numbers.back(), numbers.size());
}

}  // namespace

// ---- replay-step ----

std::string render_steps_text(const ReplayStepResult& result) {
  std::string out = fmt::format("{}: device {}, baseline {}\n", result.file, result.device,
                                format_signed_bytes(result.baseline));
  if (result.steps.size() > 1) {
    out += "\n";
    TextTable table({"step", "ms", "allocs", "frees", "throughput", "peak delta", "absolute peak",
                     "end delta", "pre-existing frees", "unmatched"},
                    {true, true, true, true, true, true, true, true, true, true});
    for (const StepReport& s : result.steps) {
      table.add_row({std::to_string(s.stats.step.number) + (s.stats.step.complete ? "" : "*"),
                     s.stats.step.complete ? fmt::format("{:.1f}", s.duration_ms) : "-",
                     format_count(s.stats.alloc_count), format_count(s.stats.free_count),
                     format_bytes(s.stats.alloc_bytes), format_signed_bytes(s.stats.peak_delta),
                     format_signed_bytes(s.absolute_peak), format_signed_bytes(s.stats.end_delta),
                     fmt::format("{} ({})", format_count(s.stats.pre_existing_free_count),
                                 format_bytes(s.stats.pre_existing_free_bytes)),
                     format_count(s.stats.unmatched_free_count)});
    }
    out += table.render();
    bool any_incomplete = std::any_of(result.steps.begin(), result.steps.end(),
                                      [](const StepReport& s) { return !s.stats.step.complete; });
    if (any_incomplete)
      out += "  * incomplete: no END annotation; the window runs to the end of the trace\n";
  }
  for (const StepReport& s : result.steps) {
    out += fmt::format("\nStep {}{}\n", s.stats.step.number,
                       s.stats.step.complete ? "" : " (incomplete: no END)");
    TextTable facts({"", ""}, {false, false});
    facts.add_row(
        {"duration", s.stats.step.complete ? fmt::format("{:.3f} ms", s.duration_ms) : "-"});
    facts.add_row({"allocs / frees", fmt::format("{} / {}", format_count(s.stats.alloc_count),
                                                 format_count(s.stats.free_count))});
    facts.add_row({"throughput", format_bytes(s.stats.alloc_bytes)});
    facts.add_row({"peak delta", format_signed_bytes(s.stats.peak_delta) + " over the step start"});
    facts.add_row({"absolute peak", format_signed_bytes(s.absolute_peak) +
                                        " (baseline + start delta + peak delta)"});
    facts.add_row({"end delta", format_signed_bytes(s.stats.end_delta)});
    facts.add_row(
        {"pre-existing frees", fmt::format("{} ({}) of blocks allocated before the step",
                                           format_count(s.stats.pre_existing_free_count),
                                           format_bytes(s.stats.pre_existing_free_bytes))});
    facts.add_row(
        {"unmatched frees", fmt::format("{} ({})", format_count(s.stats.unmatched_free_count),
                                        format_bytes(s.stats.unmatched_free_bytes))});
    std::vector<std::string> marks;
    for (const auto& [name, count] : s.annotations)
      marks.push_back(fmt::format("{} x{}", name, count));
    facts.add_row(
        {"annotations", marks.empty() ? "none" : fmt::format("{}", fmt::join(marks, ", "))});
    std::string rendered = facts.render();
    out += rendered.substr(rendered.find('\n') + 1);  // no header row
    out += fmt::format(
        "  live at the peak, by source ({} sources, memory carried into the step included):\n",
        format_count(s.sources_at_peak));
    out += usage_table(s.top_sources_at_peak, -1);
  }
  return out;
}

ordered_json render_steps_json(const ReplayStepResult& result) {
  ordered_json out = ordered_json::array();
  for (const StepReport& s : result.steps) {
    ordered_json marks = ordered_json::object();
    for (const auto& [name, count] : s.annotations) marks[name] = count;
    out.push_back({{"step", s.stats.step.number},
                   {"complete", s.stats.step.complete},
                   {"duration_ms",
                    s.stats.step.complete ? ordered_json(s.duration_ms) : ordered_json(nullptr)},
                   {"alloc_count", s.stats.alloc_count},
                   {"free_count", s.stats.free_count},
                   {"total_throughput", s.stats.alloc_bytes},
                   {"peak_delta", s.stats.peak_delta},
                   {"absolute_peak", s.absolute_peak},
                   {"end_delta", s.stats.end_delta},
                   {"start_delta", s.stats.start_delta},
                   {"unmatched_frees", s.stats.unmatched_free_count},
                   {"unmatched_free_bytes", s.stats.unmatched_free_bytes},
                   {"pre_existing_frees", s.stats.pre_existing_free_count},
                   {"pre_existing_free_bytes", s.stats.pre_existing_free_bytes},
                   {"top_sources_at_peak", usage_json(s.top_sources_at_peak, -1)},
                   {"annotations", marks}});
  }
  return out;
}

// ---- replay-to-time ----

std::string render_time_text(const TimeSide& s, int top) {
  std::string out = fmt::format("{}: device {}, at {:.6f} s of {:.6f} s{}\n", s.file, s.device,
                                s.time_s, s.trace_duration_s,
                                s.clamped ? " (clamped: --time is past the end of the trace)" : "");
  TextTable facts({"", ""}, {false, true});
  facts.add_row({"baseline", format_signed_bytes(s.baseline)});
  facts.add_row({"delta", format_signed_bytes(s.delta)});
  facts.add_row({"absolute", format_signed_bytes(s.absolute)});
  facts.add_row({"live allocations", format_count(s.live_count)});
  facts.add_row({"allocs so far", format_count(s.alloc_count)});
  facts.add_row({"frees so far", format_count(s.free_count)});
  std::string rendered = facts.render();
  out += rendered.substr(rendered.find('\n') + 1);
  out += fmt::format("\nLive allocations by source ({} sources, {} traced)\n",
                     format_count(s.sources.size()), format_bytes(s.live_bytes));
  out += usage_table(s.sources, top);
  return out;
}

ordered_json render_time_json(const TimeSide& s, int top) {
  ordered_json out{{"file", s.file},
                   {"device", s.device},
                   {"time_s", s.time_s},
                   {"trace_duration_s", s.trace_duration_s},
                   {"clamped", s.clamped},
                   {"baseline", s.baseline},
                   {"delta", s.delta},
                   {"absolute", s.absolute},
                   {"alloc_count", s.alloc_count},
                   {"free_count", s.free_count},
                   {"live_count", s.live_count},
                   {"live_bytes", s.live_bytes},
                   {"sources", usage_json(s.sources, top)}};
  return out;
}

std::string render_time_pair_text(const TimeSide& a, const TimeSide& b, int top) {
  std::string out = fmt::format(
      "A: {} (device {})\nB: {} (device {})\nat {:.6f} s{}\n\n", a.file, a.device, b.file, b.device,
      a.time_s == b.time_s ? a.time_s : std::max(a.time_s, b.time_s),
      a.clamped || b.clamped ? " (clamped to the end of the shorter trace where needed)" : "");
  TextTable table({"", "A", "B", "B - A"}, {false, true, true, true});
  table.add_row({"time (s)", fmt::format("{:.6f}", a.time_s), fmt::format("{:.6f}", b.time_s), ""});
  table.add_row({"trace duration (s)", fmt::format("{:.6f}", a.trace_duration_s),
                 fmt::format("{:.6f}", b.trace_duration_s), ""});
  table.add_row({"baseline", format_signed_bytes(a.baseline), format_signed_bytes(b.baseline),
                 format_signed_bytes(b.baseline - a.baseline)});
  table.add_row({"delta", format_signed_bytes(a.delta), format_signed_bytes(b.delta),
                 format_signed_bytes(b.delta - a.delta)});
  table.add_row({"absolute", format_signed_bytes(a.absolute), format_signed_bytes(b.absolute),
                 format_signed_bytes(b.absolute - a.absolute)});
  table.add_row({"live allocations", format_count(a.live_count), format_count(b.live_count),
                 count_diff(a.live_count, b.live_count)});
  table.add_row({"allocs so far", format_count(a.alloc_count), format_count(b.alloc_count),
                 count_diff(a.alloc_count, b.alloc_count)});
  table.add_row({"frees so far", format_count(a.free_count), format_count(b.free_count),
                 count_diff(a.free_count, b.free_count)});
  out += table.render();
  std::vector<SourceDiff> rows = diff_sources(a.sources, b.sources);
  out += "\nLive allocations by source, sorted by |B - A|\n";
  out += diff_table(rows, top);
  OnlyOnOneSide oa = only_in_a(rows);
  OnlyOnOneSide ob = only_in_b(rows);
  out += fmt::format(
      "\n  only in A (> 1 MiB): {} sources, {}\n  only in B (> 1 MiB): {} sources, {}\n",
      oa.sources, format_bytes(oa.bytes), ob.sources, format_bytes(ob.bytes));
  return out;
}

ordered_json render_time_pair_json(const TimeSide& a, const TimeSide& b, int top) {
  std::vector<SourceDiff> rows = diff_sources(a.sources, b.sources);
  OnlyOnOneSide oa = only_in_a(rows);
  OnlyOnOneSide ob = only_in_b(rows);
  return {{"file_a", a.file},
          {"file_b", b.file},
          {"device_a", a.device},
          {"device_b", b.device},
          {"time_s", std::max(a.time_s, b.time_s)},
          {"time_s_a", a.time_s},
          {"time_s_b", b.time_s},
          {"clamped_a", a.clamped},
          {"clamped_b", b.clamped},
          {"trace_duration_s_a", a.trace_duration_s},
          {"trace_duration_s_b", b.trace_duration_s},
          {"baseline_a", a.baseline},
          {"baseline_b", b.baseline},
          {"delta_a", a.delta},
          {"delta_b", b.delta},
          {"absolute_a", a.absolute},
          {"absolute_b", b.absolute},
          {"alloc_count_a", a.alloc_count},
          {"alloc_count_b", b.alloc_count},
          {"free_count_a", a.free_count},
          {"free_count_b", b.free_count},
          {"live_count_a", a.live_count},
          {"live_count_b", b.live_count},
          {"sources", diff_json(rows, top, true)},
          {"only_in_a", {{"sources", oa.sources}, {"bytes", oa.bytes}}},
          {"only_in_b", {{"sources", ob.sources}, {"bytes", ob.bytes}}}};
}

// ---- compare ----

std::string render_compare_text(const CompareResult& r, int top) {
  std::string out = fmt::format("A: {} (device {})\nB: {} (device {})\n", r.file_a, r.device_a,
                                r.file_b, r.device_b);
  out += "\nAllocator settings\n";
  if (!r.settings_a && !r.settings_b) {
    out += "  (recorded in neither file)\n";
  } else if (r.config_diffs.empty()) {
    out += "  identical\n";
  } else {
    TextTable table({"setting", "A", "B"});
    for (const SettingDiff& d : r.config_diffs) {
      table.add_row({d.key, d.a.is_null() ? "(absent)" : d.a.dump(),
                     d.b.is_null() ? "(absent)" : d.b.dump()});
    }
    out += table.render();
  }

  out += "\nSegments\n";
  TextTable seg({"", "A", "B", "B - A"}, {false, true, true, true});
  const SegmentTotals& sa = r.segments_a;
  const SegmentTotals& sb = r.segments_b;
  seg.add_row(
      {"count", format_count(sa.count), format_count(sb.count), count_diff(sa.count, sb.count)});
  seg.add_row({"reserved", format_bytes(sa.total_size), format_bytes(sb.total_size),
               signed_diff(sa.total_size, sb.total_size)});
  seg.add_row({"allocated", format_bytes(sa.allocated_size), format_bytes(sb.allocated_size),
               signed_diff(sa.allocated_size, sb.allocated_size)});
  seg.add_row({"active", format_bytes(sa.active_size), format_bytes(sb.active_size),
               signed_diff(sa.active_size, sb.active_size)});
  seg.add_row({"awaiting free", format_bytes(sa.awaiting_free_size),
               format_bytes(sb.awaiting_free_size),
               signed_diff(sa.awaiting_free_size, sb.awaiting_free_size)});
  seg.add_row({"inactive", format_bytes(sa.inactive_size), format_bytes(sb.inactive_size),
               signed_diff(sa.inactive_size, sb.inactive_size)});
  seg.add_row(
      {"baseline at start", format_signed_bytes(r.baseline_a.baseline_at_start),
       format_signed_bytes(r.baseline_b.baseline_at_start),
       format_signed_bytes(r.baseline_b.baseline_at_start - r.baseline_a.baseline_at_start)});
  out += seg.render();

  const FullTraceComparison& f = r.full_trace;
  if (!r.step_results.empty()) {
    out += fmt::format("\nSteps complete in both files ({})\n", r.step_results.size());
    TextTable steps({"step", "peak delta A", "peak delta B", "B - A", "abs peak A", "abs peak B",
                     "B - A", "allocs A", "allocs B", "throughput A", "throughput B"},
                    {true, true, true, true, true, true, true, true, true, true, true});
    for (const StepComparison& s : r.step_results) {
      steps.add_row({std::to_string(s.step), format_signed_bytes(s.peak_delta_a),
                     format_signed_bytes(s.peak_delta_b),
                     format_signed_bytes(s.peak_delta_b - s.peak_delta_a),
                     format_signed_bytes(s.absolute_peak_a), format_signed_bytes(s.absolute_peak_b),
                     format_signed_bytes(s.absolute_peak_b - s.absolute_peak_a),
                     format_count(s.alloc_count_a), format_count(s.alloc_count_b),
                     format_bytes(s.throughput_a), format_bytes(s.throughput_b)});
    }
    out += steps.render();
  } else {
    out += "\nNo step complete in both files: full-trace summary\n";
  }
  if (!r.steps_only_a.empty()) out += "  steps only in A: " + short_list(r.steps_only_a) + "\n";
  if (!r.steps_only_b.empty()) out += "  steps only in B: " + short_list(r.steps_only_b) + "\n";
  if (!r.incomplete_a.empty()) out += "  incomplete in A: " + short_list(r.incomplete_a) + "\n";
  if (!r.incomplete_b.empty()) out += "  incomplete in B: " + short_list(r.incomplete_b) + "\n";
  out += "\nFull trace\n";
  TextTable full({"", "A", "B", "B - A"}, {false, true, true, true});
  full.add_row({"peak delta", format_signed_bytes(f.peak_delta_a),
                format_signed_bytes(f.peak_delta_b),
                format_signed_bytes(f.peak_delta_b - f.peak_delta_a)});
  full.add_row({"absolute peak", format_signed_bytes(f.absolute_peak_a),
                format_signed_bytes(f.absolute_peak_b),
                format_signed_bytes(f.absolute_peak_b - f.absolute_peak_a)});
  full.add_row({"throughput", format_bytes(f.throughput_a), format_bytes(f.throughput_b),
                signed_diff(f.throughput_a, f.throughput_b)});
  full.add_row({"allocs", format_count(f.alloc_count_a), format_count(f.alloc_count_b),
                count_diff(f.alloc_count_a, f.alloc_count_b)});
  full.add_row({"unmatched frees", format_count(f.unmatched_frees_a),
                format_count(f.unmatched_frees_b),
                count_diff(f.unmatched_frees_a, f.unmatched_frees_b)});
  out += full.render();

  out += fmt::format(
      "\nDrill-down: live at each side's peak {}, by source, sorted by |B - A|\n",
      r.drill_step ? fmt::format("in step {}", *r.drill_step) : std::string("over the full trace"));
  out += fmt::format("  absolute peak A {}, B {}, B - A {}\n", format_signed_bytes(r.drill_peak_a),
                     format_signed_bytes(r.drill_peak_b),
                     format_signed_bytes(r.drill_peak_b - r.drill_peak_a));
  out += diff_table(r.drill_sources, top);
  out += fmt::format("  only in A (> 1 MiB): {} sources, {}; only in B (> 1 MiB): {} sources, {}\n",
                     r.drill_only_a.sources, format_bytes(r.drill_only_a.bytes),
                     r.drill_only_b.sources, format_bytes(r.drill_only_b.bytes));
  if (!r.observations.empty()) {
    out += "\nObservations\n";
    for (const std::string& note : r.observations) out += "  - " + note + "\n";
  }
  return out;
}

ordered_json render_compare_json(const CompareResult& r, int top) {
  ordered_json diffs = ordered_json::array();
  for (const SettingDiff& d : r.config_diffs)
    diffs.push_back({{"key", d.key}, {"a", d.a}, {"b", d.b}});
  ordered_json steps = ordered_json::array();
  for (const StepComparison& s : r.step_results) {
    steps.push_back({{"step", s.step},
                     {"peak_delta_a", s.peak_delta_a},
                     {"peak_delta_b", s.peak_delta_b},
                     {"peak_delta_diff", s.peak_delta_b - s.peak_delta_a},
                     {"absolute_peak_a", s.absolute_peak_a},
                     {"absolute_peak_b", s.absolute_peak_b},
                     {"absolute_peak_diff", s.absolute_peak_b - s.absolute_peak_a},
                     {"alloc_count_a", s.alloc_count_a},
                     {"alloc_count_b", s.alloc_count_b},
                     {"throughput_a", s.throughput_a},
                     {"throughput_b", s.throughput_b}});
  }
  const FullTraceComparison& f = r.full_trace;
  return {{"file_a", r.file_a},
          {"file_b", r.file_b},
          {"device_a", r.device_a},
          {"device_b", r.device_b},
          {"config_diffs", diffs},
          {"segments_a", segments_json(r.segments_a)},
          {"segments_b", segments_json(r.segments_b)},
          {"baseline_a", baseline_json(r.baseline_a)},
          {"baseline_b", baseline_json(r.baseline_b)},
          {"matching_steps", r.matching_steps},
          {"step_results", steps},
          {"steps_only_a", r.steps_only_a},
          {"steps_only_b", r.steps_only_b},
          {"incomplete_a", r.incomplete_a},
          {"incomplete_b", r.incomplete_b},
          {"full_trace",
           {{"peak_delta_a", f.peak_delta_a},
            {"peak_delta_b", f.peak_delta_b},
            {"peak_delta_diff", f.peak_delta_b - f.peak_delta_a},
            {"absolute_peak_a", f.absolute_peak_a},
            {"absolute_peak_b", f.absolute_peak_b},
            {"absolute_peak_diff", f.absolute_peak_b - f.absolute_peak_a},
            {"throughput_a", f.throughput_a},
            {"throughput_b", f.throughput_b},
            {"alloc_count_a", f.alloc_count_a},
            {"alloc_count_b", f.alloc_count_b},
            {"unmatched_frees_a", f.unmatched_frees_a},
            {"unmatched_frees_b", f.unmatched_frees_b},
            {"unmatched_free_bytes_a", f.unmatched_free_bytes_a},
            {"unmatched_free_bytes_b", f.unmatched_free_bytes_b}}},
          {"drill_down",
           {{"step", r.drill_step ? ordered_json(*r.drill_step) : ordered_json(nullptr)},
            {"absolute_peak_a", r.drill_peak_a},
            {"absolute_peak_b", r.drill_peak_b},
            {"peak_diff", r.drill_peak_b - r.drill_peak_a},
            {"sources", diff_json(r.drill_sources, top, false)},
            {"only_in_a", {{"sources", r.drill_only_a.sources}, {"bytes", r.drill_only_a.bytes}}},
            {"only_in_b", {{"sources", r.drill_only_b.sources}, {"bytes", r.drill_only_b.bytes}}}}},
          {"observations", r.observations}};
}

}  // namespace memsnap
