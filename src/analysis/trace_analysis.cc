#include "analysis/trace_analysis.h"

#include <algorithm>
#include <cmath>

namespace memsnap {

SourceIndex::SourceIndex(const Snapshot& snapshot, int frame_depth)
    : keys_(snapshot, frame_depth), by_stack_(snapshot.stacks.size() + 1, 0) {}

uint32_t SourceIndex::of(StackId stack) {
  uint32_t& cached = by_stack_[stack.value];
  if (cached == 0) {
    const std::string& key = keys_.key(stack);
    auto [it, inserted] = ids_.try_emplace(key, static_cast<uint32_t>(names_.size()));
    if (inserted) names_.push_back(key);
    cached = it->second + 1;
  }
  return cached - 1;
}

int64_t trace_start_us(const Snapshot& snapshot, const DeviceTrace& trace) {
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (snapshot.events.time_us[i] > 0) return snapshot.events.time_us[i];
  }
  return 0;
}

int64_t trace_end_us(const Snapshot& snapshot, const DeviceTrace& trace) {
  for (uint64_t i = trace.end; i > trace.begin; --i) {
    if (snapshot.events.time_us[i - 1] > 0) return snapshot.events.time_us[i - 1];
  }
  return 0;
}

uint64_t position_at_time(const Snapshot& snapshot, const DeviceTrace& trace, double seconds) {
  int64_t origin = trace_start_us(snapshot, trace);
  auto limit = origin + static_cast<int64_t>(std::llround(seconds * 1e6));
  uint64_t i = trace.begin;
  while (i < trace.end && snapshot.events.time_us[i] <= limit) ++i;
  return i - trace.begin;
}

TraceAnalysis analyze_trace(const Snapshot& snapshot, const DeviceTrace& trace,
                            const std::vector<ProfilerStep>& steps) {
  const EventColumns& events = snapshot.events;
  TraceAnalysis analysis;
  analysis.steps.resize(steps.size());

  // Window bounds: start <= time_us <= end. An incomplete step runs to the
  // end of the trace. Found by one merge over steps sorted by start.
  std::vector<size_t> by_start(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    by_start[k] = k;
    analysis.steps[k].step = steps[k];
  }
  std::sort(by_start.begin(), by_start.end(),
            [&](size_t a, size_t b) { return steps[a].start_us < steps[b].start_us; });
  {
    uint64_t i = trace.begin;
    for (size_t k : by_start) {
      while (i < trace.end && events.time_us[i] < steps[k].start_us) ++i;
      analysis.steps[k].begin = i;
    }
  }
  // Window ends: the first event after END; windows of a profiler run are
  // sequential, so this scan is linear in practice.
  for (StepStats& stats : analysis.steps) {
    uint64_t j = stats.begin;
    if (stats.step.complete) {
      while (j < trace.end && events.time_us[j] <= stats.step.end_us) ++j;
    } else {
      j = trace.end;
    }
    stats.end = j;
  }

  // Events at which windows open and close, in event order.
  std::vector<size_t> opening = by_start;
  std::vector<size_t> closing(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) closing[k] = k;
  std::sort(closing.begin(), closing.end(),
            [&](size_t a, size_t b) { return analysis.steps[a].end < analysis.steps[b].end; });
  size_t next_open = 0;
  size_t next_close = 0;
  std::vector<size_t> open;

  Replay replay(snapshot);
  // At each event: open the windows that start here (their start delta is
  // the delta before this event), close the windows that ended before it,
  // then apply it. Empty windows open and close at once: end delta 0.
  auto open_until = [&](uint64_t index) {
    while (next_open < opening.size() && analysis.steps[opening[next_open]].begin <= index) {
      size_t k = opening[next_open++];
      analysis.steps[k].start_delta = replay.delta();
      open.push_back(k);
    }
  };
  auto close_until = [&](uint64_t index) {
    while (next_close < closing.size() && analysis.steps[closing[next_close]].end <= index) {
      size_t k = closing[next_close++];
      StepStats& stats = analysis.steps[k];
      stats.end_delta = sub_bytes(replay.delta(), static_cast<uint64_t>(stats.start_delta));
      open.erase(std::remove(open.begin(), open.end(), k), open.end());
    }
  };
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    open_until(i);
    close_until(i);
    Action action = events.action[i];
    bool matched = false;
    uint64_t freed_bytes = events.size[i];
    uint64_t freed_alloc_event = 0;
    if (action == Action::kFreeCompleted) {
      auto found = replay.live().find(events.addr[i]);
      matched = found != replay.live().end();
      if (matched) {
        freed_bytes = found->second.size;
        freed_alloc_event = found->second.event;
      }
    }
    replay.apply_one(i);
    for (size_t k : open) {
      StepStats& stats = analysis.steps[k];
      if (action == Action::kAlloc) {
        ++stats.alloc_count;
        stats.alloc_bytes += events.size[i];
        int64_t window_delta = sub_bytes(replay.delta(), static_cast<uint64_t>(stats.start_delta));
        if (window_delta > stats.peak_delta) {
          stats.peak_delta = window_delta;
          stats.peak_event = i;
        }
      } else if (action == Action::kFreeCompleted) {
        ++stats.free_count;
        if (!matched) {
          ++stats.unmatched_free_count;
          stats.unmatched_free_bytes += freed_bytes;
        } else if (freed_alloc_event < stats.begin) {
          ++stats.pre_existing_free_count;
          stats.pre_existing_free_bytes += freed_bytes;
        }
      }
    }
  }
  // Windows that start after the last event open (and close) at the final delta.
  open_until(UINT64_MAX);
  close_until(UINT64_MAX);
  analysis.totals = replay.totals();
  return analysis;
}

