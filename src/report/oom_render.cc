#include "report/oom_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cstdlib>

#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"
#include "report/whatif_render.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

// How to get a snapshot at the moment of an OOM, for a file without one.
constexpr std::string_view kCaptureHint =
    "To capture one, record the allocator's history and dump it when an OOM happens:\n"
    "    import torch\n"
    "    torch.cuda.memory._record_memory_history(max_entries=100_000)\n"
    "    def on_oom(device, alloc, device_alloc, device_free):\n"
    "        torch.cuda.memory._dump_snapshot(f\"oom_device{device}.pickle\")\n"
    "    torch._C._cuda_attach_out_of_memory_observer(on_oom)\n";

double share(double part, double whole) {
  return whole <= 0 ? 0.0 : part / whole;
}

std::string top_growth(const OomCase& c, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < std::min(count, c.growth.size()); ++i) {
    names.push_back(fmt::format("{} (+{})", printable(c.growth[i].source),
                                format_bytes(static_cast<uint64_t>(c.growth[i].bytes))));
  }
  return names.empty() ? std::string("no source in particular")
                       : fmt::format("{}", fmt::join(names, ", "));
}

// One or two plain sentences per verdict, with the numbers behind it.
// Capacity: what was live and asked for exceeds what PyTorch and the driver had.
std::string capacity_sentence(const OomCase& c, const std::string& driver) {
  const OomState& s = c.state;
  std::string out = fmt::format(
      "Capacity: live tensors ({}) plus the request ({}) exceed what PyTorch held ({} "
      "reserved) plus what the driver had free ({}); the request lacked {}.",
      format_level_bytes(s.live), format_bytes(c.request), format_bytes(s.reserved), driver,
      format_bytes(static_cast<uint64_t>(std::max<int64_t>(c.shortfall, 0))));
  if (!c.live_by_category.empty() && c.shortfall > 0) {
    const SourceUsage& biggest = c.live_by_category.front();
    const auto lacked = static_cast<uint64_t>(c.shortfall);
    out += lacked <= biggest.bytes
               ? fmt::format(" The largest category, {} ({}), would need to shrink by {} ({}).",
                             biggest.source, format_bytes(biggest.bytes), format_bytes(lacked),
                             format_percent(share(static_cast<double>(lacked),
                                                  static_cast<double>(biggest.bytes))))
               : fmt::format(
                     " Even all of the largest category, {} ({}), would not make "
                     "room: the run needs a larger device or less of everything.",
                     biggest.source, format_bytes(biggest.bytes));
  }
  return out;
}

// Fragmentation: enough was free, in pieces.
std::string fragmentation_sentence(const OomAnalysis& r, const OomCase& c,
                                   const std::string& driver) {
  const OomState& s = c.state;
  std::string out = fmt::format(
      "Fragmentation: {} were free in this stream's segments ({} with the driver's {}), "
      "enough for the request ({}), but ",
      format_bytes(s.blocks_known() ? s.usable_free
                                    : static_cast<uint64_t>(std::max<int64_t>(s.free, 0))),
      format_bytes(c.available), driver, format_bytes(c.request));
  out += s.blocks_known()
             ? fmt::format("the largest free block was {}{}: the free memory is in pieces.",
                           format_bytes(s.largest_usable),
                           s.block_facts == BlockFacts::kApproximate ? " (approximately)" : "")
             : fmt::format(
                   "the largest free block at the OOM is not known ({} "
                   "entries after the OOM changed the allocator before the dump, and {}).",
                   format_count(s.entries_after), s.block_facts_unknown);
  out += r.expandable_segments
             ? " expandable_segments is already on; max_split_size_mb keeps large blocks "
               "from being split for small requests."
             : " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in "
               "place instead of leaving gaps; max_split_size_mb keeps large blocks whole.";
  return out;
}

