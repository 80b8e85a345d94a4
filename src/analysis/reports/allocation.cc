#include "analysis/reports/allocation.h"

#include <fmt/format.h>
#include <charconv>

#include "analysis/core/sources.h"
#include "memsnap/error.h"
#include "memsnap/replay.h"

namespace memsnap {
namespace {

std::vector<AllocationFrame> frames_of(const Snapshot& snapshot, StackId stack, SourceKeys& keys) {
  std::vector<AllocationFrame> out;
  if (!stack.valid()) return out;
  for (const FrameId id : snapshot.stacks.get(stack)) {
    const Frame& frame = snapshot.frames.get(id);
    out.push_back({snapshot.strings.get(frame.name), snapshot.strings.get(frame.filename),
                   frame.line, keys.is_users(id)});
  }
  return out;
}

}  // namespace

AllocationDetail allocation_at(const FileAnalysis& file, uint64_t entry,
                               const SourceKeyOptions& keys) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  if (entry >= trace.count() || events.action[trace.begin + entry] != Action::kAlloc) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format("entry {} is no alloc entry of this trace ({} entries)", entry, trace.count()));
  }
  const uint64_t at = trace.begin + entry;
  SourceIndex sources(snapshot, keys);
  Categorizer categories(snapshot, keys.category_rules);
  SourceKeys frame_keys(snapshot, keys);
  AllocationDetail detail;
  detail.entry = entry;
  detail.address = events.addr[at];
  detail.size = events.size[at];
  detail.stream = events.stream[at];
  detail.time_s = file.seconds_at(at);
  detail.source = sources.name(sources.of(LiveAllocation{detail.size, events.stack[at], at, 0}));
  detail.category = categories.of(at, events.stack[at]);
  detail.frames = frames_of(snapshot, events.stack[at], frame_keys);
  // Its end as the replay matched it: the next free_completed or alloc at its
  // address (the spans come from that replay).
  const AllocationSpan* span = file.spans().find(entry, detail.size);
  if (span != nullptr && span->end <= trace.count()) {
    const uint64_t end = trace.begin + span->end - 1;
    detail.end =
        AllocationEnd{end - trace.begin, events.action[end] == Action::kAlloc, file.seconds_at(end),
                      frames_of(snapshot, events.stack[end], frame_keys)};
  }
  return detail;
}

std::optional<uint64_t> allocation_at_address(const FileAnalysis& file, uint64_t address,
                                              uint64_t position) {
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = file.snapshot().events;
  position = std::min(position, trace.count());
  // Back from the position to the last entry at the address: an alloc is
  // the allocation if the replay kept it live to the position, a free means
  // nothing of the trace is there.
  for (uint64_t p = position; p > 0; --p) {
    const uint64_t i = trace.begin + p - 1;
    if (events.addr[i] != address) continue;
    if (events.action[i] == Action::kFreeCompleted) return std::nullopt;
    if (events.action[i] != Action::kAlloc) continue;
    const AllocationSpan* span = file.spans().find(p - 1, events.size[i]);
    if (span == nullptr || !span->live_at(position)) return std::nullopt;
    return p - 1;
  }
  return std::nullopt;
}

namespace {

std::optional<uint64_t> hex_address(std::string_view query) {
  if (query.size() < 3 || query.substr(0, 2) != "0x") return std::nullopt;
  uint64_t value = 0;
  const char* end = query.data() + query.size();
  const auto [at, problem] = std::from_chars(query.data() + 2, end, value, 16);
  if (problem != std::errc() || at != end) return std::nullopt;
  return value;
}

// Per stack id: whether one of its frames' name or file name holds `text`.
std::vector<bool> stacks_holding(const Snapshot& snapshot, std::string_view text) {
  std::vector<bool> frame_holds(snapshot.frames.size(), false);  // id 0: no frame
  for (uint32_t id = 1; id < frame_holds.size(); ++id) {
    const Frame& frame = snapshot.frames.get(FrameId{id});
    frame_holds[id] = snapshot.strings.get(frame.name).find(text) != std::string_view::npos ||
                      snapshot.strings.get(frame.filename).find(text) != std::string_view::npos;
  }
  std::vector<bool> holds(snapshot.stacks.size() + 1, false);  // ids 1..size(); 0: none
  for (uint32_t id = 1; id < holds.size(); ++id) {
    for (const FrameId frame : snapshot.stacks.get(StackId{id})) {
      if (frame_holds[frame.value]) {
        holds[id] = true;
        break;
      }
    }
  }
  return holds;
}

}  // namespace

AllocationMatcher::AllocationMatcher(const Snapshot& snapshot, std::string_view query)
    : events_(&snapshot.events) {
  if (query.empty() || query.size() > kMaxSearchText) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("a search is 1 to {} bytes of text or a 0x address", kMaxSearchText));
  }
  address_ = hex_address(query);
  if (!address_) stack_holds_ = stacks_holding(snapshot, query);
}

bool AllocationMatcher::matches(uint64_t event) const {
  if (address_) {
    return *address_ >= events_->addr[event] &&
           *address_ - events_->addr[event] < events_->size[event];
  }
  return stack_holds_[events_->stack[event].value];
}

SearchResult search_allocations(const FileAnalysis& file, std::string_view query, size_t limit,
                                const SourceKeyOptions& keys) {
  const AllocationMatcher matcher(file.snapshot(), query);
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  SearchResult result;
  result.query = std::string(query);
  result.by_address = matcher.by_address();
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (events.action[i] != Action::kAlloc || !matcher.matches(i)) continue;
    ++result.count;
    result.bytes += events.size[i];
    if (result.rows.size() < limit) {
      result.rows.push_back({i - trace.begin, events.size[i], file.seconds_at(i), {}});
    }
  }
  // Named as every report names them, for the rows shown only.
  SourceIndex sources(snapshot, keys);
  for (FoundAllocation& row : result.rows) {
    const uint64_t at = trace.begin + row.entry;
    row.source = sources.name(sources.of(LiveAllocation{row.size, events.stack[at], at, 0}));
  }
  return result;
}

LiveOfSource live_of_source(const FileAnalysis& file, uint64_t position, std::string_view source,
                            size_t limit, const SourceKeyOptions& keys) {
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = file.snapshot().events;
  const AllocationSpans& spans = file.spans();
  LiveOfSource out;
  out.position = std::min(position, trace.count());
  out.source = std::string(source);
  SourceIndex sources(file.snapshot(), keys);
  // Largest first already: the spans are kept so.
  for (const AllocationSpan& span : spans.by_size()) {
    if (!span.live_at(out.position)) continue;
    const uint64_t at = trace.begin + span.entry();
    const uint64_t size = spans.size_of(span);
    if (sources.name(sources.of(LiveAllocation{size, events.stack[at], at, 0})) != source) {
      continue;
    }
    ++out.count;
    out.bytes += size;
    if (out.rows.size() < limit) {
      out.rows.push_back({span.entry(), size, file.seconds_at(at), out.source});
    }
  }
  return out;
}

}  // namespace memsnap
