#include "report/event_render.h"

#include <fmt/format.h>

#include "report/format.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

ordered_json frames_json(const Snapshot& snapshot, StackId stack) {
  ordered_json frames = ordered_json::array();
  for (FrameId id : snapshot.stacks.get(stack)) {
    const Frame& frame = snapshot.frames.get(id);
    frames.push_back({{"name", snapshot.strings.get(frame.name)},
                      {"filename", snapshot.strings.get(frame.filename)},
                      {"line", frame.line}});
  }
  return frames;
}

}  // namespace

std::string render_events_text(const EventListing& listing, const std::string& file) {
  TextTable table(
      {"index", "time (s)", "action", "addr", "size", std::string(group_label(listing.group))},
      {true, true, false, true, true, false});
  for (const EventRow& row : listing.rows) {
    table.add_row({std::to_string(row.index), row.time_us ? fmt::format("{:.6f}", row.time_s) : "-",
                   row.action, row.addr ? fmt::format("0x{:x}", *row.addr) : "-",
                   format_bytes(row.size), row.source});
  }
  return fmt::format("{}: device {}, {} events{}\n", printable(file), listing.device,
                     format_count(listing.event_count),
                     listing.stride > 1 ? fmt::format(", every {}th shown", listing.stride) : "") +
         table.render();
}

ordered_json render_events_json(const EventListing& listing) {
  ordered_json list = ordered_json::array();
  for (const EventRow& row : listing.rows) {
    list.push_back({{"index", row.index},
                    {"action", row.action},
                    {"addr", row.addr ? ordered_json(*row.addr) : ordered_json(nullptr)},
                    {"size", row.size},
                    {"stream", row.stream},
                    {"time_us", row.time_us ? ordered_json(*row.time_us) : ordered_json(nullptr)},
                    {"source", row.source},
                    {"category", row.category},
                    {"frames", frames_json(*listing.snapshot, row.stack)}});
  }
  return {{"device", listing.device}, {"event_count", listing.event_count}, {"events", list}};
}

}  // namespace memsnap
