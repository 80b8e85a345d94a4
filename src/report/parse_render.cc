#include "report/parse_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/findings.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

// Why the device has no steps under --steps, and how to record them where
// the file has no ProfilerStep marks.
std::string no_steps_hint(const ParseReport& r) {
  // The common case (no marks at all under the default) keeps its short words.
  std::string hint = r.step_source == StepSource::kAuto && r.step_marks.optimizer_starts == 0
                         ? "no ProfilerStep annotations"
                         : no_steps_reason(r.step_source, r.step_marks);
  if (r.step_source != StepSource::kNone && profiler_advice_applies(r.step_marks)) {
    hint +=
        ": profile with torch.profiler.profile(...) and call prof.step() each iteration "
        "(Megatron Bridge: use_pytorch_profiler=True in ProfilingConfig) to get step boundaries";
  }
  return hint;
}

// Whose stack the frees carry, and what follows for memory from before the trace.
std::string free_frames_text(const FreeFrameEvidence& evidence) {
  switch (evidence.kind()) {
    case FreeFrames::kAllocation:
      return fmt::format(
          "the allocation's (all {} matched pairs agree: context=\"alloc\"); a free without "
          "its alloc names where the memory was allocated",
          format_count(evidence.pairs));
    case FreeFrames::kFree:
      return fmt::format(
          "the freeing code's ({} of {} matched pairs differ: context=\"all\"); memory from "
          "before the trace that only a free shows is named \"freed at ...\"",
          format_count(evidence.pairs - evidence.agreeing), format_count(evidence.pairs));
    case FreeFrames::kUnknown: break;
  }
  return "unknown (no matched pair has frames at both ends): taken as the freeing code's";
}

std::string settings_value(const ordered_json& value) {
  if (value.is_string())
    return value.get<std::string>().empty() ? "(empty)" : value.get<std::string>();
  if (value.is_object() && !value.empty()) {
    // roundup_power2_divisions: show only the non-zero entries.
    std::vector<std::string> parts;
    bool all_zero = true;
    for (const auto& [key, item] : value.items()) {
      if (!(item.is_number() && item.get<double>() == 0)) {
        all_zero = false;
        parts.push_back(key + ":" + item.dump());
      }
    }
    if (all_zero) return "all 0";
    return fmt::format("{}", fmt::join(parts, ", "));
  }
  return value.dump();
}

std::string compression_note(const ParseReport& r) {
  if (r.compression == "none" || r.compression.empty()) return "";
  return fmt::format(" ({}, {} decompressed)", r.compression, format_bytes(r.pickle_bytes));
}

// The file: size, protocol, device, format, trace length.
void write_file_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line(printable(r.file));
  line(fmt::format("  file size        {}{}, pickle protocol {}", format_bytes(r.file_size_bytes),
                   compression_note(r), r.pickle_protocol));
  std::string devices = r.devices.empty() ? "none" : fmt::format("{}", fmt::join(r.devices, ", "));
  line(fmt::format("  device           {} (devices with data: {})", r.device, devices));
  if (r.top_level_list) {
    line("  format           a list of segments (torch.cuda.memory_snapshot()), no trace");
  } else if (r.legacy_format) {
    line("  format           PyTorch 2.0 (blocks carry a history list; addresses recomputed)");
  }
  std::string span = r.facts.has_time
                         ? fmt::format(" over {:.3f} s", r.facts.trace_duration_s)
                         : std::string(r.facts.event_count > 0 ? " (no timestamps)" : "");
  line(fmt::format("  trace            {} event{}{}", format_count(r.facts.event_count),
                   r.facts.event_count == 1 ? "" : "s", span));
  line(fmt::format("  interned         {} frames, {} stacks", format_count(r.distinct_frames),
                   format_count(r.distinct_stacks)));
}

// The allocator settings the file recorded.
void write_settings_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line("");
  line("Allocator settings");
  if (r.allocator_settings.is_object() && !r.allocator_settings.empty()) {
    TextTable table({"setting", "value"});
    for (const auto& [key, value] : r.allocator_settings.items()) {
      table.add_row({key, settings_value(value)});
    }
    out += table.render();
  } else {
    line("  (not recorded in this file)");
  }
}