std::vector<std::vector<SourceUsage>> live_by_source(const Snapshot& snapshot,
                                                     const DeviceTrace& trace, SourceIndex& sources,
                                                     std::span<const uint64_t> positions) {
  const EventColumns& events = snapshot.events;
  std::vector<uint64_t> bytes;
  std::vector<uint64_t> counts;
  struct Live {
    uint64_t size;
    uint32_t source;
  };
  absl::flat_hash_map<uint64_t, Live> live;
  auto capture = [&]() {
    std::vector<SourceUsage> rows;
    for (size_t s = 0; s < bytes.size(); ++s) {
      if (counts[s] != 0)
        rows.push_back(SourceUsage{sources.name(static_cast<uint32_t>(s)), bytes[s], counts[s]});
    }
    std::sort(rows.begin(), rows.end(), [](const SourceUsage& a, const SourceUsage& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.source < b.source;
    });
    return rows;
  };
  std::vector<std::vector<SourceUsage>> out;
  out.reserve(positions.size());
  size_t next = 0;
  uint64_t applied = 0;
  for (uint64_t i = trace.begin;; ++i, ++applied) {
    while (next < positions.size() && positions[next] <= applied) {
      out.push_back(capture());
      ++next;
    }
    if (next == positions.size() || i >= trace.end) break;
    Action action = events.action[i];
    if (action == Action::kAlloc) {
      uint32_t source = sources.of(events.stack[i]);
      if (source >= bytes.size()) {
        bytes.resize(source + 1, 0);
        counts.resize(source + 1, 0);
      }
      auto [it, inserted] = live.try_emplace(events.addr[i], Live{events.size[i], source});
      if (!inserted) {
        bytes[it->second.source] -= it->second.size;
        --counts[it->second.source];
        it->second = Live{events.size[i], source};
      }
      bytes[source] += events.size[i];
      ++counts[source];
    } else if (action == Action::kFreeCompleted) {
      auto found = live.find(events.addr[i]);
      if (found != live.end()) {
        bytes[found->second.source] -= found->second.size;
        --counts[found->second.source];
        live.erase(found);
      }
    }
  }
  while (out.size() < positions.size()) out.push_back(capture());
  return out;
}

std::map<std::string, uint64_t> annotations_between(const Snapshot& snapshot, int device,
                                                    int64_t start_us, int64_t end_us) {
  std::map<std::string, uint64_t> counts;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device || note.stage != Stage::kStart) continue;
    if (note.time_us < start_us || note.time_us > end_us) continue;
    std::string_view name = snapshot.strings.get(note.name);
    if (name.starts_with("ProfilerStep#")) continue;
    ++counts[std::string(name.substr(0, name.find('#')))];
  }
  return counts;
}

}  // namespace memsnap
