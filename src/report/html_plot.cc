#include "report/html_plot.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/escaping.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <limits>

#include "memsnap/error.h"
#include "memsnap/version.h"
#include "report/findings.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "report/oom_render.h"
#include "report/whatif_render.h"

namespace memsnap {
#if MEMSNAP_HTML_PLOT
namespace web {
extern const std::string_view kTemplateHtml;
extern const std::string_view kAppJs;
extern const std::string_view kTransformsJs;
extern const std::string_view kAppCss;
extern const std::string_view kUplotJs;
extern const std::string_view kUplotCss;
}  // namespace web
#endif

namespace {

using nlohmann::ordered_json;

// Typed arrays travel as base64 of their little-endian bytes (x86-64 and
// aarch64 are little-endian; the page reads them with Float64Array etc.).
template <typename T>
std::string base64_of(const std::vector<T>& values) {
  absl::string_view raw(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return absl::Base64Escape(raw);
}

std::vector<double> as_doubles(const std::vector<uint64_t>& values) {
  return {values.begin(), values.end()};
}

ordered_json buckets_json(const Buckets& buckets, const char* width_key) {
  return {{width_key, buckets.width},
          {"count", buckets.min.size()},
          {"min", base64_of(buckets.min)},
          {"max", base64_of(buckets.max)}};
}

ordered_json stacked_buckets_json(const StackedBuckets& buckets) {
  ordered_json layers = ordered_json::array();
  for (const std::vector<double>& layer : buckets.layers) layers.push_back(base64_of(layer));
  return {{"per_bucket", buckets.per_bucket}, {"count", buckets.count()}, {"layers", layers}};
}

ordered_json stacked_json(const StackedView& view) {
  ordered_json out{{"layers", view.names},
                   {"time", stacked_buckets_json(view.time)},
                   {"index", stacked_buckets_json(view.index)}};
  if (!view.other_parts.empty()) {
    out["other_parts"] = {{"layers", view.other_parts},
                          {"time", stacked_buckets_json(view.other_parts_time)},
                          {"index", stacked_buckets_json(view.other_parts_index)}};
  }
  return out;
}

// What `memsnap oom --json` says about each oom entry, for the OOM panel.
ordered_json oom_analyses_json(const std::vector<OomAnalysis>& analyses) {
  ordered_json out = ordered_json::array();
  for (const OomAnalysis& analysis : analyses) {
    ordered_json one = render_oom_json(analysis, 5);
    out.push_back(std::move(one["oom"]));
  }
  return out;
}

// The allocator panel's moments: totals as `segments --time --json` gives
// them, and the segments drawn as indices into one list of segments (each
// stored once per change of its blocks), its blocks as flat [offset, size,
// state] triples (state 0 allocated, 1 awaiting free, 2 free), addresses in
// hex (they can exceed a double's exact range). A moment's `drawn` holds
// [slot, segment, ...] pairs for the slots that differ from the moment
// before, and `drawn_count` how many it draws: most moments change one slot.
ordered_json allocator_json(const AllocatorMoments& moments) {
  if (!moments.available) return {{"available", false}, {"reason", moments.unavailable_reason}};
  ordered_json segments = ordered_json::array();
  for (const SegmentRow& row : moments.segments) {
    ordered_json blocks = ordered_json::array();
    for (const Block& block : row.blocks) {
      const int state = block.state == BlockState::kActiveAllocated     ? 0
                        : block.state == BlockState::kActivePendingFree ? 1
                                                                        : 2;
      blocks.push_back(block.address - row.address);
      blocks.push_back(block.size);
      blocks.push_back(state);
    }
    segments.push_back({{"address", fmt::format("0x{:x}", row.address)},
                        {"size", row.bytes.reserved},
                        {"pool", pool_label(row.pool)},
                        {"stream", row.stream},
                        {"kind", row.kind},
                        {"expandable", row.expandable},
                        {"allocated", row.bytes.allocated},
                        {"free", row.bytes.free},
                        {"largest_free_block", row.bytes.largest_free},
                        {"blocks", blocks}});
  }
  ordered_json list = ordered_json::array();
  const std::vector<uint32_t>* previous = nullptr;
  for (const AllocatorMoment& m : moments.moments) {
    ordered_json drawn = ordered_json::array();
    for (size_t slot = 0; slot < m.drawn.size(); ++slot) {
      if (previous != nullptr && slot < previous->size() && (*previous)[slot] == m.drawn[slot])
        continue;
      drawn.push_back(slot);
      drawn.push_back(m.drawn[slot]);
    }
    previous = &m.drawn;
    const BlockBytes& t = m.totals;
    list.push_back({{"t_s", m.time_s},
                    {"position", m.position},
                    {"reserved", t.reserved},
                    {"allocated", t.allocated},
                    {"awaiting_free", t.awaiting_free},
                    {"free", t.free},
                    {"largest_free_block", t.largest_free},
                    {"segment_count", m.segment_count},
                    {"drawn_count", m.drawn.size()},
                    {"drawn", drawn}});
  }
  return {{"available", true},
          {"exact", moments.check.exact},
          {"rounding", rounding_rule_name(moments.check.rounding)},
          {"every_change", moments.every_change},
          {"segments", segments},
          {"moments", list}};
}

ordered_json marker_json(const Marker& marker, const char* name_key, bool numeric_name) {
  ordered_json out;
  if (numeric_name) {
    out[name_key] = std::stoll(marker.name);
  } else {
    out[name_key] = marker.name;
  }
  out["start_s"] = marker.start_s;
  out["end_s"] = marker.end_s ? ordered_json(*marker.end_s) : ordered_json(nullptr);
  return out;
}

ordered_json moments_json(const LiveMoments& moments) {
  std::vector<uint32_t> counts(moments.count.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] = static_cast<uint32_t>(
        std::min<uint64_t>(moments.count[i], std::numeric_limits<uint32_t>::max()));
  }
  std::vector<uint32_t> row_begin(moments.row_begin.begin(), moments.row_begin.end());
  return {
      {"count", moments.time_us.size()},     {"time_us", base64_of(as_doubles(moments.time_us))},
      {"row_begin", base64_of(row_begin)},   {"rows", moments.source.size()},
      {"source", base64_of(moments.source)}, {"bytes", base64_of(as_doubles(moments.bytes))},
      {"alloc_count", base64_of(counts)}};
}

std::vector<double> signed_doubles(const std::vector<int64_t>& values) {
  return {values.begin(), values.end()};
}

// Event indices as u32; 0xFFFFFFFF = still live (a trace of 2^32 events
// would saturate, far beyond what one file holds in practice).
std::vector<uint32_t> events_u32(const std::vector<uint64_t>& events) {
  std::vector<uint32_t> out(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    out[i] =
        static_cast<uint32_t>(std::min<uint64_t>(events[i], std::numeric_limits<uint32_t>::max()));
  }
  return out;
}

ordered_json unlisted_json(const UnlistedMemory& unlisted) {
  return {{"rows", unlisted.rows},
          {"start_bytes", base64_of(signed_doubles(unlisted.start_bytes))},
          {"start_count", base64_of(signed_doubles(unlisted.start_count))},
          {"count", unlisted.change_us.size()},
          {"change_us", base64_of(as_doubles(unlisted.change_us))},
          {"change_event", base64_of(events_u32(unlisted.change_event))},
          {"change_row", base64_of(unlisted.change_row)},
          {"change_bytes", base64_of(signed_doubles(unlisted.change_bytes))},
          {"change_count", base64_of(signed_doubles(unlisted.change_count))}};
}

ordered_json lifetimes_json(const Lifetimes& life) {
  uint64_t latest = 0;
  for (size_t i = 0; i < life.start_us.size(); ++i) {
    latest = std::max(latest, life.start_us[i]);
    if (life.end_us[i] != Lifetimes::kStillLive) latest = std::max(latest, life.end_us[i]);
  }
  ordered_json out{{"count", life.start_us.size()}};
  const std::vector<uint64_t>& sizes = life.size;
  if (latest < std::numeric_limits<uint32_t>::max()) {
    std::vector<uint32_t> start(life.start_us.begin(), life.start_us.end());
    std::vector<uint32_t> end(life.end_us.size());
    for (size_t i = 0; i < end.size(); ++i) {
      end[i] = life.end_us[i] == Lifetimes::kStillLive ? std::numeric_limits<uint32_t>::max()
                                                       : static_cast<uint32_t>(life.end_us[i]);
    }
    out["time_type"] = "u32";
    out["start_us"] = base64_of(start);
    out["end_us"] = base64_of(end);
  } else {
    std::vector<double> start = as_doubles(life.start_us);
    std::vector<double> end(life.end_us.size());
    for (size_t i = 0; i < end.size(); ++i) {
      end[i] = life.end_us[i] == Lifetimes::kStillLive ? -1.0 : static_cast<double>(life.end_us[i]);
    }
    out["time_type"] = "f64";
    out["start_us"] = base64_of(start);
    out["end_us"] = base64_of(end);
  }
  // Sizes as u32 when every one fits (they nearly always do: 4 bytes less per
  // allocation, 1.7 MB less on a page of 330k allocations), else f64.
  if (std::all_of(sizes.begin(), sizes.end(),
                  [](uint64_t size) { return size <= std::numeric_limits<uint32_t>::max(); })) {
    out["size_type"] = "u32";
    out["size"] = base64_of(std::vector<uint32_t>(sizes.begin(), sizes.end()));
  } else {
    out["size_type"] = "f64";
    out["size"] = base64_of(as_doubles(sizes));
  }
  out["source"] = base64_of(life.source);
  out["start_event"] = base64_of(events_u32(life.start_event));
  out["end_event"] = base64_of(events_u32(life.end_event));
  return out;
}

#if MEMSNAP_HTML_PLOT
std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Fills the template's {{NAME}} placeholders in one left-to-right pass, so
// substituted text (a label, a script) is never scanned again.
std::string fill_template(
    std::string_view page,
    const std::vector<std::pair<std::string_view, std::string_view>>& values) {
  std::string out;
  out.reserve(page.size());
  std::vector<bool> used(values.size(), false);
  size_t at = 0;
  while (at < page.size()) {
    size_t open = page.find("{{", at);
    if (open == std::string_view::npos) break;
    size_t close = page.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    std::string_view name = page.substr(open + 2, close - open - 2);
    auto it =
        std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == name; });
    out.append(page.substr(at, open - at));
    if (it == values.end()) {
      out.append(page.substr(open, close + 2 - open));  // not ours (e.g. in the chart library)
    } else {
      out.append(it->second);
      used[static_cast<size_t>(it - values.begin())] = true;
    }
    at = close + 2;
  }
  out.append(page.substr(at));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!used[i])
      throw Error(
          ErrorCode::kInternalError,
          fmt::format("web/template.html lacks the placeholder {{{{{}}}}}", values[i].first));
  }
  return out;
}
#endif

}  // namespace

