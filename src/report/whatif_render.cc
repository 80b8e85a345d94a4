#include "report/whatif_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "report/format.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

std::string_view parting_name(SegmentCheck::Parting parting) {
  switch (parting) {
    case SegmentCheck::Parting::kModelReserves: return "model_reserves";
    case SegmentCheck::Parting::kFileReserves: return "file_reserves";
    case SegmentCheck::Parting::kRelease: return "release";
    case SegmentCheck::Parting::kAddress: return "address";
  }
  return "address";
}

std::string parting_text(const SegmentCheck::Divergence& d) {
  switch (d.parting) {
    case SegmentCheck::Parting::kModelReserves:
      return fmt::format(
          "the model reserves a {} segment for a request of {} that the file served "
          "from its cache",
          format_bytes(d.size), format_bytes(d.request));
    case SegmentCheck::Parting::kFileReserves:
      return fmt::format("the file reserves a {} segment at {:#x} that the model does not",
                         format_bytes(d.size), d.file_address);
    case SegmentCheck::Parting::kRelease:
      return fmt::format("the file releases {} at {:#x}, which the model does not hold cached",
                         format_bytes(d.size), d.file_address);
    case SegmentCheck::Parting::kAddress:
      return fmt::format("the model places a request of {} at {:#x}, the file at {:#x}",
                         format_bytes(d.size), d.model_address, d.file_address);
  }
  return {};
}

std::string settings_text(const SegmentCheck& c) {
  return fmt::format(
      "max_split_size {}, expandable segments {}, {} rounding",
      c.max_split_size == UINT64_MAX ? std::string("unlimited") : format_bytes(c.max_split_size),
      c.expandable ? "on" : "off", c.rounding == RoundingRule::kNpu ? "torch_npu's" : "CUDA's");
}

std::string of_total(uint64_t part, uint64_t total) {
  return fmt::format("{} of {}", format_count(part), format_count(total));
}

}  // namespace

// The check's verdict: exact, partial, parted, or nothing to check.
std::string_view verdict_name(const SegmentCheck& c) {
  if (c.nothing_to_check()) return "nothing_to_check";
  if (!c.possible) return "not_possible";
  if (c.exact()) return "exact";
  if (c.segment_events() == 0) {
    return c.allocs_at_recorded_address == c.allocs && c.end_equals_dump() ? "placements_exact"
                                                                           : "parts";
  }
  return c.segments_exact() ? "segments_exact" : "parts";
}

std::string verdict_text(const SegmentCheck& c) {
  const std::string_view name = verdict_name(c);
  if (name == "nothing_to_check") {
    return c.entries == 0 ? "nothing to check: the device has no trace entries, only the dump"
                          : "nothing to check: the trace has no segment entry and no alloc";
  }
  if (name == "exact") return "exact (every segment, every placement, the dump)";
  if (name == "placements_exact") {
    return "every placement and the dump reproduced; the trace reserves and releases no segment "
           "(every segment was reserved before recording), so how the model makes segments is "
           "not tested";
  }
  if (name == "segments_exact") {
    return "every segment and the dump reproduced; some placements differ";
  }
  return "the model parts from the file";
}

