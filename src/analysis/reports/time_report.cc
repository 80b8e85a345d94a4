#include "analysis/reports/time_report.h"

#include <fmt/format.h>

#include "memsnap/error.h"

namespace memsnap {

TimeSide replay_to_time(const FileAnalysis& file, double seconds,
                        const SourceKeyOptions& key_options) {
  const Snapshot& snapshot = file.snapshot();
  TimeSide side;
  side.group = key_options.group;
  side.file = file.path();
  side.device = file.device();
  const TraceTime& time = file.time();
  if (file.trace().count() > 0) time.require_times(file.path(), "parse and compare still work");
  side.trace_duration_s = time.duration_s();
  side.requested_s = seconds;
  side.time_s = seconds;
  if (seconds > side.trace_duration_s) {
    side.time_s = side.trace_duration_s;
    side.clamped = true;
  }
  uint64_t position = time.position_at(side.time_s);
  SourceIndex sources(snapshot, key_options);
  // A server keeps the levels and spans: a click then costs one scan of the
  // spans, not a replay of everything before it. A one-shot command replays
  // (building the spans would cost more than the replay it saves).
  LiveAt at = file.has_levels()
                  ? live_at(snapshot, file.trace(), file.levels(), file.spans(), sources, position)
                  : live_at(snapshot, file.trace(), sources, position);
  side.baseline = file.baseline().baseline_at_start;
  side.delta = at.delta;
  side.absolute = add_bytes(side.baseline, static_cast<uint64_t>(side.delta));
  side.alloc_count = at.alloc_count;
  side.free_count = at.free_count;
  side.live_count = at.live_count;
  side.live_bytes = at.live_bytes;
  side.sources = std::move(at.sources);
  return side;
}

TimePair compare_at_time(TimeSide a, TimeSide b) {
  TimePair pair;
  pair.group = a.group;
  pair.sources = compare_sources(a.sources, b.sources);
  pair.a = std::move(a);
  pair.b = std::move(b);
  return pair;
}

}  // namespace memsnap