// A step function as the page reads it: {count, t_us, bytes} (base64 f64
// columns), null when it has no point.
// A step series as the page reads it: `x_name` (t_us or entry) and bytes,
// base64 doubles; null when empty.
ordered_json series_json(const StepSeries& series, const char* x_name) {
  if (series.t_us.empty()) return nullptr;
  std::vector<double> x(series.t_us.begin(), series.t_us.end());
  return {
      {"count", x.size()}, {x_name, base64_of(x)}, {"bytes", base64_of(as_doubles(series.bytes))}};
}

ordered_json step_series_json(const StepSeries& series) {
  return series_json(series, "t_us");
}

// Over the event axis: x is entries from the trace's first.
ordered_json entry_series_json(const StepSeries& series) {
  return series_json(series, "entry");
}

// One axis of the page's allocation view: the line's high and the band per
// column, and each item's columns (-1: not visible on this axis), in the
// order of `items` (by entry).
ordered_json page_layout_json(const AllocationLayout& layout,
                              const std::vector<DrawnAllocation>& items) {
  absl::flat_hash_map<uint64_t, const DrawnAllocation*> by_entry;
  for (const DrawnAllocation& drawn : layout.drawn) by_entry.emplace(drawn.entry, &drawn);
  std::vector<int> first;
  std::vector<int> last;
  for (const DrawnAllocation& item : items) {
    const auto found = by_entry.find(item.entry);
    first.push_back(found == by_entry.end() ? -1 : found->second->first_column);
    last.push_back(found == by_entry.end() ? -1 : found->second->last_column);
  }
  return {{"from", layout.line.window.from},
          {"to", layout.line.window.to},
          {"high", layout.line.high},
          {"band", layout.band},
          {"first", first},
          {"last", last}};
}