// The segments at the dump, the reserved peak and fragmentation over time.
void write_segments_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  const SegmentTotals& s = r.segments;
  line("");
  line(fmt::format("Segments (device {})", r.device));
  TextTable segments({"", "bytes", ""}, {false, true, false});
  segments.add_row({"count", format_count(s.count),
                    s.expandable_count || s.private_pool_count
                        ? fmt::format("{} expandable, {} in private pools (CUDA graphs / MemPool)",
                                      s.expandable_count, s.private_pool_count)
                        : ""});
  segments.add_row({"reserved", format_bytes(s.total_size), "at the dump"});
  if (r.reserved.segment_events > 0) {
    segments.add_row(
        {"reserved peak", format_bytes(r.reserved.peak),
         fmt::format("{}from {} at the trace start ({} segment entries)",
                     r.facts.reserved_peak_time_s
                         ? fmt::format("at {:.6f} s, ", *r.facts.reserved_peak_time_s)
                         : "",
                     format_bytes(r.reserved.at_start), format_count(r.reserved.segment_events))});
  }
  segments.add_row({"allocated", format_bytes(s.allocated_size), ""});
  segments.add_row({"active", format_bytes(s.active_size), ""});
  segments.add_row({"awaiting free", format_bytes(s.awaiting_free_size), "active - allocated"});
  segments.add_row({"inactive", format_bytes(s.inactive_size),
                    "fragmentation " + format_percent(s.fragmentation)});
  if (const FragmentationHistory& f = r.fragmentation; f.known) {
    const auto share = [](uint64_t part, uint64_t whole) {
      return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
    };
    const std::string approximate =
        f.exact ? "" : " (approximate: the replay differs from the dump)";
    segments.add_row({"free at reserved peak", format_bytes(f.free_at_reserved_peak),
                      fmt::format("{} of {}; largest free block {}{}",
                                  format_percent(share(f.free_at_reserved_peak, f.reserved_peak)),
                                  format_bytes(f.reserved_peak),
                                  format_bytes(f.largest_free_at_reserved_peak), approximate)});
    segments.add_row(
        {"most free", format_bytes(f.peak_free),
         fmt::format("{}{} of {} reserved then; largest free block {}{}",
                     r.peak_free_time_s ? fmt::format("at {:.6f} s, ", *r.peak_free_time_s) : "",
                     format_percent(share(f.peak_free, f.reserved_at_peak_free)),
                     format_bytes(f.reserved_at_peak_free),
                     format_bytes(f.largest_free_at_peak_free), approximate)});
  }
  out += segments.render();
}

// Baseline, peak delta and absolute peak.
void write_baseline_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  const Baseline& b = r.baseline;
  const ReplayTotals& t = r.replay;
  line("");
  line("Baseline and peak");
  TextTable baseline({"", "bytes", ""}, {false, true, false});
  baseline.add_row({"baseline at start", format_signed_bytes(b.baseline_at_start),
                    "segments active - still live + pre-existing freed"});
  baseline.add_row({"  segments active", format_bytes(b.segments_active), ""});
  baseline.add_row(
      {"  still live", format_bytes(b.profiling_still_live),
       fmt::format("{} traced allocations live at the end", format_count(t.live_count_at_end))});
  baseline.add_row({"  pre-existing freed", format_bytes(b.pre_existing_freed), "unmatched frees"});
  baseline.add_row(
      {"peak delta", format_signed_bytes(t.peak_delta),
       t.peak_event == kNoEvent ? "at trace start"
       : r.facts.peak_time_s
           ? fmt::format("at event {}, {:.6f} s", format_count(t.peak_event), *r.facts.peak_time_s)
           : fmt::format("at event {}", format_count(t.peak_event))});
  baseline.add_row(
      {"absolute peak",
       format_signed_bytes(add_bytes(b.baseline_at_start, static_cast<uint64_t>(t.peak_delta))),
       "baseline + peak delta"});
  baseline.add_row({"end delta", format_signed_bytes(t.end_delta), ""});
  out += baseline.render();
  if (r.facts.peak_time_s) {
    line(fmt::format("  live at the peak, by source: memsnap replay-to-time {}{} --time {:.6f}",
                     shell_quote(r.file),
                     r.device_requested ? fmt::format(" --device {}", r.device) : "",
                     *r.facts.peak_time_s));
  }
}