std::string verdict_sentence(const OomAnalysis& r, const OomCase& c, OomVerdict verdict) {
  const OomState& s = c.state;
  const std::string driver =
      c.device_free ? format_bytes(*c.device_free) : std::string("an unrecorded amount");
  switch (verdict) {
    case OomVerdict::kCapacity: return capacity_sentence(c, driver);
    case OomVerdict::kFragmentation: return fragmentation_sentence(r, c, driver);
    case OomVerdict::kPoolsOrStreams:
      return fmt::format(
          "Private pools or other streams: {} were free or awaiting free where this request "
          "(stream {}, default pool) cannot use them ({} reserved by private pools of CUDA "
          "graphs or MemPools); the request ({}) could draw on only {}, and with them it would "
          "have fit.",
          format_bytes(c.elsewhere), c.stream, format_bytes(s.private_pool_reserved),
          format_bytes(c.request), format_bytes(c.available));
    case OomVerdict::kOutside:
      return fmt::format(
          "Outside PyTorch: the device has {} (--capacity); PyTorch reserved {} and the driver "
          "had {} free, so {} were held outside PyTorch's allocator (another process, the CUDA "
          "context, NCCL or cuBLAS workspaces): more than the request ({}).",
          format_bytes(r.capacity.value_or(0)), format_bytes(s.reserved), driver,
          format_bytes(c.outside_bytes.value_or(0)), format_bytes(c.request));
    case OomVerdict::kSpike:
      return fmt::format(
          "Spike: in the {:g} s before the OOM live memory rose by {} to {}, {} above the highest "
          "the run had survived before ({}), mostly from {}.",
          r.window_s, format_bytes(static_cast<uint64_t>(c.growth_bytes)),
          format_level_bytes(c.state.live),
          format_bytes(static_cast<uint64_t>(c.state.live - c.prior_peak.value_or(0))),
          format_level_bytes(c.prior_peak.value_or(0)), top_growth(c, 3));
    case OomVerdict::kUnexplained:
      return fmt::format(
          "Unexplained by this file: {} were available to the request ({} free in its segments, "
          "largest block {}, and the driver's {}), enough for {}. The cause is outside what the "
          "snapshot records (memory taken between the OOM and the driver's report, or a "
          "segment's allocation failing on a fragmented device).",
          format_bytes(c.available), format_bytes(s.usable_free), format_bytes(s.largest_usable),
          driver, format_bytes(c.request));
  }
  return {};
}

std::string no_oom_text(const OomAnalysis& r) {
  std::string out = fmt::format("{}: no oom entry on device {}", printable(r.file), r.device);
  if (!r.devices_with_oom.empty()) {
    out +=
        fmt::format(" (devices with one: {}; use --device)", fmt::join(r.devices_with_oom, ", "));
  }
  out += ".\n";
  if (r.malformed_entries != 0) {
    out += fmt::format(
        "{} malformed trace entries were skipped (an oom entry with a size or address that is "
        "none is one); `memsnap parse` lists the file's warnings.\n",
        r.malformed_entries);
  }
  if (r.event_count == 0) {
    out +=
        "This file records no allocation history for the device (a segments-only snapshot, "
        "or recording was off), so it cannot show an OOM.\n";
  }
  out +=
      "`memsnap oom --at peak` gives the same analysis at the run's peak (for a dump written "
      "at an OOM without an oom entry, e.g. by PyTorch 2.0, that is the state it shows).\n";
  out += std::string(kCaptureHint);
  return out;
}

// What the allocator held at the moment's state, by where the blocks are known from.
std::string block_facts_note(const OomState& s, std::string_view moment) {
  switch (s.block_facts) {
    case BlockFacts::kDump: return "the dump";
    case BlockFacts::kReplayed:
      return fmt::format(
          "replayed to {} from the dump ({} entries after it; the replay "
          "reproduces the dump exactly)",
          moment, format_count(s.entries_after));
    case BlockFacts::kApproximate:
      return fmt::format(
          "approximate: replayed to {}, but the trace does not reproduce the "
          "dump block for block (memsnap segments --time shows why)",
          moment);
    case BlockFacts::kUnknown: break;
  }
  return {};
}

