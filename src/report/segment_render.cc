#include "report/segment_render.h"

#include <fmt/format.h>
#include <algorithm>

#include "report/format.h"
#include "report/json_fields.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

double share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// The pool and stream holding the largest free block (the first of equals).
const PoolStreamRow* largest_free_group(const SegmentReport& report) {
  const PoolStreamRow* best = nullptr;
  for (const PoolStreamRow& group : report.groups) {
    if (group.bytes.largest_free > 0 &&
        (best == nullptr || group.bytes.largest_free > best->bytes.largest_free)) {
      best = &group;
    }
  }
  return best;
}

size_t shown(size_t count, int top) {
  return top < 0 ? count : std::min(count, static_cast<size_t>(top));
}

ordered_json pool_json(PoolId pool) {
  return ordered_json::array({pool.first, pool.second});
}

std::string moment_text(const SegmentReport& r) {
  if (r.at_dump) return "at the dump";
  return fmt::format(
      "{:.6f} s after the trace's first entry (after {} entries; replayed from the dump)", r.time_s,
      format_count(r.position));
}

std::string history_text(const HistoryCheck& h) {
  if (!h.possible) return fmt::format("  history: cannot be replayed: {}\n", h.impossible_reason);
  if (h.entries == 0) {
    return "  history: the trace has no allocator entries for this device: the dump is the only "
           "state known\n";
  }
  std::string before = "the allocator was empty before the first entry";
  if (h.ranges_at_start > 0) {
    before = fmt::format(
        "{} segments and {} blocks were there before the first entry (recording started late or "
        "the ring buffer wrapped){}",
        format_count(h.ranges_at_start), format_count(h.blocks_at_start),
        h.inferred_sizes == 0
            ? ""
            : fmt::format("; {} blocks allocated before it and freed in it have the split rule's "
                          "size",
                          format_count(h.inferred_sizes)));
  }
  const std::string rule =
      h.rounding == RoundingRule::kNpu ? " (with torch_npu's rounding: request + 32 bytes)" : "";
  if (h.exact && h.misfits_back == 0 && h.misfits_forward == 0) {
    return fmt::format(
        "  history: the trace's {} allocator entries replay to the dump block for "
        "block{}; {}\n",
        format_count(h.entries), rule, before);
  }
  std::string out = fmt::format(
      "  history: replaying the trace's {} allocator entries does not reproduce the dump "
      "exactly ({} differences, {} entries that did not fit); states at other times are "
      "approximate; {}\n",
      format_count(h.entries), format_count(h.differences),
      format_count(h.misfits_back + h.misfits_forward), before);
  if (!h.first_difference.empty())
    out += fmt::format("    first difference: {}\n", h.first_difference);
  return out;
}

ordered_json history_json(const std::optional<HistoryCheck>& history) {
  if (!history) return nullptr;
  const HistoryCheck& h = *history;
  return {{"replayable", h.possible},
          {"reason", h.possible ? ordered_json(nullptr) : ordered_json(h.impossible_reason)},
          {"entries", h.entries},
          {"rounding", rounding_rule_name(h.rounding)},
          {"misfits_backward", h.misfits_back},
          {"misfits_forward", h.misfits_forward},
          {"segments_at_start", h.ranges_at_start},
          {"blocks_at_start", h.blocks_at_start},
          {"inferred_block_sizes", h.inferred_sizes},
          {"exact", h.exact},
          {"differences", h.differences},
          {"first_difference", text_or_null(h.first_difference)}};
}

}  // namespace

ordered_json block_bytes_json(const BlockBytes& bytes) {
  return {{"reserved", bytes.reserved},
          {"allocated", bytes.allocated},
          {"awaiting_free", bytes.awaiting_free},
          {"free", bytes.free},
          {"requested", bytes.requested},
          {"rounding", bytes.rounding},
          {"largest_free_block", bytes.largest_free},
          {"blocks", bytes.blocks}};
}

