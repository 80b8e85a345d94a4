#include "report/compare_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "report/findings.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

// "forward", "backward", ... (JSON), and the text's words.
std::string_view phase_name(PeakPhase phase) {
  switch (phase) {
    case PeakPhase::kForward: return "forward";
    case PeakPhase::kBackward: return "backward";
    case PeakPhase::kOptimizerStep: return "optimizer_step";
    case PeakPhase::kDataLoading: return "data_loading";
    case PeakPhase::kOther: return "other";
    case PeakPhase::kUnknown: break;
  }
  return "unknown";
}

std::string phase_text(const std::optional<PeakPhase>& phase) {
  if (!phase) return "(at its start)";
  switch (*phase) {
    case PeakPhase::kForward: return "the forward pass";
    case PeakPhase::kBackward: return "the backward pass";
    case PeakPhase::kOptimizerStep: return "the optimizer step";
    case PeakPhase::kDataLoading: return "data loading";
    case PeakPhase::kOther: return "none of forward, backward or optimizer step";
    case PeakPhase::kUnknown: break;
  }
  return "an unknown phase";
}

nlohmann::ordered_json phase_json(const std::optional<PeakPhase>& phase) {
  return phase ? nlohmann::ordered_json(phase_name(*phase)) : nlohmann::ordered_json(nullptr);
}