// At the peak no request failed: how close the run came instead.
std::string headroom_sentence(const OomAnalysis& r, const OomCase& c) {
  const OomState& s = c.state;
  std::string out =
      fmt::format("At the peak {} were live in {} reserved, {} free in segments",
                  format_level_bytes(s.live), format_bytes(s.reserved), format_level_bytes(s.free));
  if (s.blocks_known()) {
    out += fmt::format(
        "; the largest free block on stream {} of the default pool was {}: a larger request "
        "needed a new segment",
        c.stream, format_bytes(s.largest_usable));
  }
  out += ".";
  if (r.capacity) {
    const int64_t room = static_cast<int64_t>(*r.capacity) - static_cast<int64_t>(s.reserved);
    out += fmt::format(
        " The device has {} (--capacity): {} {} what PyTorch reserved, the most new segments "
        "could have taken (less the CUDA context and other processes).",
        format_bytes(*r.capacity), format_bytes(static_cast<uint64_t>(std::abs(room))),
        room >= 0 ? "beyond" : "short of");
  }
  if (!c.live_by_category.empty()) {
    const SourceUsage& biggest = c.live_by_category.front();
    out += fmt::format(" The largest category: {} ({}, {} of the live bytes).", biggest.source,
                       format_bytes(biggest.bytes),
                       format_percent(share(static_cast<double>(biggest.bytes),
                                            static_cast<double>(std::max<int64_t>(s.live, 0)))));
  }
  return out;
}

std::string moment_heading(const OomAnalysis& r, const OomCase& c) {
  const std::string when = c.has_time ? fmt::format(" at {:.6f} s", c.time_s) : "";
  if (!r.at_peak) {
    return fmt::format("{}: device {}, out of memory (oom entry {} of {}, event {}{})\n",
                       printable(r.file), r.device, c.ordinal, r.oom_count, format_count(c.event),
                       when);
  }
  if (c.at_trace_start) {
    return fmt::format(
        "{}: device {}, at the peak, which is the trace's start (no traced "
        "allocation rose above it{})\n",
        printable(r.file), r.device,
        c.state.dump_is_oom_state ? "; the dump holds the same state" : "");
  }
  return fmt::format("{}: device {}, at the peak (event {}{})\n", printable(r.file), r.device,
                     format_count(c.event), when);
}

// The request and the verdict (an OOM), or the allocation that reached the
// peak and the headroom (--at peak).
void write_request(const OomAnalysis& r, const OomCase& c, std::string& out) {
  if (!r.at_peak) {
    out += "\nThe request\n";
    TextTable request({"", "", ""}, {false, true, false});
    request.add_row({"size", format_bytes(c.request), fmt::format("on stream {}", c.stream)});
    request.add_row({"device free", c.device_free ? format_bytes(*c.device_free) : "not recorded",
                     "the driver's free memory at the OOM"});
    request.add_row({"source", printable(c.request_source), c.request_category});
    std::string rendered = request.render();
    out += rendered.substr(rendered.find('\n') + 1);
    out += fmt::format("\nVerdict: {}\n", verdict_name(c.verdicts.front()));
    for (size_t i = 0; i < c.verdicts.size(); ++i) {
      out += fmt::format("  {}{}\n", i == 0 ? "" : "Also: ", verdict_sentence(r, c, c.verdicts[i]));
    }
    if (r.prediction) out += fmt::format("  What-if: {}.\n", prediction_text(*r.prediction));
  } else {
    if (!c.at_trace_start) {
      out += "\nThe allocation that reached the peak\n";
      TextTable request({"", "", ""}, {false, true, false});
      request.add_row({"size", format_bytes(c.request), fmt::format("on stream {}", c.stream)});
      request.add_row({"source", printable(c.request_source), c.request_category});
      std::string rendered = request.render();
      out += rendered.substr(rendered.find('\n') + 1);
    }
    out += "\nHeadroom\n  " + headroom_sentence(r, c) + "\n";
  }
}

