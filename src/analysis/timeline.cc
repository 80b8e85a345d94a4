#include "analysis/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/sources.h"
#include "memsnap/replay.h"

namespace memsnap {

Buckets bucketize(const std::vector<double>& positions, const std::vector<double>& values,
                  double extent, double min_width, uint64_t max_buckets) {
  Buckets buckets;
  if (positions.empty() || max_buckets == 0) return buckets;
  extent = std::max(extent, 0.0);  // a hostile trace can run backwards in time
  double width = std::max(min_width, extent / static_cast<double>(max_buckets));
  if (width <= 0) width = 1;
  auto count = static_cast<uint64_t>(std::floor(extent / width)) + 1;
  count = std::min(count, max_buckets);
  buckets.width = width;
  buckets.min.assign(count, 0);
  buckets.max.assign(count, 0);
  double carry = 0;
  uint64_t filled = 0;  // buckets [0, filled) are final
  for (size_t i = 0; i < positions.size(); ++i) {
    auto bucket =
        std::min<uint64_t>(count - 1, static_cast<uint64_t>(std::max(0.0, positions[i] / width)));
    while (filled <= bucket) {
      buckets.min[filled] = carry;
      buckets.max[filled] = carry;
      ++filled;
    }
    carry = values[i];
    buckets.min[bucket] = std::min(buckets.min[bucket], carry);
    buckets.max[bucket] = std::max(buckets.max[bucket], carry);
  }
  for (; filled < count; ++filled) {
    buckets.min[filled] = carry;
    buckets.max[filled] = carry;
  }
  return buckets;
}

namespace {

double seconds_between(int64_t from_us, int64_t to_us) {
  return static_cast<double>(to_us - from_us) / 1e6;
}

// Lifetimes of allocations and the reserved-memory steps, as the replay runs.
struct TimelineObserver {
  TimelineObserver(const Snapshot& snapshot_in, const SourceKeyOptions& key_options,
                   Lifetimes& life_in, uint64_t trace_begin_in)
      : snapshot(snapshot_in),
        sources(snapshot_in, key_options),
        life(life_in),
        trace_begin(trace_begin_in) {}

  const Snapshot& snapshot;
  SourceIndex sources;
  Lifetimes& life;
  uint64_t trace_begin = 0;  // model index of the trace's first event
  uint64_t offset_us = 0;    // time of the current event from the trace start, >= 0
  int64_t t_us = 0;          // the same, signed
  int64_t reserved_change = 0;
  std::vector<std::pair<int64_t, int64_t>> reserved_steps;  // (t offset, running change)

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    life.start_us.push_back(offset_us);
    life.end_us.push_back(Lifetimes::kStillLive);
    life.start_event.push_back(event - trace_begin);
    life.end_event.push_back(Lifetimes::kStillLive);
    life.size.push_back(added.size);
    life.source.push_back(sources.of(added));
  }
  // Lifetimes are appended in alloc order, so an alloc's ordinal is its index.
  void on_replace(uint64_t event, const LiveAllocation& replaced) { end(event, replaced); }
  void on_free(uint64_t event, const LiveAllocation& freed) { end(event, freed); }
  void end(uint64_t event, const LiveAllocation& gone) {
    life.end_us[gone.ordinal] = offset_us;
    life.end_event[gone.ordinal] = event - trace_begin;
  }
  void on_other(uint64_t event) {
    const EventColumns& events = snapshot.events;
    switch (events.action[event]) {
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
        reserved_change = add_bytes(reserved_change, events.size[event]);
        reserved_steps.emplace_back(t_us, reserved_change);
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        reserved_change = sub_bytes(reserved_change, events.size[event]);
        reserved_steps.emplace_back(t_us, reserved_change);
        break;
      default: break;
    }
  }
};

}  // namespace

