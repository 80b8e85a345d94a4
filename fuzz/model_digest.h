// A text digest of a decoded model by content (strings, frames and stacks
// spelled out, not their ids), for checking that two ways of decoding one
// file give the same model: ids may differ (interning order), content not.
#pragma once

#include <fmt/format.h>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "memsnap/model.h"

namespace memsnap::testing {

inline std::string stack_text(const Snapshot& s, StackId stack) {
  std::string out;
  for (FrameId id : s.stacks.get(stack)) {
    const Frame& f = s.frames.get(id);
    out += fmt::format("{}@{}:{}~{};", s.strings.get(f.name), s.strings.get(f.filename), f.line,
                       s.strings.get(f.fx_original_trace));
  }
  return out;
}

template <typename Map, typename Text>
void sparse_digest(std::string& out, const char* what, const Map& map, Text&& text) {
  std::vector<std::pair<uint64_t, std::string>> rows;
  for (const auto& [index, value] : map) rows.emplace_back(index, text(value));
  std::sort(rows.begin(), rows.end());
  for (const auto& [index, value] : rows) out += fmt::format("{} {} {}\n", what, index, value);
}

inline std::string model_digest(const Snapshot& s) {
  std::string out;
  const EventColumns& e = s.events;
  for (uint64_t i = 0; i < e.count(); ++i) {
    out += fmt::format("e {} {} {} {} {} {}\n", static_cast<int>(e.action[i]), e.addr[i], e.size[i],
                       e.stream[i], e.time_us[i], stack_text(s, e.stack[i]));
  }
  const auto string_of = [&s](StringId id) { return std::string(s.strings.get(id)); };
  sparse_digest(out, "other_action", e.other_action, string_of);
  sparse_digest(out, "category", e.category, string_of);
  sparse_digest(out, "user_metadata", e.user_metadata, string_of);
  sparse_digest(out, "compile_context", e.compile_context, string_of);
  sparse_digest(out, "pool_id", e.pool_id,
                [](const PoolId& p) { return fmt::format("{},{}", p.first, p.second); });
  sparse_digest(out, "device_free", e.device_free, [](uint64_t v) { return std::to_string(v); });
  std::vector<uint64_t> without(e.without_addr.begin(), e.without_addr.end());
  std::sort(without.begin(), without.end());
  for (uint64_t i : without) out += fmt::format("without_addr {}\n", i);
  out += fmt::format("pool ids carried {}\n", e.entries_carry_pool_id);
  for (const DeviceTrace& d : s.devices)
    out += fmt::format("d {} {} {}\n", d.device, d.begin, d.end);
  for (const Segment& g : s.segments) {
    out += fmt::format("s {} {} {} {} {} {} {} {} {} {} {} {}\n", g.device, g.address, g.total_size,
                       g.allocated_size, g.active_size, g.requested_size, g.stream,
                       s.strings.get(g.segment_type), g.pool_id_first, g.pool_id_second,
                       g.is_expandable, stack_text(s, g.stack));
    for (const Block& b : s.blocks_of(g)) {
      out += fmt::format("b {} {} {} {} {}\n", b.address, b.size, b.requested_size,
                         static_cast<int>(b.state), stack_text(s, b.stack));
    }
  }
  for (const Annotation& a : s.annotations) {
    out += fmt::format("a {} {} {} {}\n", s.strings.get(a.name), static_cast<int>(a.stage),
                       a.device, a.time_us);
  }
  const DecodeAnomalies& n = s.anomalies;
  for (const MalformedField& f : n.malformed_fields)
    out += fmt::format("mf {} {}\n", f.field, f.found);
  out += fmt::format("anomalies {} {} {} {} {} {}\n", n.flat_device_traces, n.malformed_entries,
                     n.malformed_segments, n.malformed_annotations, n.malformed_blocks,
                     n.unusable_times);
  out += fmt::format("settings {}\nflags {} {} {}\n", s.allocator_settings.json, s.top_level_list,
                     s.legacy_block_history, s.pickle_protocol);
  return out;
}

}  // namespace memsnap::testing
