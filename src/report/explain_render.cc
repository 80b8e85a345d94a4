#include "report/explain_render.h"
#include "report/findings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/format.h"
#include "report/source_tables.h"
#include "report/whatif_render.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

std::string seconds(std::optional<double> s) {
  return s ? fmt::format("{:.3f} s", *s) : std::string("(no time)");
}

std::string verdicts_text(const std::vector<OomVerdict>& verdicts) {
  if (verdicts.empty()) return "none";
  std::string text(verdict_name(verdicts.front()));
  if (verdicts.size() > 1) {
    std::vector<std::string_view> others;
    for (size_t i = 1; i < verdicts.size(); ++i) others.push_back(verdict_name(verdicts[i]));
    text += fmt::format(" (also: {})", fmt::join(others, ", "));
  }
  return text;
}

// The top rows, then one "(N more)" row with the rest summed.
std::string table_text(const std::vector<SourceUsage>& rows, int top, std::string_view column) {
  const ShownRows shown = shown_rows(rows, top);
  const bool evidence = has_evidence(shown.rows);
  TextTable out = usage_text_table(column, evidence);
  for (const SourceUsage& row : shown.rows) {
    std::vector<std::string> cells = {format_bytes(row.bytes), format_count(row.count),
                                      printable(row.source)};
    if (evidence) cells.push_back(evidence_cell(row));
    out.add_row(cells);
  }
  if (shown.rest_sources > 0) {
    std::vector<std::string> cells = {format_bytes(shown.rest_bytes),
                                      format_count(shown.rest_count),
                                      fmt::format("({} more)", format_count(shown.rest_sources))};
    if (evidence) cells.emplace_back();
    out.add_row(cells);
  }
  return out.empty() ? "  (nothing live)\n"
                     : out.render() + evidence_legend(shown.rows) + row_name_notes(shown.rows);
}

ordered_json table_json(const std::vector<SourceUsage>& rows, int top) {
  const ShownRows shown = shown_rows(rows, top);
  return {{"rows", usage_json(rows, top)},
          {"rest",
           {{"bytes", shown.rest_bytes},
            {"count", shown.rest_count},
            {"sources", shown.rest_sources}}}};
}

std::string lack_text(Lack lack, const ExplainReport& r) {
  switch (lack) {
    case Lack::kNoTrace:
      return "no allocation trace: only the state at the dump (segments, blocks) is known; record "
             "one with torch.cuda.memory._record_memory_history()";
    case Lack::kTraceTruncated:
      return "many frees without their alloc: " + trace_cut_text(r.trace_cut, r.event_count);
    case Lack::kNoTraceStacks:
      return "trace entries carry no frames: the trace's own allocations are unnamed; the names "
             "above come from the dump's blocks, which carry frames; record with "
             "stacks=\"python\" (or \"all\") to name the rest";
    case Lack::kNoStacks:
      return "trace entries carry no frames: sources are unknown; record with "
             "stacks=\"python\" (or \"all\")";
    case Lack::kNoTimes:
      return "entries carry no time_us (PyTorch before 2.2): moments are entry positions, not "
             "seconds";
    case Lack::kNoBlockFrames:
      return "memory from before the trace carries no frames: it is counted, not named";
  }
  return "";
}