std::string render_whatif_check_text(const SegmentCheck& c, int /*top*/) {
  std::string out =
      fmt::format("The allocator model against {} (device {})\n", printable(c.file), c.device);
  if (c.nothing_to_check()) return out + fmt::format("  Verdict: {}.\n", verdict_text(c));
  if (!c.possible) {
    return out + fmt::format("  Not possible: {}.\n", c.impossible_reason);
  }
  out += fmt::format(
      "  PyTorch's caching allocator under the file's settings ({}), from the state before the "
      "first entry ({} segments, {} blocks{})\n\n",
      settings_text(c), format_count(c.segments_at_start), format_count(c.blocks_at_start),
      c.inferred_sizes > 0
          ? fmt::format(", {} of them sized by the split rule", format_count(c.inferred_sizes))
          : std::string());
  TextTable table({"", "reproduced", ""});
  table.add_row({"segments reserved", of_total(c.matched_reserves, c.recorded_reserves),
                 fmt::format("at the same entries with the same sizes; the model reserved {}",
                             format_count(c.model_reserves))});
  table.add_row({"segments released", of_total(c.followed_releases, c.recorded_releases),
                 "followed: the model held each cached then (empty_cache, or before a retry)"});
  table.add_row({"blocks placed", of_total(c.allocs_at_recorded_address, c.allocs),
                 c.followed_placements > 0
                     ? fmt::format("where the file placed them; {} others followed the file",
                                   format_count(c.followed_placements))
                     : std::string("where the file placed them")});
  table.add_row({"peak reserved", format_bytes(c.peak_reserved_model),
                 fmt::format("the file's {}", format_bytes(c.peak_reserved_recorded))});
  table.add_row({"at the dump",
                 c.end_equals_dump() ? std::string("the same")
                                     : fmt::format("{} segments, {} blocks differ",
                                                   format_count(c.end_segments_differing),
                                                   format_count(c.end_blocks_differing)),
                 "segments and allocated blocks against the dump's"});
  out += table.render("  ");
  if (c.first_divergence) {
    out +=
        fmt::format("\n  First parting, at entry {}: {}.\n",
                    format_count(c.first_divergence->position), parting_text(*c.first_divergence));
  }
  if (c.unknown_frees > 0) {
    out += fmt::format("  {} frees of blocks the model did not hold were skipped.\n",
                       format_count(c.unknown_frees));
  }
  out += fmt::format("\n  Verdict: {}.\n", verdict_text(c));
  return out;
}

ordered_json render_whatif_check_json(const SegmentCheck& c, int /*top*/) {
  ordered_json out;
  out["file"] = c.file;
  out["device"] = c.device;
  out["possible"] = c.possible;
  out["impossible_reason"] = c.possible ? ordered_json() : ordered_json(c.impossible_reason);
  out["settings"] = {
      {"max_split_size",
       c.max_split_size == UINT64_MAX ? ordered_json() : ordered_json(c.max_split_size)},
      {"expandable_segments", c.expandable},
      {"rounding", c.rounding == RoundingRule::kNpu ? "npu" : "cuda"}};
  out["start"] = {{"segments", c.segments_at_start},
                  {"blocks", c.blocks_at_start},
                  {"inferred_sizes", c.inferred_sizes}};
  out["segments_reserved"] = {{"recorded", c.recorded_reserves},
                              {"model", c.model_reserves},
                              {"matched", c.matched_reserves}};
  out["segments_released"] = {{"recorded", c.recorded_releases}, {"followed", c.followed_releases}};
  out["allocs"] = {{"count", c.allocs},
                   {"at_recorded_address", c.allocs_at_recorded_address},
                   {"followed", c.followed_placements},
                   {"unknown_frees", c.unknown_frees}};
  out["peak_reserved"] = {{"recorded", c.peak_reserved_recorded}, {"model", c.peak_reserved_model}};
  out["end"] = {{"equals_dump", c.end_equals_dump()},
                {"segments_differing", c.end_segments_differing},
                {"blocks_differing", c.end_blocks_differing}};
  out["divergences"] = c.divergences;
  if (c.first_divergence) {
    const SegmentCheck::Divergence& d = *c.first_divergence;
    out["first_divergence"] = {{"position", d.position},
                               {"kind", parting_name(d.parting)},
                               {"size", d.size},
                               {"file_address", d.file_address},
                               {"model_address", d.model_address},
                               {"request", d.request},
                               {"text", parting_text(d)}};
  } else {
    out["first_divergence"] = nullptr;
  }
  out["segments_exact"] = c.segments_exact();
  out["exact"] = c.exact();
  out["verdict"] = verdict_name(c);
  out["trace_entries"] = c.entries;
  return out;
}

namespace {

std::string capacity_source(const WhatIfReport& r) {
  switch (r.capacity_from) {
    case WhatIfReport::CapacityFrom::kGiven: return "given with --capacity";
    case WhatIfReport::CapacityFrom::kOom:
      return "the first oom entry's free device memory plus what the file had reserved then";
    case WhatIfReport::CapacityFrom::kNone:
      return "none: the file has no oom entry and no --capacity was given, so no row is judged "
             "against one; each says the least capacity it runs in (give --capacity SIZE, the "
             "device's memory, for verdicts)";
  }
  return {};
}

// The first `top` runs (--top), the file's own first.
std::span<const WhatIfRun> shown(const WhatIfReport& r, int top) {
  return std::span<const WhatIfRun>(r.runs).first(
      std::min(r.runs.size(), static_cast<size_t>(std::max(top, 0))));
}

std::string run_outcome(const WhatIfRun& run) {
  if (run.capacity_needed) return fmt::format("needs {}", format_bytes(*run.capacity_needed));
  if (run.model_ooms > 0) {
    return fmt::format("out of memory at entry {}", format_count(*run.first_model_oom));
  }
  if (run.oom_requests > 0) {
    return fmt::format("{} of {} oom requests fit", format_count(run.oom_requests_fit),
                       format_count(run.oom_requests));
  }
  return "fits";
}

}  // namespace