// The allocator at the moment: reserved, live, free, the largest usable
// block, the peaks before; by pool and stream where there are several.
void write_allocator(const OomAnalysis& r, const OomCase& c, std::string& out) {
  const OomState& s = c.state;
  const std::string_view moment = r.at_peak ? "the peak" : "the OOM";
  out += fmt::format("\nThe allocator at {}\n", moment);
  TextTable facts({"", "", ""}, {false, true, false});
  facts.add_row({"reserved", format_bytes(s.reserved), ""});
  facts.add_row({"live (allocated)", format_level_bytes(s.live),
                 fmt::format("baseline + delta at {}", moment)});
  facts.add_row(
      {"awaiting free", format_bytes(s.awaiting_free), "traced blocks freed, stream work pending"});
  facts.add_row(
      {"free in segments", format_level_bytes(s.free), "reserved - live - awaiting free"});
  if (s.blocks_known()) {
    facts.add_row({"largest usable block", format_bytes(s.largest_usable),
                   fmt::format("default pool, stream {}", c.stream)});
    facts.add_row(
        {"free elsewhere", format_bytes(s.elsewhere_free), "private pools and other streams"});
    facts.add_row({"blocks from", "", block_facts_note(s, moment)});
  } else {
    facts.add_row({"largest free block", "unknown",
                   fmt::format("{} entries after {} changed the allocator before the dump, and {}",
                               format_count(s.entries_after), moment, s.block_facts_unknown)});
  }
  if (c.outside_bytes && !r.at_peak) {
    facts.add_row(
        {"outside PyTorch", format_bytes(*c.outside_bytes), "--capacity - reserved - device free"});
  }
  const int64_t gave = static_cast<int64_t>(s.reserved + c.device_free.value_or(0));
  const std::string gave_label =
      r.at_peak ? "reserved at the peak" : "reserved + device free at the OOM";
  if (c.prior_peak) {
    const int64_t margin = gave - *c.prior_peak;
    facts.add_row({"peak before", format_level_bytes(*c.prior_peak),
                   fmt::format("highest before the last {:g} s; {} {} {}", r.window_s,
                               format_bytes(static_cast<uint64_t>(std::abs(margin))),
                               margin >= 0 ? "below" : "above", gave_label)});
  }
  if (c.prior_step_peak) {
    const int64_t margin = gave - *c.prior_step_peak;
    facts.add_row(
        {"peak of step " + std::to_string(*c.prior_step), format_level_bytes(*c.prior_step_peak),
         fmt::format("the highest complete step before {}{}; {} {} {}", moment,
                     c.oom_step ? fmt::format(" (which came in step {})", *c.oom_step) : "",
                     format_bytes(static_cast<uint64_t>(std::abs(margin))),
                     margin >= 0 ? "below" : "above", gave_label)});
  }
  std::string rendered = facts.render();
  out += rendered.substr(rendered.find('\n') + 1);
  if (s.blocks_known() && s.groups.size() > 1) {
    out += "\nBy pool and stream\n";
    TextTable groups({"pool", "stream", "reserved", "allocated", "free", "largest free"},
                     {false, true, true, true, true, true});
    for (const PoolStreamRow& g : s.groups) {
      groups.add_row({pool_label(g.pool), std::to_string(g.stream), format_bytes(g.bytes.reserved),
                      format_bytes(g.bytes.allocated), format_bytes(g.bytes.free),
                      format_bytes(g.bytes.largest_free)});
    }
    out += groups.render();
  }
}

// Live at the moment by category and by source, and what grew in the window.
void write_live(const OomAnalysis& r, const OomCase& c, int top, std::string& out) {
  const std::string_view moment = r.at_peak ? "the peak" : "the OOM";
  const std::string from_blocks =
      c.live_from_blocks         ? " (from the dump's blocks: the trace does not cover them)"
      : c.live_includes_baseline ? " (memory from before the trace under its own source)"
                                 : "";
  out += fmt::format("\nLive at {} by category{}\n", moment, from_blocks);
  out += usage_table(c.live_by_category, top, "category");
  out += fmt::format("\nLive at {} by {}{}\n", moment, group_label(GroupBy::kSource), from_blocks);
  out += usage_table(c.live_by_source, top, "source");
  if (c.has_time && !c.at_trace_start) {
    out += fmt::format("\nGrew in the {:g} s before {} ({} in all)\n", r.window_s, moment,
                       format_signed_bytes(c.growth_bytes));
    TextTable growth({"bytes", "source"}, {true, false});
    for (size_t i = 0; i < std::min(c.growth.size(), static_cast<size_t>(std::max(top, 0))); ++i) {
      growth.add_row({format_signed_bytes(c.growth[i].bytes), printable(c.growth[i].source)});
    }
    out += growth.empty() ? "  nothing grew\n" : growth.render();
  }
}

}  // namespace