// The next commands, spelled with this file's name (and --device when the
// page is about a device the default would not choose).
std::vector<std::pair<std::string, std::string>> next_commands(const ExplainReport& r) {
  const std::string file = shell_quote(r.file);
  const std::string device = r.choice.reason == DeviceReason::kRequested
                                 ? fmt::format(" --device {}", r.choice.device)
                                 : std::string();
  std::vector<std::pair<std::string, std::string>> out;
  for (NextCommand next : r.next) {
    switch (next) {
      case NextCommand::kOom:
        out.emplace_back(fmt::format("memsnap oom {}{}", file, device),
                         "the OOM in full: the allocator then, what grew before it, the verdict");
        break;
      case NextCommand::kReplayToTime:
        out.emplace_back(
            fmt::format("memsnap replay-to-time {}{} --time {:.6f}", file, device, *r.peak.time_s),
            "every source live at the peak");
        break;
      case NextCommand::kReplayToTimeTraced:
        out.emplace_back(
            fmt::format("memsnap replay-to-time {}{} --time {:.6f}", file, device, *r.peak.time_s),
            fmt::format("the trace's allocations live at the peak, by source ({} of the {}; the "
                        "rest was allocated before the trace: the tables above name it)",
                        format_signed_bytes(r.peak.delta), format_level_bytes(r.peak.absolute)));
        break;
      case NextCommand::kReplayStep:
        out.emplace_back(
            fmt::format("memsnap replay-step {}{} --step {}", file, device, *r.steps.highest),
            "the highest step: what it allocated and kept");
        break;
      case NextCommand::kPlot:
        out.emplace_back(fmt::format("memsnap plot {}{} -o timeline.html", file, device),
                         "memory over time, by category and by source (offline HTML)");
        break;
      case NextCommand::kSegments:
        out.emplace_back(fmt::format("memsnap segments {}{}", file, device),
                         "the allocator's segments and free blocks at the dump");
        break;
      case NextCommand::kOtherDevice:
        out.emplace_back(fmt::format("memsnap explain {} --device {}", file, *r.other_oom_device),
                         "the other device that ran out of memory");
        break;
    }
  }
  return out;
}