std::string prediction_text(const OomPrediction& p) {
  std::string text;
  switch (p.kind) {
    case OomPrediction::Kind::kSettingFits:
      text = fmt::format("with {} this request would have fit: peak reserved {} of {}", p.setting,
                         format_bytes(p.peak_reserved), format_bytes(p.capacity));
      break;
    case OomPrediction::Kind::kNothingFits:
      text = fmt::format(
          "no allocator setting avoids it: the live tensors and the request alone "
          "need {} of {}",
          format_bytes(p.needed), format_bytes(p.capacity));
      break;
    case OomPrediction::Kind::kNoneTriedFits:
      text = fmt::format("none of the settings memsnap whatif tries would have served it in {}",
                         format_bytes(p.capacity));
      break;
  }
  if (!p.model_reproduces && p.kind != OomPrediction::Kind::kNothingFits) {
    text += " (the allocator model does not reproduce this file: memsnap whatif --check)";
  }
  return text;
}

ordered_json prediction_json(const std::optional<OomPrediction>& p) {
  if (!p) return nullptr;
  const char* kind = p->kind == OomPrediction::Kind::kSettingFits   ? "setting_fits"
                     : p->kind == OomPrediction::Kind::kNothingFits ? "nothing_fits"
                                                                    : "none_tried_fits";
  return {{"kind", kind},
          {"setting", p->kind == OomPrediction::Kind::kSettingFits ? ordered_json(p->setting)
                                                                   : ordered_json()},
          {"peak_reserved", p->kind == OomPrediction::Kind::kSettingFits
                                ? ordered_json(p->peak_reserved)
                                : ordered_json()},
          {"capacity", p->capacity},
          {"needed", p->needed},
          {"model_reproduces", p->model_reproduces},
          {"sentence", prediction_text(*p)}};
}

std::string render_whatif_text(const WhatIfReport& r, int top) {
  std::string out = fmt::format("What other allocator settings would have done: {} (device {})\n",
                                printable(r.file), r.device);
  if (!r.possible) return out + fmt::format("  Not possible: {}.\n", r.impossible_reason);
  if (r.capacity_from == WhatIfReport::CapacityFrom::kNone) {
    out += fmt::format("  capacity {}\n", capacity_source(r));
  } else {
    out += fmt::format("  capacity {}: {}\n", format_bytes(r.capacity), capacity_source(r));
  }
  out += fmt::format(
      "  floor {}: the live requests at their highest, each rounded to 512 bytes; no setting "
      "reserves less\n\n",
      format_bytes(r.floor));
  TextTable table({"setting", "peak reserved", "at the oom", "free at peak", "cudaMalloc",
                   "cudaFree", "outcome"});
  for (const WhatIfRun& run : shown(r, top)) {
    table.add_row(
        {run.settings.label, format_bytes(run.peak_reserved),
         run.reserved_at_oom ? format_bytes(*run.reserved_at_oom) : std::string("-"),
         format_bytes(run.peak_reserved - std::min(run.peak_reserved, run.allocated_at_peak)),
         format_count(run.reserves), format_count(run.releases), run_outcome(run)});
  }
  out += table.render("  ");
  if (!r.timeline_positions.empty()) {
    out += fmt::format(
        "\n  Reserved memory over the trace, as recorded and as each setting had it, is in "
        "--json (timeline: {} columns).",
        format_count(r.timeline_positions.size()));
  }
  out += fmt::format("\n  The file recorded a peak of {} reserved.",
                     format_bytes(r.recorded_peak_reserved));
  if (r.capacity_to_fit) {
    out += fmt::format(" Under its own settings the run fits in {}.\n",
                       format_bytes(*r.capacity_to_fit));
  } else {
    out += fmt::format(" Under its own settings it needs more than {}.\n",
                       format_bytes(std::max(r.capacity, r.floor) * 4));
  }
  if (r.start_from == StartFrom::kFreshSegments && r.trace_entries == 0) {
    out += fmt::format(
        "  The file has no trace entries on this device: each row is the {} segments' live "
        "blocks served by an empty allocator under its own settings, in address order; the "
        "file's own row is that too, not the recording.\n",
        format_count(r.segments_at_start));
  } else if (r.start_from == StartFrom::kFreshSegments) {
    out += fmt::format(
        "  The trace reserves no segment: all {} segments were reserved before recording began. "
        "Each row therefore starts from an empty allocator that serves the blocks live at the "
        "first entry under its own settings, in address order, then runs the trace; the file's "
        "own row is that too, not the recording.\n",
        format_count(r.segments_at_start));
  } else if (r.model_segments_exact) {
    out +=
        "  Under the file's own settings the model makes the segments the file recorded "
        "(memsnap whatif FILE --check).\n";
  } else {
    out += fmt::format(
        "  Under the file's own settings the model makes {} of the {} segments the file "
        "reserved: read the rows with care (memsnap whatif FILE --check says where it parts).\n",
        format_count(r.model_matched_reserves), format_count(r.recorded_reserves));
  }
  return out;
}