ordered_json page_allocations_json(const std::optional<PageAllocations>& allocations) {
  if (!allocations) return nullptr;
  const PageAllocations& a = *allocations;
  const std::vector<DrawnAllocation>& items = a.by_event.drawn;
  ordered_json frames = ordered_json::array();
  for (const AllocationFrame& frame : a.frames) {
    frames.push_back({frame.name, frame.filename, frame.line, frame.users ? 1 : 0});
  }
  std::vector<std::string> sources;
  absl::flat_hash_map<std::string_view, size_t> source_index;
  std::vector<uint64_t> entry, size;
  std::vector<int64_t> end_entry;
  std::vector<size_t> source;
  std::vector<std::string> category;
  ordered_json time_s = ordered_json::array();
  ordered_json end_time_s = ordered_json::array();
  for (const DrawnAllocation& item : items) {
    const auto [at, added] = source_index.try_emplace(item.source, sources.size());
    if (added) sources.push_back(item.source);
    entry.push_back(item.entry);
    size.push_back(item.size);
    end_entry.push_back(item.end_entry ? static_cast<int64_t>(*item.end_entry) : -1);
    source.push_back(at->second);
    category.emplace_back(category_name(item.category));
    time_s.push_back(number_or_null(item.time_s));
    end_time_s.push_back(number_or_null(item.end_time_s));
  }
  return {{"columns", a.by_event.sample.size()},
          {"budget", a.by_event.budget},
          {"complete", a.by_event.complete},
          {"frames", std::move(frames)},
          {"stacks", a.stacks},
          {"sources", sources},
          {"items",
           {{"entry", entry},
            {"size", size},
            {"end_entry", end_entry},
            {"time_s", std::move(time_s)},
            {"end_time_s", std::move(end_time_s)},
            {"source", source},
            {"category", category},
            {"stack", a.stack_of}}},
          {"event", page_layout_json(a.by_event, items)},
          {"time", a.by_time ? page_layout_json(*a.by_time, items) : ordered_json(nullptr)}};
}

