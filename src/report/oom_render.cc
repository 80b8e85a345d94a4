#include "report/oom_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cstdlib>

#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

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

std::string bytes_signed_ok(int64_t bytes) {
  return bytes < 0 ? format_signed_bytes(bytes) : format_bytes(static_cast<uint64_t>(bytes));
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
std::string verdict_sentence(const OomAnalysis& r, const OomCase& c, OomVerdict verdict) {
  const OomState& s = c.state;
  const std::string driver =
      c.device_free ? format_bytes(*c.device_free) : std::string("an unrecorded amount");
  switch (verdict) {
    case OomVerdict::kCapacity: {
      std::string out = fmt::format(
          "Capacity: live tensors ({}) plus the request ({}) exceed what PyTorch held ({} "
          "reserved) plus what the driver had free ({}); the request lacked {}.",
          bytes_signed_ok(s.live), format_bytes(c.request), format_bytes(s.reserved), driver,
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
    case OomVerdict::kFragmentation: {
      std::string out = fmt::format(
          "Fragmentation: {} were free in this stream's segments ({} with the driver's {}), "
          "enough for the request ({}), but ",
          format_bytes(s.dump_is_oom_state ? s.usable_free
                                           : static_cast<uint64_t>(std::max<int64_t>(s.free, 0))),
          format_bytes(c.available), driver, format_bytes(c.request));
      out += s.dump_is_oom_state
                 ? fmt::format("the largest free block was {}: the free memory is in pieces.",
                               format_bytes(s.largest_usable))
                 : fmt::format(
                       "the largest free block at the OOM is not in this file ({} "
                       "entries after the OOM changed the allocator before the dump).",
                       format_count(s.entries_after));
      out += r.expandable_segments
                 ? " expandable_segments is already on; max_split_size_mb keeps large blocks "
                   "from being split for small requests."
                 : " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in "
                   "place instead of leaving gaps; max_split_size_mb keeps large blocks whole.";
      return out;
    }
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
          bytes_signed_ok(c.state.live),
          format_bytes(static_cast<uint64_t>(c.state.live - c.prior_peak.value_or(0))),
          bytes_signed_ok(c.prior_peak.value_or(0)), top_growth(c, 3));
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
  if (r.event_count == 0) {
    out +=
        "This file records no allocation history for the device (a segments-only snapshot, "
        "or recording was off), so it cannot show an OOM.\n";
  }
  out += std::string(kCaptureHint);
  return out;
}

}  // namespace

std::string render_oom_text(const OomAnalysis& r, int top) {
  if (!r.chosen) return no_oom_text(r);
  const OomCase& c = *r.chosen;
  const OomState& s = c.state;
  std::string out =
      fmt::format("{}: device {}, out of memory (oom entry {} of {}, event {}{})\n",
                  printable(r.file), r.device, c.ordinal, r.oom_count, format_count(c.event),
                  c.has_time ? fmt::format(" at {:.6f} s", c.time_s) : "");
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

  out += "\nThe allocator at the OOM\n";
  TextTable facts({"", "", ""}, {false, true, false});
  facts.add_row({"reserved", format_bytes(s.reserved), ""});
  facts.add_row({"live (allocated)", bytes_signed_ok(s.live), "baseline + delta at the OOM"});
  facts.add_row(
      {"awaiting free", format_bytes(s.awaiting_free), "traced blocks freed, stream work pending"});
  facts.add_row({"free in segments", bytes_signed_ok(s.free), "reserved - live - awaiting free"});
  if (s.dump_is_oom_state) {
    facts.add_row({"largest usable block", format_bytes(s.largest_usable),
                   fmt::format("default pool, stream {}", c.stream)});
    facts.add_row(
        {"free elsewhere", format_bytes(s.elsewhere_free), "private pools and other streams"});
  } else {
    facts.add_row({"largest free block", "unknown",
                   fmt::format("{} entries after the OOM changed the allocator before the dump",
                               format_count(s.entries_after))});
  }
  if (c.outside_bytes) {
    facts.add_row(
        {"outside PyTorch", format_bytes(*c.outside_bytes), "--capacity - reserved - device free"});
  }
  if (c.prior_peak) {
    const int64_t gave = static_cast<int64_t>(s.reserved + c.device_free.value_or(0));
    const int64_t margin = gave - *c.prior_peak;
    facts.add_row({"peak before", bytes_signed_ok(*c.prior_peak),
                   fmt::format("highest before the last {:g} s; {} {} reserved + device free at "
                               "the OOM",
                               r.window_s, format_bytes(static_cast<uint64_t>(std::abs(margin))),
                               margin >= 0 ? "below" : "above")});
  }
  if (c.prior_step_peak) {
    const int64_t gave = static_cast<int64_t>(s.reserved + c.device_free.value_or(0));
    const int64_t margin = gave - *c.prior_step_peak;
    facts.add_row(
        {"peak of step " + std::to_string(*c.prior_step), bytes_signed_ok(*c.prior_step_peak),
         fmt::format("the highest complete step before the OOM{}; {} {} reserved + "
                     "device free at the OOM",
                     c.oom_step ? fmt::format(" (which came in step {})", *c.oom_step) : "",
                     format_bytes(static_cast<uint64_t>(std::abs(margin))),
                     margin >= 0 ? "below" : "above")});
  }
  rendered = facts.render();
  out += rendered.substr(rendered.find('\n') + 1);
  if (s.dump_is_oom_state && s.groups.size() > 1) {
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

  out += "\nLive at the OOM by category\n";
  out += usage_table(c.live_by_category, top, "category");
  out += fmt::format("\nLive at the OOM by {}\n", group_label(GroupBy::kSource));
  out += usage_table(c.live_by_source, top, "source");
  if (c.has_time) {
    out += fmt::format("\nGrew in the {:g} s before the OOM ({} in all)\n", r.window_s,
                       format_signed_bytes(c.growth_bytes));
    TextTable growth({"bytes", "source"}, {true, false});
    for (size_t i = 0; i < std::min(c.growth.size(), static_cast<size_t>(std::max(top, 0))); ++i) {
      growth.add_row({format_signed_bytes(c.growth[i].bytes), printable(c.growth[i].source)});
    }
    out += growth.empty() ? "  nothing grew\n" : growth.render();
  }
  return out;
}

ordered_json render_oom_json(const OomAnalysis& r, int top) {
  ordered_json out{{"file", r.file},
                   {"device", r.device},
                   {"oom_count", r.oom_count},
                   {"devices_with_oom", r.devices_with_oom},
                   {"window_s", r.window_s},
                   {"capacity", r.capacity ? ordered_json(*r.capacity) : ordered_json(nullptr)},
                   {"expandable_segments", r.expandable_segments}};
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
  ordered_json growth = ordered_json::array();
  for (size_t i = 0; i < std::min(c.growth.size(), static_cast<size_t>(std::max(top, 0))); ++i) {
    growth.push_back({{"source", c.growth[i].source}, {"bytes", c.growth[i].bytes}});
  }
  out["oom"] = {
      {"ordinal", c.ordinal},
      {"event", c.event},
      {"time_s", c.has_time ? ordered_json(c.time_s) : ordered_json(nullptr)},
      {"request", c.request},
      {"stream", c.stream},
      {"device_free", c.device_free ? ordered_json(*c.device_free) : ordered_json(nullptr)},
      {"request_source", c.request_source},
      {"request_category", c.request_category},
      {"verdict", verdict_name(c.verdicts.front())},
      {"verdicts", verdicts},
      {"shortfall", c.shortfall},
      {"available", c.available},
      {"elsewhere", c.elsewhere},
      {"outside_pytorch", c.outside_bytes ? ordered_json(*c.outside_bytes) : ordered_json(nullptr)},
      {"state",
       {{"reserved", s.reserved},
        {"live", s.live},
        {"awaiting_free", s.awaiting_free},
        {"free", s.free},
        {"dump_is_oom_state", s.dump_is_oom_state},
        {"entries_after", s.entries_after},
        {"usable_free", s.dump_is_oom_state ? ordered_json(s.usable_free) : ordered_json(nullptr)},
        {"largest_usable_block",
         s.dump_is_oom_state ? ordered_json(s.largest_usable) : ordered_json(nullptr)},
        {"elsewhere_free",
         s.dump_is_oom_state ? ordered_json(s.elsewhere_free) : ordered_json(nullptr)},
        {"private_pool_reserved", s.private_pool_reserved},
        {"pools", groups}}},
      {"live_by_category", usage_json(c.live_by_category, top)},
      {"live_by_source", usage_json(c.live_by_source, top)},
      {"growth_bytes", c.has_time ? ordered_json(c.growth_bytes) : ordered_json(nullptr)},
      {"prior_peak", c.prior_peak ? ordered_json(*c.prior_peak) : ordered_json(nullptr)},
      {"oom_step", c.oom_step ? ordered_json(*c.oom_step) : ordered_json(nullptr)},
      {"prior_step", c.prior_step ? ordered_json(*c.prior_step) : ordered_json(nullptr)},
      {"prior_step_peak",
       c.prior_step_peak ? ordered_json(*c.prior_step_peak) : ordered_json(nullptr)},
      {"growth", growth}};
  return out;
}

}  // namespace memsnap