std::string render_oom_text(const OomAnalysis& r, int top) {
  if (!r.chosen) return no_oom_text(r);
  const OomCase& c = *r.chosen;
  std::string out = moment_heading(r, c);
  write_request(r, c, out);
  write_allocator(r, c, out);
  write_live(r, c, top, out);
  return out;
}

namespace {

// The allocator at the moment: its totals, what the blocks tell, its pools.
ordered_json oom_state_json(const OomState& s) {
  const bool known = s.blocks_known();
  ordered_json groups = ordered_json::array();
  for (const PoolStreamRow& g : s.groups) {
    groups.push_back({{"pool", {g.pool.first, g.pool.second}},
                      {"pool_label", pool_label(g.pool)},
                      {"stream", g.stream},
                      {"reserved", g.bytes.reserved},
                      {"allocated", g.bytes.allocated},
                      {"awaiting_free", g.bytes.awaiting_free},
                      {"free", g.bytes.free},
                      {"largest_free_block", g.bytes.largest_free}});
  }
  return {
      {"reserved", s.reserved},
      {"live", s.live},
      {"awaiting_free", s.awaiting_free},
      {"free", s.free},
      {"dump_is_oom_state", s.dump_is_oom_state},
      {"entries_after", s.entries_after},
      {"block_facts", block_facts_name(s.block_facts)},
      {"block_facts_unknown", known ? ordered_json(nullptr) : ordered_json(s.block_facts_unknown)},
      {"usable_free", known ? ordered_json(s.usable_free) : ordered_json(nullptr)},
      {"largest_usable_block", known ? ordered_json(s.largest_usable) : ordered_json(nullptr)},
      {"elsewhere_free", known ? ordered_json(s.elsewhere_free) : ordered_json(nullptr)},
      {"private_pool_reserved", s.private_pool_reserved},
      {"pools", groups}};
}

}  // namespace

ordered_json render_oom_json(const OomAnalysis& r, int top) {
  ordered_json out{{"file", r.file},
                   {"device", r.device},
                   {"oom_count", r.oom_count},
                   {"malformed_entries", r.malformed_entries},
                   {"devices_with_oom", r.devices_with_oom},
                   {"window_s", r.window_s},
                   {"capacity", r.capacity ? ordered_json(*r.capacity) : ordered_json(nullptr)},
                   {"expandable_segments", r.expandable_segments},
                   {"moment", r.at_peak ? "peak" : "oom"}};
  if (!r.chosen) {
    out["oom"] = nullptr;
    return out;
  }
  const OomCase& c = *r.chosen;
  const OomState& s = c.state;
  ordered_json verdicts = ordered_json::array();
  for (OomVerdict v : c.verdicts) {
    verdicts.push_back({{"verdict", verdict_name(v)}, {"sentence", verdict_sentence(r, c, v)}});
  }
  ordered_json growth = ordered_json::array();
  for (size_t i = 0; i < std::min(c.growth.size(), static_cast<size_t>(std::max(top, 0))); ++i) {
    growth.push_back({{"source", c.growth[i].source}, {"bytes", c.growth[i].bytes}});
  }
  ordered_json moment = {
      {"ordinal", c.ordinal},
      {"event", c.event},
      {"time_s", c.has_time ? ordered_json(c.time_s) : ordered_json(nullptr)},
      {"request", c.request},
      {"stream", c.stream},
      {"device_free", c.device_free ? ordered_json(*c.device_free) : ordered_json(nullptr)},
      {"request_source", c.request_source},
      {"request_category", c.request_category},
      {"verdict",
       c.verdicts.empty() ? ordered_json(nullptr) : ordered_json(verdict_name(c.verdicts.front()))},
      {"verdicts", verdicts},
      {"whatif", prediction_json(r.prediction)},
      {"headroom", r.at_peak ? ordered_json(headroom_sentence(r, c)) : ordered_json(nullptr)},
      {"shortfall", c.shortfall},
      {"available", c.available},
      {"elsewhere", c.elsewhere},
      {"outside_pytorch", c.outside_bytes ? ordered_json(*c.outside_bytes) : ordered_json(nullptr)},
      {"state", oom_state_json(s)},
      {"live_from_blocks", c.live_from_blocks},
      {"live_includes_baseline", c.live_includes_baseline},
      {"live_by_category", usage_json(c.live_by_category, top)},
      {"live_by_source", usage_json(c.live_by_source, top)},
      {"growth_bytes", c.has_time ? ordered_json(c.growth_bytes) : ordered_json(nullptr)},
      {"prior_peak", c.prior_peak ? ordered_json(*c.prior_peak) : ordered_json(nullptr)},
      {"oom_step", c.oom_step ? ordered_json(*c.oom_step) : ordered_json(nullptr)},
      {"prior_step", c.prior_step ? ordered_json(*c.prior_step) : ordered_json(nullptr)},
      {"prior_step_peak",
       c.prior_step_peak ? ordered_json(*c.prior_step_peak) : ordered_json(nullptr)},
      {"growth", growth}};
  if (r.at_peak) {
    moment["at_trace_start"] = c.at_trace_start;
    if (c.at_trace_start) {  // no entry made the peak: nothing to name
      for (const char* key : {"event", "request", "request_source", "request_category"})
        moment[key] = nullptr;
    }
    out["oom"] = nullptr;
    out["peak"] = std::move(moment);
  } else {
    out["oom"] = std::move(moment);
  }
  return out;
}