// Entries by action, unmatched frees, whose frames the frees carry, annotations.
void write_events_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  const ReplayTotals& t = r.replay;
  line("");
  line(fmt::format("Events (device {})", r.device));
  if (r.actions.empty()) {
    line("  (none)");
  } else {
    TextTable events({"action", "count"}, {false, true});
    for (const auto& [action, count] : r.actions) events.add_row({action, format_count(count)});
    out += events.render();
  }
  line(fmt::format("  unmatched frees  {} ({})", format_count(t.unmatched_free_count),
                   format_bytes(t.unmatched_free_bytes)));
  if (t.free_count != 0)
    line(fmt::format("  free frames      {}", free_frames_text(r.free_frames)));
  if (!r.annotation_kinds.empty()) {
    std::vector<std::string> parts;
    for (const auto& [name, count] : r.annotation_kinds)
      parts.push_back(fmt::format("{} x{}", printable(name), count));
    line(fmt::format("  annotations      {}: {}", format_count(r.annotation_count),
                     fmt::join(parts, ", ")));
  }
}

// The steps (both ends of a long run), and where inferred ones came from.
void write_steps_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line("");
  line("Profiler steps");
  if (r.steps.empty()) {
    line(fmt::format("  {}", no_steps_hint(r)));
  } else {
    size_t complete = 0;
    for (const auto& step : r.steps) complete += step.complete ? 1 : 0;
    line(fmt::format("  {} steps ({} complete): {} to {}", r.steps.size(), complete,
                     r.steps.front().number, r.steps.back().number));
    if (std::string note = steps_inferred_note(r.steps_origin); !note.empty()) {
      line(fmt::format("  {}", note));
    }
    TextTable steps({"step", "start (s)", "duration (ms)", "complete"}, {true, true, true, false});
    int64_t origin = r.steps.front().start_us;
    // Long runs have thousands of steps: show both ends (replay-step --all-steps lists all).
    constexpr size_t kShownAtEachEnd = 8;
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (r.steps.size() > 2 * kShownAtEachEnd + 1 && i == kShownAtEachEnd) {
        steps.add_row({"...", "", "",
                       fmt::format("{} more (replay-step --all-steps)",
                                   r.steps.size() - 2 * kShownAtEachEnd)});
        i = r.steps.size() - kShownAtEachEnd - 1;
        continue;
      }
      const ProfilerStep& step = r.steps[i];
      steps.add_row({std::to_string(step.number),
                     fmt::format("{:.3f}", static_cast<double>(step.start_us - origin) / 1e6),
                     step.complete ? fmt::format("{:.1f}", step.duration_ms()) : "-",
                     step.complete ? "yes" : "no (no END)"});
    }
    out += steps.render();
  }
}

// Top sources by throughput, and what the dump holds live by source.
void write_sources_section(const ParseReport& r, int top, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  line("");
  line(fmt::format("Top sources by allocated bytes (throughput; {} distinct)",
                   format_count(r.throughput.size())));
  const size_t shown = limit(top, r.throughput.size());
  if (shown == 0) {
    line(r.throughput.empty() ? "  (no allocations in the trace)" : "  (--top 0)");
  } else {
    TextTable sources({"throughput", "allocs", std::string(group_label(r.group))},
                      {true, true, false});
    for (const SourceThroughput& row : std::span(r.throughput).first(shown)) {
      sources.add_row(
          {format_bytes(row.throughput_bytes), format_count(row.alloc_count), row.source});
    }
    out += sources.render();
  }

  if (!r.live_at_dump.empty()) {
    line("");
    line(fmt::format(
        "Live at the dump by source, from the segments' blocks ({} distinct; the trace does not "
        "cover them)",
        format_count(r.live_at_dump.size())));
    out += usage_table(r.live_at_dump, top, group_label(r.group));
  }
}

