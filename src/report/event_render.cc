#include "report/event_render.h"

#include <fmt/format.h>
#include <array>
#include <vector>

#include "report/format.h"

namespace memsnap {

namespace {

std::vector<std::string> text_cells(const EventListing& listing, const EventRow& row) {
  return {std::to_string(row.index), row.time_us ? fmt::format("{:.6f}", row.time_s) : "-",
          row_label(row.action),     row.addr ? fmt::format("0x{:x}", *row.addr) : "-",
          format_bytes(row.size),    row_label(listing.sources[row.source])};
}

// {"name": ..., "filename": ..., "line": ...} of the model's frame.
std::string frame_json(const Snapshot& snapshot, FrameId id) {
  const Frame& frame = snapshot.frames.get(id);
  return fmt::format(R"({{"name": {}, "filename": {}, "line": {}}})",
                     JsonStream::quoted(snapshot.strings.get(frame.name)),
                     JsonStream::quoted(snapshot.strings.get(frame.filename)), frame.line);
}

// Quoted names, each escaped once however many rows repeat it.
class QuotedNames {
 public:
  const std::string& source(const EventListing& listing, uint32_t id) {
    if (sources_.empty()) sources_.resize(listing.sources.size());
    std::string& quoted = sources_[id];
    // Cut past kMaxRowLabelBytes: a whole stack (--group-by stack) written
    // per row multiplied the output; the row's stack number gives it whole.
    if (quoted.empty()) quoted = JsonStream::quoted(row_label(listing.sources[id]));
    return quoted;
  }
  const std::string& category(Category category) {
    std::string& quoted = categories_[static_cast<size_t>(category)];
    if (quoted.empty()) quoted = JsonStream::quoted(category_name(category));
    return quoted;
  }
  // Actions are a handful of names (the model's labels, or names copied from
  // the file): a short list, emptied if a hostile file has more than 64;
  // a name past kMaxRowLabelBytes is cut (row_label) before it is looked up.
  const std::string& action(std::string_view action) {
    std::string cut;  // only for a name past the limit: a row costs no copy
    if (action.size() > kMaxRowLabelBytes) action = cut = row_label(action);
    for (const auto& [name, quoted] : actions_)
      if (name == action) return quoted;
    if (actions_.size() >= 64) actions_.clear();  // a file with many foreign actions
    actions_.emplace_back(std::string(action), JsonStream::quoted(action));
    return actions_.back().second;
  }

 private:
  std::vector<std::string> sources_;
  std::array<std::string, kCategoryCount> categories_;
  std::vector<std::pair<std::string, std::string>> actions_;
};

}  // namespace

void write_events_text(const EventListing& listing, const std::string& file, const TextSink& sink) {
  TextTable table(
      {"index", "time (s)", "action", "addr", "size", std::string(group_label(listing.group))},
      {true, true, false, true, true, false});
  // Two passes over the rows: the column widths, then the lines.
  for (uint64_t k = 0; k < listing.row_count(); ++k)
    table.measure(text_cells(listing, listing.row(k)));
  std::string out =
      fmt::format("{}: device {}, {} events{}\n", printable(file), listing.device,
                  format_count(listing.event_count),
                  listing.stride > 1 ? fmt::format(", every {}th shown", listing.stride) : "");
  out += table.header_line();
  for (uint64_t k = 0; k < listing.row_count(); ++k) {
    out += table.row_line(text_cells(listing, listing.row(k)));
    if (out.size() >= (size_t{64} << 10)) {
      sink(out);
      out.clear();
    }
  }
  sink(out);
}

void write_events_json(const EventListing& listing, bool inline_frames, const TextSink& sink) {
  const Snapshot& snapshot = *listing.snapshot;
  JsonStream out(sink);
  out.raw("{\n  \"device\": ").number(static_cast<int64_t>(listing.device));
  out.raw(",\n  \"event_count\": ").number(listing.event_count);

  // One line per frame, stack and entry: the document stays readable and
  // line-oriented tools can cut it.
  std::vector<std::string> frames;  // inline_frames: each frame rendered once
  if (inline_frames) {
    frames.reserve(listing.frames().size());
    for (FrameId frame : listing.frames()) frames.push_back(frame_json(snapshot, frame));
  } else {
    out.raw(",\n  \"frames\": [");
    for (size_t i = 0; i < listing.frames().size(); ++i) {
      out.raw(i == 0 ? "\n    " : ",\n    ").raw(frame_json(snapshot, listing.frames()[i]));
    }
    out.raw(listing.frames().empty() ? "]" : "\n  ]");
    out.raw(",\n  \"stacks\": [");
    for (size_t i = 0; i < listing.stacks().size(); ++i) {
      out.raw(i == 0 ? "\n    [" : ",\n    [");
      bool first = true;
      for (FrameId frame : snapshot.stacks.get(listing.stacks()[i])) {
        if (!first) out.raw(", ");
        out.number(uint64_t{listing.listed_frame(frame)});
        first = false;
      }
      out.raw("]");
    }
    out.raw(listing.stacks().empty() ? "]" : "\n  ]");
  }

  QuotedNames names;
  out.raw(",\n  \"events\": [");
  for (uint64_t k = 0; k < listing.row_count(); ++k) {
    const EventRow row = listing.row(k);
    out.raw(k == 0 ? "\n    {\"index\": " : ",\n    {\"index\": ").number(row.index);
    out.raw(", \"action\": ").raw(names.action(row.action));
    out.raw(", \"addr\": ");
    if (row.addr) {
      out.number(*row.addr);
    } else {
      out.raw("null");
    }
    out.raw(", \"size\": ").number(row.size);
    out.raw(", \"stream\": ").number(row.stream);
    out.raw(", \"time_us\": ");
    if (row.time_us) {
      out.number(*row.time_us);
    } else {
      out.raw("null");
    }
    out.raw(", \"source\": ").raw(names.source(listing, row.source));
    out.raw(", \"category\": ").raw(names.category(row.category));
    if (inline_frames) {
      out.raw(", \"frames\": [");
      bool first = true;
      for (FrameId frame : snapshot.stacks.get(row.stack)) {
        if (!first) out.raw(", ");
        out.raw(frames[listing.listed_frame(frame)]);
        first = false;
      }
      out.raw("]}");
    } else {
      out.raw(", \"stack\": ").number(uint64_t{row.listed_stack}).raw("}");
    }
  }
  out.raw(listing.row_count() == 0 ? "]\n}\n" : "\n  ]\n}\n");
  out.flush();
}

}  // namespace memsnap
