#include "report/step_render.h"
#include "report/findings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

std::string render_steps_text(const ReplayStepResult& result, int top) {
  std::string out = fmt::format("{}: device {}, baseline {}\n", printable(result.file),
                                result.device, format_signed_bytes(result.baseline));
  if (std::string note = steps_inferred_note(result.steps_origin); !note.empty()) {
    out += note + "\n";
  }
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
    if (any_incomplete) {
      out += steps_are_inferred(result.steps_origin.origin)
                 ? "  * incomplete: the trace ends before the optimizer ran again; the window "
                   "runs to the end of the trace\n"
                 : "  * incomplete: no END annotation; the window runs to the end of the trace\n";
    }
  }
  for (const StepReport& s : result.steps) {
    out += fmt::format("\nStep {}{}\n", s.stats.step.number,
                       s.stats.step.complete ? ""
                       : steps_are_inferred(result.steps_origin.origin)
                           ? " (incomplete: no optimizer step after it)"
                           : " (incomplete: no END)");
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
      marks.push_back(fmt::format("{} x{}", printable(name), count));
    facts.add_row(
        {"annotations", marks.empty() ? "none" : fmt::format("{}", fmt::join(marks, ", "))});
    std::string rendered = facts.render();
    out += rendered.substr(rendered.find('\n') + 1);  // no header row
    out += fmt::format(
        "  live at the peak, by source ({} sources, memory carried into the step included):\n",
        format_count(s.sources_at_peak.size()));
    out += usage_table(s.sources_at_peak, top, group_label(result.group));
  }
  return out;
}

ordered_json render_steps_json(const ReplayStepResult& result, int top) {
  ordered_json out = ordered_json::array();
  for (const StepReport& s : result.steps) {
    ordered_json marks = ordered_json::object();
    for (const auto& [name, count] : s.annotations) marks[name] = count;
    out.push_back({{"step", s.stats.step.number},
                   {"complete", s.stats.step.complete},
                   {"steps_source", steps_source_json(result.steps_origin)},
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
                   {"top_sources_at_peak", usage_json(s.sources_at_peak, top)},
                   {"annotations", marks}});
  }
  return out;
}

}  // namespace memsnap