std::string device_list(const ExplainReport& r) {
  std::vector<std::string> parts;
  for (const ExplainDevice& d : r.devices) {
    std::string part = fmt::format("{}: {} entries, {} reserved", d.device, format_count(d.entries),
                                   format_bytes(d.reserved));
    if (d.oom_count > 0) part += fmt::format(", {} OOM", format_count(d.oom_count));
    parts.push_back(part);
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The OOM, when the file has one: where, the verdict, the request, the
// allocator then.
void write_oom(const ExplainReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  if (r.oom) {
    const ExplainOom& o = *r.oom;
    line("");
    line(fmt::format(
        "Out of memory: entry {} of the device's trace{}{}", format_count(o.event),
        o.time_s ? fmt::format(", at {:.3f} s", *o.time_s) : std::string(),
        o.count > 1 ? fmt::format(" (the first of {})", format_count(o.count)) : std::string()));
    line(fmt::format("  verdict    {}", verdicts_text(o.verdicts)));
    line(fmt::format(
        "  request    {}{}", format_bytes(o.request),
        o.request_source.empty() ? std::string() : " from " + printable(o.request_source)));
    line(fmt::format(
        "  then       {} live, {} reserved, {} free in PyTorch's segments{}{}",
        format_level_bytes(o.live), format_bytes(o.reserved), format_level_bytes(o.free),
        o.largest_usable
            ? fmt::format(" (largest usable block {})", format_bytes(*o.largest_usable))
            : std::string(),
        o.device_free ? fmt::format(", {} free on the device", format_bytes(*o.device_free))
                      : std::string()));
    if (o.shortfall > 0)
      line(fmt::format("  short by   {}", format_bytes(static_cast<uint64_t>(o.shortfall))));
    if (o.prediction) line(fmt::format("  what-if    {}", prediction_text(*o.prediction)));
  }
}

// The peak (or the dump, without a trace), live then by category and source,
// and what was live before the trace.
void write_peak(const ExplainReport& r, int top, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  const ExplainPeak& p = r.peak;
  line("");
  if (r.event_count == 0) {
    // No trace: the dump is the only moment there is.
    line(fmt::format("Live at the dump: {} (no trace: from the dump's blocks)",
                     format_level_bytes(p.absolute)));
  } else {
    line(fmt::format("Peak: {} {}", format_level_bytes(p.absolute),
                     p.at_trace_start ? std::string("at the trace start")
                                      : fmt::format("at {} (entry {})", seconds(p.time_s),
                                                    format_count(p.event))));
    line(fmt::format("  {} over the trace's baseline of {} (memory live before its first entry)",
                     format_signed_bytes(p.delta), format_level_bytes(p.baseline)));
  }
  const std::string_view moment = r.event_count == 0 ? "the dump" : "the peak";
  const std::string whose = p.includes_baseline && r.event_count > 0
                                ? " (memory from before the trace under its own source)"
                                : "";
  line(fmt::format("Live at {} by category{}", moment, whose));
  out += table_text(p.by_category, top, "category");
  line(fmt::format("Live at {} by source", moment));
  out += table_text(p.by_source, top, "source");
  // At the trace start the tables above are that memory already.
  if (!r.baseline_by_source.empty() && p.baseline > 0 && !p.at_trace_start) {
    line(
        fmt::format("Before the trace ({}), by category and source, from the dump's blocks and "
                    "the trace's unmatched frees",
                    format_signed_bytes(p.baseline)));
    out += table_text(r.baseline_by_category, top, "category");
    out += table_text(r.baseline_by_source, top, "source");
  }
}

// The allocator, the steps, what the file lacks and what to run next.
void write_allocator_and_next(const ExplainReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  const ExplainPeak& p = r.peak;
  line("");
  line("Allocator");
  line(fmt::format("  at the peak    {} reserved, {} of it not allocated", format_bytes(p.reserved),
                   format_level_bytes(static_cast<int64_t>(p.reserved) - p.absolute)));
  if (p.free_at_reserved_peak) {
    line(fmt::format("  reserved peak  {}: {} free, largest free block {}",
                     format_bytes(p.reserved_peak), format_bytes(*p.free_at_reserved_peak),
                     format_bytes(p.largest_free_at_reserved_peak.value_or(0))));
  } else {
    line(fmt::format("  reserved peak  {}", format_bytes(p.reserved_peak)));
  }
  line(fmt::format("  at the dump    {} reserved, {} allocated", format_bytes(r.reserved_at_dump),
                   format_bytes(r.allocated_at_dump)));

  if (r.steps.count > 0) {
    line("");
    const std::string highest = fmt::format(
        "{}{}", r.steps.origin.origin == StepOrigin::kProfiler ? "ProfilerStep#" : "step ",
        *r.steps.highest);
    // One step peaks highest of one: say which it is, not that it won.
    line(r.steps.count == 1 ? fmt::format("Steps: 1 complete ({}), peaking at {}", highest,
                                          format_level_bytes(r.steps.highest_peak))
                            : fmt::format("Steps: {} complete; {} peaks highest, at {}",
                                          format_count(r.steps.count), highest,
                                          format_level_bytes(r.steps.highest_peak)));
    if (std::string note = steps_inferred_note(r.steps.origin); !note.empty()) {
      line(fmt::format("  {}", note));
    }
  }
  if (!r.lacks.empty()) {
    line("");
    line("What the file lacks");
    for (Lack lack : r.lacks) line("  - " + lack_text(lack, r));
  }
  line("");
  line("Next");
  // Command lines hold the file's name: each on a line of its own, so a long
  // path neither wraps the list nor pushes what it shows off the screen.
  for (const auto& [command, what] : next_commands(r)) {
    line("  " + printable(command));
    line("      " + what);
  }
}

}  // namespace

std::string render_explain_text(const ExplainReport& r, int top) {
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  if (r.empty) {
    line(
        fmt::format("{}: no segments and no trace entries: nothing to explain (a snapshot taken "
                    "before any CUDA allocation, or with recording off)",
                    printable(r.file)));
    return out;
  }
  line(printable(r.file));
  line(fmt::format("  device     {} ({})", r.choice.device, device_reason_text(r.choice.reason)));
  if (r.devices.size() > 1) line(fmt::format("  devices    {}", device_list(r)));
  line(fmt::format("  trace      {} entries{}", format_count(r.event_count),
                   r.duration_s ? fmt::format(" over {:.3f} s", *r.duration_s) : std::string()));

  write_oom(r, out);
  write_peak(r, top, out);
  write_allocator_and_next(r, out);
  return out;
}

ordered_json render_explain_json(const ExplainReport& r, int top) {
  ordered_json devices = ordered_json::array();
  for (const ExplainDevice& d : r.devices) {
    devices.push_back({{"device", d.device},
                       {"event_count", d.entries},
                       {"reserved", d.reserved},
                       {"oom_count", d.oom_count}});
  }
  ordered_json out;
  out["file"] = r.file;
  out["file_size_bytes"] = r.file_size;
  out["device"] = r.choice.device;
  out["device_reason"] = std::string(device_reason_text(r.choice.reason));
  out["devices"] = devices;
  out["event_count"] = r.event_count;
  out["duration_s"] = r.duration_s ? ordered_json(*r.duration_s) : ordered_json(nullptr);
  if (r.oom) {
    const ExplainOom& o = *r.oom;
    ordered_json verdicts = ordered_json::array();
    for (OomVerdict v : o.verdicts) verdicts.push_back(std::string(verdict_name(v)));
    out["oom"] = {
        {"count", o.count},
        {"event", o.event},
        {"time_s", o.time_s ? ordered_json(*o.time_s) : ordered_json(nullptr)},
        {"verdicts", verdicts},
        {"request", o.request},
        {"request_source", o.request_source},
        {"live", o.live},
        {"reserved", o.reserved},
        {"free", o.free},
        {"largest_usable_block",
         o.largest_usable ? ordered_json(*o.largest_usable) : ordered_json(nullptr)},
        {"device_free", o.device_free ? ordered_json(*o.device_free) : ordered_json(nullptr)},
        {"shortfall", o.shortfall},
        {"whatif", prediction_json(o.prediction)}};
  } else {
    out["oom"] = nullptr;
  }
  const ExplainPeak& p = r.peak;
  out["peak"] = {
      {"absolute", p.absolute},
      {"baseline", p.baseline},
      {"delta", p.delta},
      {"at_trace_start", p.at_trace_start},
      {"event", p.at_trace_start ? ordered_json(nullptr) : ordered_json(p.event)},
      {"time_s", p.time_s ? ordered_json(*p.time_s) : ordered_json(nullptr)},
      {"includes_baseline", p.includes_baseline},
      {"by_category", table_json(p.by_category, top)},
      {"by_source", table_json(p.by_source, top)},
      {"reserved", p.reserved},
      {"reserved_peak", p.reserved_peak},
      {"free_at_reserved_peak",
       p.free_at_reserved_peak ? ordered_json(*p.free_at_reserved_peak) : ordered_json(nullptr)},
      {"largest_free_at_reserved_peak", p.largest_free_at_reserved_peak
                                            ? ordered_json(*p.largest_free_at_reserved_peak)
                                            : ordered_json(nullptr)}};
  out["baseline"] = {{"by_category", table_json(r.baseline_by_category, top)},
                     {"by_source", table_json(r.baseline_by_source, top)}};
  out["dump"] = {{"reserved", r.reserved_at_dump}, {"allocated", r.allocated_at_dump}};
  out["steps"] = {
      {"count", r.steps.count},
      {"highest", r.steps.highest ? ordered_json(*r.steps.highest) : ordered_json(nullptr)},
      {"highest_peak",
       r.steps.highest ? ordered_json(r.steps.highest_peak) : ordered_json(nullptr)},
      {"source", steps_source_json(r.steps.origin)}};
  ordered_json lacks = ordered_json::array();
  for (Lack lack : r.lacks) lacks.push_back(std::string(lack_name(lack)));
  out["lacks"] = lacks;
  const bool truncated =
      std::find(r.lacks.begin(), r.lacks.end(), Lack::kTraceTruncated) != r.lacks.end();
  out["trace_cut"] = !truncated                             ? ordered_json()
                     : r.trace_cut == TraceCut::kRingBuffer ? ordered_json("ring_buffer")
                                                            : ordered_json("late_start");
  ordered_json next = ordered_json::array();
  for (const auto& [command, what] : next_commands(r)) {
    next.push_back({{"command", command}, {"shows", what}});
  }
  out["next"] = next;
  return out;
}

}  // namespace memsnap