const char* capacity_from_name(WhatIfReport::CapacityFrom from) {
  switch (from) {
    case WhatIfReport::CapacityFrom::kGiven: return "given";
    case WhatIfReport::CapacityFrom::kOom: return "oom";
    case WhatIfReport::CapacityFrom::kNone: return "none";
  }
  return "none";
}

ordered_json render_whatif_json(const WhatIfReport& r, int top) {
  ordered_json out;
  out["file"] = r.file;
  out["device"] = r.device;
  out["possible"] = r.possible;
  out["impossible_reason"] = r.possible ? ordered_json() : ordered_json(r.impossible_reason);
  out["capacity"] = r.capacity_from == WhatIfReport::CapacityFrom::kNone ? ordered_json()
                                                                         : ordered_json(r.capacity);
  out["capacity_from"] = capacity_from_name(r.capacity_from);
  out["recorded_peak_reserved"] = r.recorded_peak_reserved;
  out["floor"] = r.floor;
  out["capacity_to_fit"] = r.capacity_to_fit ? ordered_json(*r.capacity_to_fit) : ordered_json();
  out["model_check"] = {{"segments_exact", r.model_segments_exact},
                        {"matched_reserves", r.model_matched_reserves},
                        {"recorded_reserves", r.recorded_reserves},
                        {"segments_at_start", r.segments_at_start}};
  out["start_from"] =
      r.start_from == StartFrom::kFreshSegments ? "fresh_segments" : "recorded_segments";
  ordered_json runs = ordered_json::array();
  for (const WhatIfRun& run : shown(r, top)) {
    runs.push_back({{"setting", run.settings.label},
                    {"peak_reserved", run.peak_reserved},
                    {"allocated_at_peak", run.allocated_at_peak},
                    {"reserved_at_oom",
                     run.reserved_at_oom ? ordered_json(*run.reserved_at_oom) : ordered_json()},
                    {"cuda_mallocs", run.reserves},
                    {"cuda_frees", run.releases},
                    {"oom_requests", run.oom_requests},
                    {"oom_requests_fit", run.oom_requests_fit},
                    {"model_ooms", run.model_ooms},
                    {"first_model_oom",
                     run.first_model_oom ? ordered_json(*run.first_model_oom) : ordered_json()},
                    {"fits", run.fits()},
                    {"capacity_needed",
                     run.capacity_needed ? ordered_json(*run.capacity_needed) : ordered_json()}});
  }
  out["runs"] = std::move(runs);
  if (!r.timeline_positions.empty()) {
    ordered_json by_run = ordered_json::array();
    for (const WhatIfRun& run : shown(r, top)) by_run.push_back(run.timeline);
    out["timeline"] = {
        {"positions", r.timeline_positions}, {"recorded", r.recorded_timeline}, {"runs", by_run}};
  } else {
    out["timeline"] = nullptr;
  }
  return out;
}

}  // namespace memsnap