namespace {

// The totals, each figure saying what it counts.
TextTable totals_table(const SegmentReport& r) {
  const BlockBytes& t = r.totals;
  // Each figure says what it counts and, where PyTorch's `_memory_viz stats`
  // (segsum) prints the same bytes, its name there: segsum's total_allocated
  // is requested bytes, not block bytes, and its "free external" includes the
  // blocks awaiting free.
  TextTable facts({"", "", ""}, {false, true, false});
  facts.add_row({"reserved", format_bytes(t.reserved), "segsum's total_reserved"});
  facts.add_row({"allocated blocks", format_bytes(t.allocated),
                 "bytes of the blocks in use, rounding included"});
  // A block whose request is unknown counts at its size, as segsum counts it.
  facts.add_row({"requested", format_bytes(t.allocated - t.rounding),
                 "what those allocations asked for: segsum's total_allocated"});
  facts.add_row(
      {"rounding", format_bytes(t.rounding),
       fmt::format("{} of allocated blocks: internal fragmentation (segsum's free internal)",
                   format_percent(share(t.rounding, t.allocated)))});
  facts.add_row({"awaiting free", format_bytes(t.awaiting_free),
                 "freed by the program, stream work still pending"});
  facts.add_row({"free (inactive)", format_bytes(t.free),
                 fmt::format("{} of reserved: external fragmentation",
                             format_percent(share(t.free, t.reserved)))});
  facts.add_row({"free + awaiting free", format_bytes(t.free + t.awaiting_free),
                 "segsum's free external (it counts blocks awaiting free as free)"});
  if (const PoolStreamRow* group = largest_free_group(r)) {
    facts.add_row({"largest free block", format_bytes(group->bytes.largest_free),
                   fmt::format("{}, stream {}", pool_label(group->pool), group->stream)});
  } else if (r.blocks_known) {
    facts.add_row({"largest free block", "none", "no free block in any segment"});
  }
  return facts;
}

// The totals by pool and stream.
std::string groups_text(const SegmentReport& r) {
  std::string out;
  out += "\nBy pool and stream\n";
  TextTable groups({"pool", "stream", "segments", "reserved", "allocated blocks", "awaiting free",
                    "free", "largest free"},
                   {false, true, true, true, true, true, true, true});
  for (const PoolStreamRow& g : r.groups) {
    groups.add_row({pool_label(g.pool), std::to_string(g.stream), format_count(g.segments),
                    format_bytes(g.bytes.reserved), format_bytes(g.bytes.allocated),
                    format_bytes(g.bytes.awaiting_free), format_bytes(g.bytes.free),
                    format_bytes(g.bytes.largest_free)});
  }
  out += groups.render();

  return out;
}

// The segments, largest first, each with its fill map.
std::string segment_rows_text(const SegmentReport& r, int top) {
  std::string out;
  const size_t rows = shown(r.segments.size(), top);
  out += fmt::format(
      "\nSegments, largest first ({} of {}); fill: # allocated, . free, ~ awaiting free, "
      "1-9 tenths allocated\n",
      format_count(rows), format_count(r.segments.size()));
  TextTable table({"address", "kind", "pool", "stream", "reserved", "allocated blocks", "free",
                   "largest free", "fill"},
                  {false, false, false, true, true, true, true, true, false});
  for (size_t i = 0; i < rows; ++i) {
    const SegmentRow& s = r.segments[i];
    std::string kind = s.kind.empty() ? "-" : printable(s.kind);
    if (s.expandable) kind += ", expandable";
    table.add_row({fmt::format("0x{:x}", s.address), kind, pool_label(s.pool),
                   std::to_string(s.stream), format_bytes(s.bytes.reserved),
                   format_bytes(s.bytes.allocated), format_bytes(s.bytes.free),
                   format_bytes(s.bytes.largest_free), "|" + s.fill + "|"});
  }
  out += table.render();
  if (rows < r.segments.size()) {
    out +=
        fmt::format("  ... {} more (--top N shows more)\n", format_count(r.segments.size() - rows));
  }
  return out;
}

}  // namespace

std::string render_segments_text(const SegmentReport& r, int top) {
  const BlockBytes& t = r.totals;
  std::string out = fmt::format("{}: device {}, the allocator {}: {} segments, {} blocks\n",
                                printable(r.file), r.device, moment_text(r),
                                format_count(r.segments.size()), format_count(t.blocks));
  if (!r.at_dump && r.requested_time_s > r.time_s) {
    out += fmt::format("  (--time {} is past the trace's end: shown at its last entry)\n",
                       r.requested_time_s);
  }
  if (r.segments.empty()) {
    out += r.at_dump ? "  no segments on this device (the snapshot has no allocator state for it)\n"
                     : "  no segments at that moment\n";
    if (r.history) out += history_text(*r.history);
    return out;
  }
  const TextTable facts = totals_table(r);
  std::string rendered = facts.render();
  out += rendered.substr(rendered.find('\n') + 1);
  out +=
      "  (segsum: PyTorch's own summary of these segments, `python -m torch.cuda._memory_viz "
      "stats FILE`; its names are given where it prints the same bytes)\n";
  if (r.history) out += history_text(*r.history);
  if (!r.blocks_known) {
    out +=
        "  (some segments list no blocks: their sizes come from the segment's own fields, "
        "and their free blocks are unknown)\n";
  }

  out += groups_text(r);
  out += segment_rows_text(r, top);
  return out;
}