// One row per device, when the file has several.
void write_devices_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  if (!r.per_device.empty()) {
    line("");
    line("Per device");
    TextTable devices_table({"device", "events", "allocs", "segments", "reserved", "active",
                             "baseline", "peak delta", "peak", "ooms", "unmatched frees"},
                            {true, true, true, true, true, true, true, true, true, true, true});
    for (const auto& d : r.per_device) {
      devices_table.add_row(
          {std::to_string(d.device), format_count(d.event_count), format_count(d.alloc_count),
           format_count(d.segments.count), format_bytes(d.segments.total_size),
           format_bytes(d.segments.active_size), format_signed_bytes(d.baseline_at_start),
           format_signed_bytes(d.peak_delta), format_signed_bytes(d.absolute_peak),
           format_count(d.oom_count), format_count(d.unmatched_free_count)});
    }
    out += devices_table.render();
  }
}

// What parse warns of, in words.
void write_warnings_section(const ParseReport& r, std::string& out) {
  auto line = [&out](const std::string& text) { out += text + "\n"; };
  if (!r.warnings.empty()) {
    line("");
    line("Warnings");
    for (const Finding& warning : r.warnings) line("  ! " + printable(phrase(warning)));
  }
}

}  // namespace

std::string render_parse_text(const ParseReport& r, int top) {
  std::string out;
  write_file_section(r, out);
  write_settings_section(r, out);
  write_segments_section(r, out);
  write_baseline_section(r, out);
  write_events_section(r, out);
  write_steps_section(r, out);
  write_sources_section(r, top, out);
  write_devices_section(r, out);
  write_warnings_section(r, out);
  return out;
}

namespace {

// Parts of parse --json, each one key of the document.
ordered_json profiler_steps_json(const ParseReport& r) {
  ordered_json steps = ordered_json::object();
  for (const auto& step : r.steps) {
    steps[std::to_string(step.number)] = {
        {"start_us", step.start_us},
        {"end_us", step.complete ? ordered_json(step.end_us) : ordered_json(nullptr)},
        {"duration_ms", step.complete ? ordered_json(step.duration_ms()) : ordered_json(nullptr)},
        {"complete", step.complete}};
  }
  return steps;
}

ordered_json replay_json(const ParseReport& r) {
  return {{"alloc_count", r.replay.alloc_count},
          {"alloc_bytes", r.replay.alloc_bytes},
          {"free_count", r.replay.free_count},
          {"peak_delta", r.replay.peak_delta},
          {"peak_event", r.replay.peak_event == kNoEvent ? ordered_json(nullptr)
                                                         : ordered_json(r.replay.peak_event)},
          {"peak_time_s",
           r.facts.peak_time_s ? ordered_json(*r.facts.peak_time_s) : ordered_json(nullptr)},
          {"absolute_peak",
           add_bytes(r.baseline.baseline_at_start, static_cast<uint64_t>(r.replay.peak_delta))},
          {"end_delta", r.replay.end_delta},
          {"live_count_at_end", r.replay.live_count_at_end}};
}

ordered_json ooms_json(const ParseReport& r) {
  ordered_json ooms = ordered_json::array();
  for (const auto& oom : r.ooms) {
    ooms.push_back(
        {{"event", oom.event},
         {"requested", oom.requested},
         {"device_free", oom.device_free ? ordered_json(*oom.device_free) : ordered_json(nullptr)},
         {"time_us", oom.time_us}});
  }
  return ooms;
}

ordered_json per_device_json(const ParseReport& r) {
  ordered_json per_device = ordered_json::array();
  for (const auto& d : r.per_device) {
    per_device.push_back({{"device", d.device},
                          {"event_count", d.event_count},
                          {"alloc_count", d.alloc_count},
                          {"segments", segments_json(d.segments)},
                          {"baseline_at_start", d.baseline_at_start},
                          {"peak_delta", d.peak_delta},
                          {"absolute_peak", d.absolute_peak},
                          {"oom_count", d.oom_count},
                          {"unmatched_free_count", d.unmatched_free_count}});
  }
  return per_device;
}

ordered_json anomalies_json(const ParseReport& r) {
  ordered_json malformed_fields = ordered_json::array();
  for (const MalformedField& field : r.anomalies.malformed_fields) {
    malformed_fields.push_back({{"field", field.field}, {"found", field.found}});
  }
  return {{"malformed_fields", std::move(malformed_fields)},
          {"flat_device_traces", r.anomalies.flat_device_traces},
          {"times_backwards", r.times_backwards},
          {"steps_ending_before_start", r.steps_ending_before_start},
          {"malformed_entries", r.anomalies.malformed_entries},
          {"malformed_segments", r.anomalies.malformed_segments},
          {"malformed_annotations", r.anomalies.malformed_annotations},
          {"malformed_blocks", r.anomalies.malformed_blocks},
          {"unusable_times", r.anomalies.unusable_times},
          {"bytes_after_stop", r.anomalies.bytes_after_stop},
          {"bytes_after_compressed", r.anomalies.bytes_after_compressed}};
}

}  // namespace