RunTimeline build_timeline(const FileAnalysis& file, const std::string& label, double precision_ms,
                           const SourceKeyOptions& key_options) {
  const Snapshot& snapshot = *file.snapshot;
  const EventColumns& events = snapshot.events;
  const DeviceTrace& trace = file.trace;
  const ReplayTotals& totals = file.analysis.totals;
  RunTimeline run;
  run.label = label;
  run.file = file.path;
  run.device = file.device;
  run.baseline = file.baseline.baseline_at_start;
  run.peak_delta = totals.peak_delta;
  run.absolute_peak = file.absolute_peak();
  run.alloc_count = totals.alloc_count;
  run.unmatched_frees = totals.unmatched_free_count;
  run.unmatched_free_bytes = totals.unmatched_free_bytes;
  run.event_count = trace.count();
  int64_t t0 = trace_start_us(snapshot, trace);
  run.has_time = t0 != 0;
  // Clamped: in a hostile file the last timed entry can precede the first.
  run.duration_s =
      run.has_time ? std::max(0.0, seconds_between(t0, trace_end_us(snapshot, trace))) : 0;

  // One replay pass: delta after each delta-changing event, lifetimes,
  // reserved memory.
  std::vector<double> time_positions;
  std::vector<double> index_positions;
  std::vector<double> values;
  TimelineObserver observer(snapshot, key_options, run.lifetimes, trace.begin);
  Replay replay(snapshot);
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    int64_t t = events.time_us[i] != 0 ? events.time_us[i] - t0 : 0;
    observer.offset_us = static_cast<uint64_t>(std::max<int64_t>(t, 0));
    observer.t_us = t;
    replay.apply(i, observer);
    Action action = events.action[i];
    if (action != Action::kAlloc && action != Action::kFreeCompleted) continue;
    time_positions.push_back(static_cast<double>(t));
    index_positions.push_back(static_cast<double>(i - trace.begin));
    values.push_back(static_cast<double>(replay.delta()));
  }
  SourceIndex& sources = observer.sources;
  const int64_t reserved_change = observer.reserved_change;
  const auto& reserved_steps = observer.reserved_steps;
  run.sources.reserve(sources.size());
  for (size_t s = 0; s < sources.size(); ++s)
    run.sources.push_back(sources.name(static_cast<uint32_t>(s)));

  if (run.has_time) {
    run.time_buckets = bucketize(time_positions, values, run.duration_s * 1e6,
                                 std::max(precision_ms, 0.001) * 1000.0, kMaxTimeBuckets);
  }
  // Whole events per bucket, so the page can label buckets by event index.
  double events_per_bucket = std::max(
      1.0, std::ceil(static_cast<double>(trace.count()) / static_cast<double>(kMaxIndexBuckets)));
  run.index_buckets = bucketize(index_positions, values, static_cast<double>(trace.count()),
                                events_per_bucket, kMaxIndexBuckets);

  // Reserved memory: the segments give the end state; the events walk back
  // to the start.
  if (!reserved_steps.empty()) {
    auto reserved_end = static_cast<int64_t>(file.segments.total_size);
    int64_t reserved_start = reserved_end - reserved_change;
    run.reserved_t_us.push_back(0);
    run.reserved_bytes.push_back(static_cast<uint64_t>(std::max<int64_t>(reserved_start, 0)));
    for (const auto& [t, change] : reserved_steps) {
      run.reserved_t_us.push_back(std::max<int64_t>(t, 0));
      run.reserved_bytes.push_back(
          static_cast<uint64_t>(std::max<int64_t>(reserved_start + change, 0)));
    }
  }

  for (const ProfilerStep& step : file.steps) {
    Marker marker{std::to_string(step.number), seconds_between(t0, step.start_us), std::nullopt};
    if (step.complete) marker.end_s = seconds_between(t0, step.end_us);
    run.steps.push_back(marker);
  }
  std::map<std::string, std::vector<size_t>> open;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != file.device) continue;
    std::string name(snapshot.strings.get(note.name));
    if (name.starts_with("ProfilerStep#")) continue;
    if (note.stage == Stage::kStart) {
      open[name].push_back(run.annotations.size());
      run.annotations.push_back(Marker{name, seconds_between(t0, note.time_us), std::nullopt});
    } else if (note.stage == Stage::kEnd && note.time_us > 0) {
      auto it = open.find(name);
      if (it != open.end() && !it->second.empty()) {
        run.annotations[it->second.back()].end_s = seconds_between(t0, note.time_us);
        it->second.pop_back();
      }
    }
  }
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (events.action[i] != Action::kOom) continue;
    OomMarker oom{events.time_us[i] != 0 ? seconds_between(t0, events.time_us[i]) : run.duration_s,
                  events.size[i], std::nullopt};
    if (auto it = events.device_free.find(i); it != events.device_free.end())
      oom.device_free = it->second;
    run.ooms.push_back(oom);
  }
  return run;
}

}  // namespace memsnap