namespace {

// `plot --whatif`: the simulated reserved line and what the legend says of it.
ordered_json whatif_line_json(const std::optional<SimulatedReservedLine>& line) {
  if (!line) return nullptr;
  return {{"settings", line->settings},
          {"possible", line->possible},
          {"impossible_reason",
           line->possible ? ordered_json(nullptr) : ordered_json(line->impossible_reason)},
          {"capacity", line->capacity_from == WhatIfReport::CapacityFrom::kNone
                           ? ordered_json(nullptr)
                           : ordered_json(line->capacity)},
          {"capacity_from", capacity_from_name(line->capacity_from)},
          {"peak_reserved", line->peak_reserved},
          {"recorded_peak_reserved", line->recorded_peak_reserved},
          {"model_ooms", line->model_ooms},
          {"model_segments_exact", line->model_segments_exact},
          {"start_from",
           line->start_from == StartFrom::kFreshSegments ? "fresh_segments" : "recorded_segments"},
          {"reserved", step_series_json(line->reserved)},
          {"reserved_by_entry", entry_series_json(line->reserved_by_entry)}};
}

}  // namespace

ordered_json plot_data_json(const std::vector<RunTimeline>& runs, double precision_ms) {
  ordered_json list = ordered_json::array();
  for (const RunTimeline& run : runs) {
    ordered_json steps = ordered_json::array();
    for (const Marker& m : run.steps) steps.push_back(marker_json(m, "step", true));
    ordered_json notes = ordered_json::array();
    for (const Marker& m : run.annotations) notes.push_back(marker_json(m, "name", false));
    ordered_json ooms = ordered_json::array();
    for (const OomMarker& oom : run.ooms) {
      ooms.push_back({{"t_s", oom.t_s},
                      {"requested", oom.requested},
                      {"device_free",
                       oom.device_free ? ordered_json(*oom.device_free) : ordered_json(nullptr)}});
    }
    list.push_back(
        {{"label", run.label},
         {"file", run.file},
         {"device", run.device},
         {"stats",
          {{"absolute_peak", run.absolute_peak},
           {"baseline", run.baseline},
           {"peak_delta", run.peak_delta},
           {"alloc_count", run.alloc_count},
           {"unmatched_frees", run.unmatched_frees},
           {"unmatched_free_bytes", run.unmatched_free_bytes},
           {"event_count", run.event_count},
           {"duration_s", run.duration_s},
           {"has_time", run.has_time}}},
         {"time_buckets", buckets_json(run.time_buckets, "bucket_us")},
         {"index_buckets", buckets_json(run.index_buckets, "bucket_events")},
         {"reserved", step_series_json(run.reserved)},
         {"reserved_by_entry", entry_series_json(run.reserved_by_entry)},
         {"whatif", whatif_line_json(run.whatif)},
         {"steps", steps},
         {"steps_source", steps_source_json(run.steps_origin)},
         {"annotations", notes},
         {"oom", ooms},
         {"sources", run.sources},
         // One or the other: every allocation, or live by source at moments.
         {"lifetimes", run.moments ? ordered_json{{"count", 0},
                                                  {"replaced_by_moments", run.moments->allocations}}
                                   : lifetimes_json(run.lifetimes)},
         {"moments", run.moments ? moments_json(*run.moments) : ordered_json(nullptr)},
         {"unlisted", unlisted_json(run.unlisted)},
         {"oom_analyses", oom_analyses_json(run.oom_analyses)},
         {"allocator", allocator_json(run.allocator)},
         {"free", step_series_json(run.allocator.free)},
         {"largest_free", step_series_json(run.allocator.largest_free)},
         {"stacks",
          {{"category", stacked_json(run.by_category)}, {"source", stacked_json(run.by_source)}}},
         {"allocations", page_allocations_json(run.allocations)}});
  }
  return {{"version", 1},
          {"generated_by", fmt::format("memsnap {}", kVersion)},
          {"precision_ms", precision_ms},
          {"runs", list}};
}

