#include "analysis/event_list.h"

#include "analysis/categories.h"
#include "analysis/file_analysis.h"
#include "analysis/source_key.h"
#include "analysis/sources.h"

namespace memsnap {

EventListing list_events(const Snapshot& snapshot, std::optional<int> device, uint64_t stride,
                         const SourceKeyOptions& key_options) {
  EventListing listing;
  listing.group = key_options.group;
  listing.snapshot = &snapshot;
  listing.device = choose_device(snapshot, device).device;
  listing.stride = stride == 0 ? 1 : stride;
  const DeviceTrace trace = trace_or_empty(snapshot, listing.device);
  listing.event_count = trace.count();
  std::vector<uint64_t> picked;
  for (uint64_t i = 0; i < trace.count(); i += listing.stride) picked.push_back(i);
  if (trace.count() > 0 && (picked.empty() || picked.back() != trace.count() - 1)) {
    picked.push_back(trace.count() - 1);
  }
  const EventColumns& events = snapshot.events;
  int64_t origin = 0;
  for (uint64_t i = trace.begin; i < trace.end && origin == 0; ++i) origin = events.time_us[i];
  SourceIndex groups(snapshot, key_options);
  Categorizer categories(snapshot, key_options.category_rules);
  listing.rows.reserve(picked.size());
  for (uint64_t i : picked) {
    uint64_t at = trace.begin + i;
    EventRow row;
    row.index = i;
    row.action = std::string(snapshot.action_label(at));
    if (!events.without_addr.contains(at)) row.addr = events.addr[at];
    row.size = events.size[at];
    row.stream = events.stream[at];
    if (events.time_us[at] != 0) {
      row.time_us = events.time_us[at];
      row.time_s = static_cast<double>(events.time_us[at] - origin) / 1e6;
    }
    row.stack = events.stack[at];
    row.category = std::string(category_name(categories.of(at, row.stack)));
    row.source = groups.name(groups.of(LiveAllocation{row.size, row.stack, at, 0}));
    listing.rows.push_back(std::move(row));
  }
  return listing;
}

}  // namespace memsnap