std::string render_oom_ranks_text(const OomRanks& ranks, int top) {
  size_t with_oom = 0;
  for (const OomRankRow& row : ranks.rows) with_oom += row.oom_count > 0 ? 1 : 0;
  std::string out = fmt::format("{} of {} files ran out of memory\n", with_oom, ranks.rows.size());
  TextTable table({"rank", "device", "ooms", "verdict", "request", "device free", "live", "first"},
                  {false, true, true, false, true, true, true, false});
  for (size_t i = 0; i < ranks.rows.size(); ++i) {
    const OomRankRow& row = ranks.rows[i];
    if (!row.error.empty()) {
      table.add_row(
          {printable(row.name), "", "", "unreadable: " + printable(row.error), "", "", "", ""});
      continue;
    }
    if (row.oom_count == 0) {
      table.add_row({printable(row.name), std::to_string(row.device), "0", "", "", "", "", ""});
      continue;
    }
    table.add_row({printable(row.name), std::to_string(row.device), format_count(row.oom_count),
                   row.verdict ? std::string(verdict_name(*row.verdict)) : "",
                   format_bytes(row.request),
                   row.device_free ? format_bytes(*row.device_free) : "not recorded",
                   format_level_bytes(row.live), ranks.first == i ? "<- first in time" : ""});
  }
  out += table.render();
  if (ranks.first_oom) {
    out += fmt::format("\nThe first OOM in time: {}\n\n", printable(ranks.rows[*ranks.first].file));
    out += render_oom_text(*ranks.first_oom, top);
  }
  return out;
}

nlohmann::ordered_json render_oom_ranks_json(const OomRanks& ranks, int top) {
  ordered_json rows = ordered_json::array();
  for (const OomRankRow& row : ranks.rows) {
    rows.push_back(
        {{"file", row.file},
         {"name", row.name},
         {"rank", row.rank ? ordered_json(*row.rank) : ordered_json(nullptr)},
         {"error", text_or_null(row.error)},
         {"device", row.device},
         {"oom_count", row.oom_count},
         {"verdict", row.verdict ? ordered_json(std::string(verdict_name(*row.verdict)))
                                 : ordered_json(nullptr)},
         {"request", row.oom_count > 0 ? ordered_json(row.request) : ordered_json(nullptr)},
         {"device_free", row.device_free ? ordered_json(*row.device_free) : ordered_json(nullptr)},
         {"live", row.oom_count > 0 ? ordered_json(row.live) : ordered_json(nullptr)},
         {"time_us", row.time_us != 0 ? ordered_json(row.time_us) : ordered_json(nullptr)}});
  }
  return {{"ranks", rows},
          {"first", ranks.first ? ordered_json(*ranks.first) : ordered_json(nullptr)},
          {"first_oom",
           ranks.first_oom ? render_oom_json(*ranks.first_oom, top) : ordered_json(nullptr)}};
}

}  // namespace memsnap
