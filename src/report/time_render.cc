#include "report/time_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

std::string render_time_text(const TimeSide& s, int top) {
  std::string out = fmt::format("{}: device {}, at {:.6f} s of {:.6f} s{}\n", printable(s.file),
                                s.device, s.time_s, s.trace_duration_s,
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
  out += fmt::format("\nLive allocations by {} ({} {}, {} traced)\n", group_label(s.group),
                     format_count(s.sources.size()),
                     s.group == GroupBy::kSource ? "sources"
                     : s.sources.size() == 1     ? "row"
                                                 : "rows",
                     format_bytes(s.live_bytes));
  out += usage_table(s.sources, top, group_label(s.group));
  return out;
}

ordered_json render_time_json(const TimeSide& s, int top) {
  ordered_json out{{"file", s.file},
                   {"device", s.device},
                   {"time_s", s.time_s},
                   // The reference rounds it to 2 decimals; the full figure is memsnap's.
                   {"trace_duration_s", python_round(s.trace_duration_s, 2)},
                   {"trace_duration_precise_s", s.trace_duration_s},
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

std::string render_time_pair_text(const TimePair& pair, int top) {
  const TimeSide& a = pair.a;
  const TimeSide& b = pair.b;
  std::string out = fmt::format(
      "A: {} (device {})\nB: {} (device {})\nat {:.6f} s{}\n\n", printable(a.file), a.device,
      printable(b.file), b.device, a.time_s == b.time_s ? a.time_s : std::max(a.time_s, b.time_s),
      a.clamped || b.clamped ? " (clamped to the end of the shorter trace where needed)" : "");
  TextTable table({"", "A", "B", "B - A"}, {false, true, true, true});
  table.add_row({"time (s)", fmt::format("{:.6f}", a.time_s), fmt::format("{:.6f}", b.time_s), ""});
  table.add_row({"trace duration (s)", fmt::format("{:.6f}", a.trace_duration_s),
                 fmt::format("{:.6f}", b.trace_duration_s), ""});
  add_signed_bytes_row(table, "baseline", a.baseline, b.baseline);
  add_signed_bytes_row(table, "delta", a.delta, b.delta);
  add_signed_bytes_row(table, "absolute", a.absolute, b.absolute);
  add_count_row(table, "live allocations", a.live_count, b.live_count);
  add_count_row(table, "allocs so far", a.alloc_count, b.alloc_count);
  add_count_row(table, "frees so far", a.free_count, b.free_count);
  out += table.render();
  out += fmt::format("\nLive allocations by {}, sorted by |B - A|\n", group_label(pair.group));
  out += diff_table(pair.sources.rows, top, group_label(pair.group));
  const OnlyOnOneSide& oa = pair.sources.only_a;
  const OnlyOnOneSide& ob = pair.sources.only_b;
  out += fmt::format(
      "\n  only in A (> 1 MiB): {} sources, {}\n  only in B (> 1 MiB): {} sources, {}\n",
      oa.sources, format_bytes(oa.bytes), ob.sources, format_bytes(ob.bytes));
  return out;
}

ordered_json render_time_pair_json(const TimePair& pair, int top) {
  const TimeSide& a = pair.a;
  const TimeSide& b = pair.b;
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
          {"sources", diff_json(pair.sources.rows, top, true)},
          {"only_in_a", only_json(pair.sources.only_a)},
          {"only_in_b", only_json(pair.sources.only_b)}};
}

}  // namespace memsnap