ordered_json render_parse_json(const ParseReport& r, int top) {
  ordered_json out;
  out["file"] = r.file;
  out["file_size_bytes"] = r.file_size_bytes;
  out["pickle_size_bytes"] = r.pickle_bytes;
  out["compression"] = r.compression;
  out["pickle_protocol"] = r.pickle_protocol;
  out["device"] = r.device;
  out["devices"] = r.devices;
  out["format"] = r.top_level_list  ? "segment_list"
                  : r.legacy_format ? "legacy_history"
                                    : "snapshot";
  out["allocator_settings"] =
      r.allocator_settings.is_null() ? ordered_json::object() : r.allocator_settings;
  out["segments"] = segments_json(r.segments);
  out["reserved"] = reserved_json(r.reserved);
  out["reserved"]["peak_time_s"] = r.facts.reserved_peak_time_s
                                       ? ordered_json(*r.facts.reserved_peak_time_s)
                                       : ordered_json(nullptr);
  out["fragmentation"] = fragmentation_json(r.fragmentation, r.peak_free_time_s);
  out["baseline"] = baseline_json(r.baseline);
  out["profiler_steps"] = profiler_steps_json(r);
  out["steps_source"] = steps_source_json(r.steps_origin);
  ordered_json actions = ordered_json::object();
  for (const auto& [action, count] : r.actions) actions[action] = count;
  out["device_traces"] = {
      {"device", r.device}, {"event_count", r.facts.event_count}, {"actions", actions}};
  out["replay"] = replay_json(r);
  out["unmatched_frees"] = {{"count", r.replay.unmatched_free_count},
                            {"bytes", r.replay.unmatched_free_bytes}};
  out["free_frames"] = {{"kind", free_frames_name(r.free_frames.kind())},
                        {"matched_pairs", r.free_frames.pairs},
                        {"agreeing", r.free_frames.agreeing}};
  out["trace_duration_s"] =
      r.facts.has_time ? ordered_json(r.facts.trace_duration_s) : ordered_json(nullptr);
  ordered_json sources = ordered_json::array();
  for (const SourceThroughput& row :
       std::span(r.throughput).first(limit(top, r.throughput.size()))) {
    sources.push_back({{"source", row.source},
                       {"throughput_bytes", row.throughput_bytes},
                       {"alloc_count", row.alloc_count}});
  }
  out["top_sources"] = sources;
  out["live_at_dump"] = usage_json(r.live_at_dump, top);
  ordered_json annotations = ordered_json::object();
  for (const auto& [name, count] : r.annotation_kinds) annotations[name] = count;
  out["annotations"] = {{"count", r.annotation_count}, {"started", annotations}};
  out["oom"] = ooms_json(r);
  out["per_device"] = per_device_json(r);
  out["interned"] = {{"frames", r.distinct_frames}, {"stacks", r.distinct_stacks}};
  out["anomalies"] = anomalies_json(r);
  out["warnings"] = phrase_all(r.warnings);
  if (r.steps.empty()) out["steps_hint"] = no_steps_hint(r);
  return out;
}

}  // namespace memsnap
