// Renderers of `memsnap events`. Both write as they go, through a sink, so
// that a listing of millions of entries never exists as one string or one
// JSON value.
#pragma once

#include <string>

#include "analysis/reports/event_list.h"
#include "report/json_stream.h"

namespace memsnap {

void write_events_text(const EventListing& listing, const std::string& file, const TextSink& sink);

// `events --json`: {device, event_count, frames, stacks, events}. Each frame
// and each stack the entries use is written once, in the `frames` table
// ({name, filename, line}) and the `stacks` table (lists of frame numbers,
// innermost first); an entry names its stack by number (`stack`). With
// inline_frames, the earlier shape: no tables, and each entry carries its
// whole stack as `frames`.
void write_events_json(const EventListing& listing, bool inline_frames, const TextSink& sink);

}  // namespace memsnap
