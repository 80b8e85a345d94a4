#include "analysis/reports/event_list.h"

#include "analysis/core/categories.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "memsnap/replay.h"

namespace memsnap {

namespace {

struct EntryNamer {
  const Snapshot& snapshot;
  const Replay& replay;
  SourceIndex& sources;
  Categorizer& categories;
  bool frees_name_allocations;
  absl::FunctionRef<void(uint64_t, uint32_t, Category)> visit;

  void by_own_frames(uint64_t event) {
    const StackId stack = snapshot.events.stack[event];
    visit(event, sources.of(LiveAllocation{snapshot.events.size[event], stack, event, 0}),
          categories.of(event, stack));
  }
  void by_allocation(uint64_t event, const LiveAllocation& allocation) {
    visit(event, sources.of(allocation), categories.of(allocation.event, allocation.stack));
  }
  void before_the_trace(uint64_t event) {
    if (frees_name_allocations) return by_own_frames(event);
    visit(event, sources.of_free(event, snapshot.events.size[event]),
          categories.of_free_site(event, snapshot.events.stack[event]));
  }

  void on_alloc(uint64_t event, const LiveAllocation& /*added*/) { by_own_frames(event); }
  void on_free(uint64_t event, const LiveAllocation& freed) { by_allocation(event, freed); }
  void on_unmatched_free(uint64_t event, uint64_t /*size*/) { before_the_trace(event); }
  void on_other(uint64_t event) {
    if (snapshot.events.action[event] != Action::kFreeRequested) return by_own_frames(event);
    const LiveSet& live = replay.live();
    if (auto found = live.find(snapshot.events.addr[event]); found != live.end()) {
      return by_allocation(event, found->second);
    }
    before_the_trace(event);
  }
};

}  // namespace

void name_entries(const Snapshot& snapshot, const DeviceTrace& trace, FreeFrames free_frames,
                  SourceIndex& sources, Categorizer& categories,
                  absl::FunctionRef<void(uint64_t, uint32_t, Category)> visit) {
  Replay replay(snapshot);
  EntryNamer namer{snapshot, replay, sources, categories, free_frames == FreeFrames::kAllocation,
                   visit};
  replay.run(trace.begin, trace.end, namer);
}

uint64_t EventListing::index_of(uint64_t k) const {
  return index_of_row(k, row_count());
}

uint64_t EventListing::index_of_row(uint64_t k, uint64_t rows) const {
  // Row k is entry k * stride, except the last row, which is the last entry.
  return k + 1 == rows ? event_count - 1 : k * stride;
}

EventRow EventListing::row(uint64_t k) const {
  const EventColumns& events = snapshot->events;
  const uint64_t index = index_of(k);
  const uint64_t at = first_ + index;
  EventRow row;
  row.index = index;
  row.action = snapshot->action_label(at);
  if (!events.without_addr.contains(at)) row.addr = events.addr[at];
  row.size = events.size[at];
  row.stream = events.stream[at];
  if (events.time_us[at] != 0) {
    row.time_us = events.time_us[at];
    row.time_s = static_cast<double>(events.time_us[at] - origin_us_) / 1e6;
  }
  row.stack = events.stack[at];
  row.listed_stack = stack_number_[row.stack.value] - 1;
  row.source = sources_[k];
  row.category = categories_[k];
  return row;
}

EventListing list_events(const Snapshot& snapshot, std::optional<int> device, uint64_t stride,
                         const SourceKeyOptions& key_options) {
  EventListing listing;
  listing.group = key_options.group;
  listing.snapshot = &snapshot;
  listing.device = choose_device(snapshot, device).device;
  listing.stride = stride == 0 ? 1 : stride;
  const DeviceTrace trace = trace_or_empty(snapshot, listing.device);
  listing.event_count = trace.count();
  listing.first_ = trace.begin;
  const EventColumns& events = snapshot.events;
  for (uint64_t i = trace.begin; i < trace.end && listing.origin_us_ == 0; ++i)
    listing.origin_us_ = events.time_us[i];

  uint64_t rows = 0;
  if (trace.count() > 0) {
    rows = (trace.count() - 1) / listing.stride + 1;  // entries 0, stride, 2 stride, ...
    if ((rows - 1) * listing.stride != trace.count() - 1) ++rows;  // and the last
  }
  SourceIndex groups(snapshot, key_options);
  Categorizer categories(snapshot, key_options.category_rules);
  listing.sources_.reserve(rows);
  listing.categories_.reserve(rows);
  listing.stack_number_.assign(snapshot.stacks.size() + 1, 0);  // ids 1..size(), 0: none
  listing.frame_number_.assign(snapshot.frames.size(), 0);
  // Rows are entries 0, stride, 2 stride, ... and the last.
  uint64_t next_row = 0;
  const FreeFrames free_frames = analyze_trace(snapshot, trace, {}).counts.free_frames.kind();
  name_entries(snapshot, trace, free_frames, groups, categories,
               [&](uint64_t at, uint32_t source, Category category) {
                 const uint64_t index = at - trace.begin;
                 if (next_row >= rows || index != listing.index_of_row(next_row, rows)) return;
                 ++next_row;
                 listing.categories_.push_back(category);
                 listing.sources_.push_back(source);
                 const StackId stack = events.stack[at];
                 uint32_t& number = listing.stack_number_[stack.value];
                 if (number == 0) {
                   listing.stacks_.push_back(stack);
                   number = static_cast<uint32_t>(listing.stacks_.size());
                 }
               });
  for (StackId stack : listing.stacks_) {
    for (FrameId frame : snapshot.stacks.get(stack)) {
      uint32_t& number = listing.frame_number_[frame.value];
      if (number == 0) {
        listing.frames_.push_back(frame);
        number = static_cast<uint32_t>(listing.frames_.size());
      }
    }
  }
  listing.sources.reserve(groups.size());
  for (uint32_t id = 0; id < groups.size(); ++id) listing.sources.push_back(groups.name(id));
  return listing;
}

}  // namespace memsnap