ordered_json optional_json(const std::optional<double>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

// The allocator settings that differ.
void write_settings(const CompareResult& r, std::string& out) {
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
}

// The segments side by side, B - A.
void write_segments(const CompareResult& r, std::string& out) {
  out += "\nSegments\n";
  TextTable seg({"", "A", "B", "B - A"}, {false, true, true, true});
  const SegmentTotals& sa = r.segments_a;
  const SegmentTotals& sb = r.segments_b;
  add_count_row(seg, "count", sa.count, sb.count);
  add_bytes_row(seg, "reserved", sa.total_size, sb.total_size);
  add_bytes_row(seg, "reserved peak", r.reserved_a.peak, r.reserved_b.peak);
  if (r.fragmentation_a.known && r.fragmentation_b.known) {
    add_bytes_row(seg, "free at reserved peak", r.fragmentation_a.free_at_reserved_peak,
                  r.fragmentation_b.free_at_reserved_peak);
    add_bytes_row(seg, "largest free then", r.fragmentation_a.largest_free_at_reserved_peak,
                  r.fragmentation_b.largest_free_at_reserved_peak);
  }
  add_bytes_row(seg, "allocated", sa.allocated_size, sb.allocated_size);
  add_bytes_row(seg, "active", sa.active_size, sb.active_size);
  add_bytes_row(seg, "awaiting free", sa.awaiting_free_size, sb.awaiting_free_size);
  add_bytes_row(seg, "inactive", sa.inactive_size, sb.inactive_size);
  seg.add_row(
      {"baseline at start", format_signed_bytes(r.baseline_a.baseline_at_start),
       format_signed_bytes(r.baseline_b.baseline_at_start),
       format_signed_bytes(r.baseline_b.baseline_at_start - r.baseline_a.baseline_at_start)});
  out += seg.render();
}

// The steps complete in both, and those that are not.
void write_steps(const CompareResult& r, std::string& out) {
  if (!r.step_results.empty()) {
    out += fmt::format("\nSteps complete in both files ({})\n", r.step_results.size());
    for (const auto& [side, origin] :
         {std::pair{"A", &r.steps_origin_a}, std::pair{"B", &r.steps_origin_b}}) {
      if (std::string note = steps_inferred_note(*origin); !note.empty()) {
        out += fmt::format("  {}: {}\n", side, note);
      }
    }
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
  // Step numbers, not counts: "step 3", "steps 3, 4".
  const auto incomplete = [&out](std::string_view side, const std::vector<int64_t>& steps) {
    if (steps.empty()) return;
    out += fmt::format("  incomplete in {}: step{} {}\n", side, steps.size() == 1 ? "" : "s",
                       short_list(steps));
  };
  incomplete("A", r.incomplete_a);
  incomplete("B", r.incomplete_b);
}

// The full trace side by side.
void write_full_trace(const CompareResult& r, std::string& out) {
  const FullTraceComparison& f = r.full_trace;
  out += "\nFull trace\n";
  TextTable full({"", "A", "B", "B - A"}, {false, true, true, true});
  add_signed_bytes_row(full, "peak delta", f.peak_delta_a, f.peak_delta_b);
  add_signed_bytes_row(full, "absolute peak", f.absolute_peak_a, f.absolute_peak_b);
  add_bytes_row(full, "throughput", f.throughput_a, f.throughput_b);
  add_count_row(full, "allocs", f.alloc_count_a, f.alloc_count_b);
  add_count_row(full, "unmatched frees", f.unmatched_frees_a, f.unmatched_frees_b);
  out += full.render();
}

// What was live at each side's peak by source and by category, and the phase each peaked in.
void write_drill_down(const CompareResult& r, int top, std::string& out) {
  if (r.drill_from_blocks) {
    out +=
        "\nDrill-down: live at the dump, from the segments' blocks (neither trace shows its peak), "
        "by source, sorted by |B - A|\n";
  } else {
    out += fmt::format("\nDrill-down: live at each side's peak {}, by source, sorted by |B - A|\n",
                       r.drill_step ? fmt::format("in step {}", *r.drill_step)
                                    : std::string("over the full trace"));
    out += fmt::format("  absolute peak A {}, B {}, B - A {}\n",
                       format_signed_bytes(r.drill_peak_a), format_signed_bytes(r.drill_peak_b),
                       format_signed_bytes(r.drill_peak_b - r.drill_peak_a));
  }
  if (r.drill_peak_time_a && r.drill_peak_time_b) {
    out += fmt::format(
        "  peaks at A {:.6f} s, B {:.6f} s; live then: memsnap replay-to-time {}{} --time {:.6f} / "
        "memsnap replay-to-time {}{} --time {:.6f}\n",
        *r.drill_peak_time_a, *r.drill_peak_time_b, shell_quote(r.file_a),
        r.device_requested ? fmt::format(" --device {}", r.device_a) : "", *r.drill_peak_time_a,
        shell_quote(r.file_b), r.device_requested ? fmt::format(" --device {}", r.device_b) : "",
        *r.drill_peak_time_b);
  }
  out += diff_table(r.drill.rows, top, group_label(r.group));
  out += fmt::format("  only in A (> 1 MiB): {} sources, {}; only in B (> 1 MiB): {} sources, {}\n",
                     r.drill.only_a.sources, format_bytes(r.drill.only_a.bytes),
                     r.drill.only_b.sources, format_bytes(r.drill.only_b.bytes));
  // Rows under different sources that cancel out (the same optimizer state
  // named twice) still show as one category.
  if (r.group != GroupBy::kCategory) {
    out += r.drill_from_blocks ? "\nBy category, the same live sets\n"
                               : "\nBy category, everything live at the same moments (memory from "
                                 "before the trace included, as explain and check count it)\n";
    out += diff_table(r.drill_by_category.rows, top, "category");
  }
  if (r.peak_phase_a || r.peak_phase_b) {
    out += fmt::format(
        "  peaked in: A {}, B {} (the category of the allocation that reached each peak)\n",
        phase_text(r.peak_phase_a), phase_text(r.peak_phase_b));
  }
}

}  // namespace

std::string render_compare_text(const CompareResult& r, int top) {
  std::string out = fmt::format("A: {} (device {})\nB: {} (device {})\n", printable(r.file_a),
                                r.device_a, printable(r.file_b), r.device_b);
  write_settings(r, out);
  write_segments(r, out);
  write_steps(r, out);
  write_full_trace(r, out);
  write_drill_down(r, top, out);
  if (!r.findings.empty()) {
    out += "\nObservations\n";
    for (const Finding& finding : r.findings) out += "  - " + printable(phrase(finding)) + "\n";
  }
  return out;
}

namespace {

// step_results: the reference scripts' keys first (peak_* = peak delta,
// abs_peak_* = absolute peak, B - A), then memsnap's own.
ordered_json step_results_json(const CompareResult& r) {
  ordered_json steps = ordered_json::array();
  for (const StepComparison& s : r.step_results) {
    steps.push_back({{"step", s.step},
                     {"peak_a", s.peak_delta_a},
                     {"peak_b", s.peak_delta_b},
                     {"peak_diff", s.peak_delta_b - s.peak_delta_a},
                     {"abs_peak_a", s.absolute_peak_a},
                     {"abs_peak_b", s.absolute_peak_b},
                     {"abs_peak_diff", s.absolute_peak_b - s.absolute_peak_a},
                     {"allocs_a", s.alloc_count_a},
                     {"allocs_b", s.alloc_count_b},
                     {"throughput_a", s.throughput_a},
                     {"throughput_b", s.throughput_b},
                     {"peak_delta_a", s.peak_delta_a},
                     {"peak_delta_b", s.peak_delta_b},
                     {"peak_delta_diff", s.peak_delta_b - s.peak_delta_a},
                     {"absolute_peak_a", s.absolute_peak_a},
                     {"absolute_peak_b", s.absolute_peak_b},
                     {"absolute_peak_diff", s.absolute_peak_b - s.absolute_peak_a},
                     {"alloc_count_a", s.alloc_count_a},
                     {"alloc_count_b", s.alloc_count_b}});
  }
  return steps;
}

// The whole trace compared, in the same two vocabularies.
ordered_json whole_trace_json(const CompareResult& r) {
  const FullTraceComparison& f = r.full_trace;
  return {{"peak_a", f.peak_delta_a},
          {"peak_b", f.peak_delta_b},
          {"peak_diff", f.peak_delta_b - f.peak_delta_a},
          {"abs_peak_a", f.absolute_peak_a},
          {"abs_peak_b", f.absolute_peak_b},
          {"abs_peak_diff", f.absolute_peak_b - f.absolute_peak_a},
          {"allocs_a", f.alloc_count_a},
          {"allocs_b", f.alloc_count_b},
          {"throughput_a", f.throughput_a},
          {"throughput_b", f.throughput_b},
          {"unmatched_a", f.unmatched_frees_a},
          {"unmatched_b", f.unmatched_frees_b},
          {"peak_delta_a", f.peak_delta_a},
          {"peak_delta_b", f.peak_delta_b},
          {"peak_delta_diff", f.peak_delta_b - f.peak_delta_a},
          {"absolute_peak_a", f.absolute_peak_a},
          {"absolute_peak_b", f.absolute_peak_b},
          {"absolute_peak_diff", f.absolute_peak_b - f.absolute_peak_a},
          {"alloc_count_a", f.alloc_count_a},
          {"alloc_count_b", f.alloc_count_b},
          {"unmatched_frees_a", f.unmatched_frees_a},
          {"unmatched_frees_b", f.unmatched_frees_b},
          {"unmatched_free_bytes_a", f.unmatched_free_bytes_a},
          {"unmatched_free_bytes_b", f.unmatched_free_bytes_b}};
}

// Where the peaks differ: the drill-down at the step (or the whole trace).
ordered_json drill_down_json(const CompareResult& r, int top) {
  return {{"step", r.drill_step ? ordered_json(*r.drill_step) : ordered_json("full-trace")},
          {"peak_diff", r.drill_peak_delta_b - r.drill_peak_delta_a},
          {"sources", diff_json(r.drill.rows, top, false)},
          {"categories", diff_json(r.drill_by_category.rows, top, false)},
          {"peak_phase_a", phase_json(r.peak_phase_a)},
          {"peak_phase_b", phase_json(r.peak_phase_b)},
          {"live_from", r.drill_from_blocks ? "segment_blocks" : "trace"},
          {"peak_delta_a", r.drill_peak_delta_a},
          {"peak_delta_b", r.drill_peak_delta_b},
          {"absolute_peak_a", r.drill_peak_a},
          {"absolute_peak_b", r.drill_peak_b},
          {"absolute_peak_diff", r.drill_peak_b - r.drill_peak_a},
          {"peak_time_s_a", optional_json(r.drill_peak_time_a)},
          {"peak_time_s_b", optional_json(r.drill_peak_time_b)},
          {"only_in_a", only_json(r.drill.only_a)},
          {"only_in_b", only_json(r.drill.only_b)}};
}

}  // namespace

ordered_json render_compare_json(const CompareResult& r, int top) {
  // config_diffs in the reference scripts' shape, [key, a, b] triples;
  // allocator_settings_diffs the same rows as objects.
  ordered_json triples = ordered_json::array();
  ordered_json diffs = ordered_json::array();
  for (const SettingDiff& d : r.config_diffs) {
    triples.push_back(ordered_json::array({d.key, d.a, d.b}));
    diffs.push_back({{"key", d.key}, {"a", d.a}, {"b", d.b}});
  }
  // Rows and the full trace carry the reference scripts' keys first (peak_* =
  // peak delta, abs_peak_* = absolute peak, B - A), then memsnap's own.
  const ordered_json whole = whole_trace_json(r);
  return {{"file_a", r.file_a},
          {"file_b", r.file_b},
          {"device_a", r.device_a},
          {"device_b", r.device_b},
          {"config_diffs", triples},
          {"allocator_settings_diffs", diffs},
          {"segments_a", compare_segments_json(r.segments_a)},
          {"segments_b", compare_segments_json(r.segments_b)},
          {"reserved_a", reserved_json(r.reserved_a)},
          {"reserved_b", reserved_json(r.reserved_b)},
          {"fragmentation_a", fragmentation_json(r.fragmentation_a, std::nullopt)},
          {"fragmentation_b", fragmentation_json(r.fragmentation_b, std::nullopt)},
          {"baseline_a", r.baseline_a.baseline_at_start},
          {"baseline_b", r.baseline_b.baseline_at_start},
          {"baseline_detail_a", baseline_json(r.baseline_a)},
          {"baseline_detail_b", baseline_json(r.baseline_b)},
          {"matching_steps", r.matching_steps},
          {"steps_source_a", steps_source_json(r.steps_origin_a)},
          {"steps_source_b", steps_source_json(r.steps_origin_b)},
          {"step_results", step_results_json(r)},
          {"steps_only_a", r.steps_only_a},
          {"steps_only_b", r.steps_only_b},
          {"incomplete_a", r.incomplete_a},
          {"incomplete_b", r.incomplete_b},
          // As the reference: null when steps matched (step_results holds the comparison).
          {"full_trace", r.step_results.empty() ? whole : ordered_json(nullptr)},
          {"whole_trace", whole},
          {"drill_down", drill_down_json(r, top)},
          {"observations", phrase_all(r.findings)}};
}

}  // namespace memsnap