bool html_plot_available() {
  return MEMSNAP_HTML_PLOT != 0;
}

std::string render_plot_html(const std::vector<RunTimeline>& runs, double precision_ms) {
#if !MEMSNAP_HTML_PLOT
  (void)runs;
  (void)precision_ms;
  throw Error(
      ErrorCode::kUnavailable,
      "this memsnap was built without the HTML plot (MEMSNAP_HTML_PLOT=OFF); use plot --text");
#else
  std::string data = plot_data_json(runs, precision_ms)
                         .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  // Inside <script> a "<" can end the element or open a comment that hides
  // its end; "\u003c" is the same JSON string. "<" only occurs inside strings.
  std::string safe;
  safe.reserve(data.size());
  for (char c : data) {
    if (c == '<') {
      safe += "\\u003c";
    } else {
      safe.push_back(c);
    }
  }
  std::string title = "memsnap timeline";
  for (size_t i = 0; i < runs.size(); ++i) title += (i == 0 ? ": " : " vs ") + runs[i].label;
  // The page copies document.title into its heading: a file name's bidi
  // overrides and control characters are shown escaped, as text reports show them.
  std::string escaped_title = html_escape(printable(title));
  return fill_template(web::kTemplateHtml, {{"TITLE", escaped_title},
                                            {"UPLOT_CSS", web::kUplotCss},
                                            {"APP_CSS", web::kAppCss},
                                            {"UPLOT_JS", web::kUplotJs},
                                            {"TRANSFORMS_JS", web::kTransformsJs},
                                            {"APP_JS", web::kAppJs},
                                            {"DATA_JSON", safe}});
#endif
}

}  // namespace memsnap