ordered_json render_segments_json(const SegmentReport& r, int top) {
  const BlockBytes& t = r.totals;
  ordered_json largest = nullptr;
  if (const PoolStreamRow* group = largest_free_group(r)) {
    largest = {{"bytes", group->bytes.largest_free},
               {"pool", pool_json(group->pool)},
               {"stream", group->stream}};
  }
  ordered_json groups = ordered_json::array();
  for (const PoolStreamRow& g : r.groups) {
    ordered_json row{{"pool", pool_json(g.pool)},
                     {"pool_label", pool_label(g.pool)},
                     {"stream", g.stream},
                     {"segments", g.segments}};
    row.update(block_bytes_json(g.bytes));
    groups.push_back(std::move(row));
  }
  ordered_json segments = ordered_json::array();
  for (size_t i = 0; i < shown(r.segments.size(), top); ++i) {
    const SegmentRow& s = r.segments[i];
    ordered_json row{{"address", s.address},      {"kind", s.kind},
                     {"pool", pool_json(s.pool)}, {"pool_label", pool_label(s.pool)},
                     {"stream", s.stream},        {"expandable", s.expandable}};
    row.update(block_bytes_json(s.bytes));
    row["fill"] = s.fill;
    segments.push_back(std::move(row));
  }
  return {
      {"file", r.file},
      {"device", r.device},
      {"at", r.at_dump ? "dump" : "time"},
      {"time_s", r.at_dump ? ordered_json(nullptr) : ordered_json(r.time_s)},
      {"requested_time_s", r.at_dump ? ordered_json(nullptr) : ordered_json(r.requested_time_s)},
      {"position", r.at_dump ? ordered_json(nullptr) : ordered_json(r.position)},
      {"history", history_json(r.history)},
      {"blocks_known", r.blocks_known},
      {"segment_count", r.segments.size()},
      {"totals", block_bytes_json(t)},
      {"external_fragmentation", share(t.free, t.reserved)},
      {"internal_fragmentation", share(t.rounding, t.allocated)},
      {"largest_free_block", largest},
      {"pools", groups},
      {"segments", segments}};
}

nlohmann::ordered_json render_segment_timeline_json(const SegmentTimeline& timeline) {
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  const auto entry_or_null = [](const std::optional<uint64_t>& entry) {
    return entry ? nlohmann::ordered_json(*entry) : nlohmann::ordered_json(nullptr);
  };
  for (const DrawnSegment& drawn : timeline.drawn) {
    const SegmentSpan& span = *drawn.span;
    nlohmann::ordered_json pool = nullptr;
    nlohmann::ordered_json label = nullptr;
    if (span.pool_known) {
      pool = {span.pool.first, span.pool.second};
      label = pool_label(span.pool);
    }
    segments.push_back({{"address", span.address},
                        {"size", span.size},
                        {"stream", span.stream},
                        {"expandable", span.expandable},
                        {"pool", pool},
                        {"pool_label", label},
                        {"first_column", drawn.first_column},
                        {"last_column", drawn.last_column},
                        {"begin_entry", entry_or_null(drawn.begin_entry)},
                        {"end_entry", entry_or_null(drawn.end_entry)}});
  }
  return {{"file", timeline.file},
          {"device", timeline.device},
          {"axis", timeline.window.axis == LineAxis::kTime ? "time" : "event"},
          {"from", timeline.window.from},
          {"to", timeline.window.to},
          {"width", timeline.window.width},
          {"reserved", timeline.reserved},
          {"peak_at", timeline.sample},
          {"band", timeline.band},
          {"segment_events", timeline.segment_events},
          {"budget", timeline.budget},
          {"complete", timeline.complete},
          {"segments", std::move(segments)}};
}

nlohmann::ordered_json render_segment_map_json(const SegmentReport& report, size_t limit) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < std::min(limit, report.segments.size()); ++i) {
    const SegmentRow& row = report.segments[i];
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (const Block& block : row.blocks) {
      blocks.push_back({block.address - row.address, block.size, static_cast<int>(block.state),
                        block.requested_size});
    }
    out.push_back({{"address", row.address},
                   {"reserved", row.bytes.reserved},
                   {"blocks", std::move(blocks)}});
  }
  return out;
}

}  // namespace memsnap
