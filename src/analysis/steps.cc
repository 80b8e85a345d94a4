#include "analysis/steps.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace memsnap {

namespace {
constexpr std::string_view kStepPrefix = "ProfilerStep#";
}  // namespace

std::vector<ProfilerStep> profiler_steps(const Snapshot& snapshot, int device) {
  std::map<int64_t, ProfilerStep> steps;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device) continue;
    std::string_view name = snapshot.strings.get(note.name);
    if (name.substr(0, kStepPrefix.size()) != kStepPrefix) continue;
    std::string_view digits = name.substr(kStepPrefix.size());
    int64_t number = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error != std::errc() || end != digits.data() + digits.size()) continue;
    if (note.stage == Stage::kStart) {
      auto [it, inserted] = steps.try_emplace(number);
      if (inserted || it->second.start_us == 0) {
        it->second.number = number;
        it->second.start_us = note.time_us;
      }
    } else if (note.stage == Stage::kEnd && note.time_us > 0) {
      auto it = steps.find(number);
      if (it != steps.end() && !it->second.complete) {
        it->second.end_us = note.time_us;
        it->second.complete = true;
      }
    }
  }
  std::vector<ProfilerStep> out;
  out.reserve(steps.size());
  for (auto& [number, step] : steps) out.push_back(step);
  return out;
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

namespace {

// Updates every open step window with what the replay did at one event.
struct WindowObserver {
  std::vector<StepStats>& steps;
  const std::vector<size_t>& open;
  const Replay& replay;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    for (size_t k : open) {
      StepStats& stats = steps[k];
      ++stats.alloc_count;
      stats.alloc_bytes += added.size;
      int64_t window_delta = sub_bytes(replay.delta(), static_cast<uint64_t>(stats.start_delta));
      if (window_delta > stats.peak_delta) {
        stats.peak_delta = window_delta;
        stats.peak_event = event;
      }
    }
  }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) {
    for (size_t k : open) {
      StepStats& stats = steps[k];
      ++stats.free_count;
      if (freed.event < stats.begin) {
        ++stats.pre_existing_free_count;
        stats.pre_existing_free_bytes += freed.size;
      }
    }
  }
  void on_unmatched_free(uint64_t /*event*/, uint64_t size) {
    for (size_t k : open) {
      StepStats& stats = steps[k];
      ++stats.free_count;
      ++stats.unmatched_free_count;
      stats.unmatched_free_bytes += size;
    }
  }
};

}  // namespace

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
  WindowObserver windows{analysis.steps, open, replay};
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    open_until(i);
    close_until(i);
    replay.apply(i, windows);
  }
  // Windows that start after the last event open (and close) at the final delta.
  open_until(UINT64_MAX);
  close_until(UINT64_MAX);
  analysis.totals = replay.totals();
  return analysis;
}

std::map<std::string, uint64_t> annotations_between(const Snapshot& snapshot, int device,
                                                    int64_t start_us, int64_t end_us) {
  std::map<std::string, uint64_t> counts;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != device || note.stage != Stage::kStart) continue;
    if (note.time_us < start_us || note.time_us > end_us) continue;
    std::string_view name = snapshot.strings.get(note.name);
    if (name.starts_with("ProfilerStep#")) continue;
    ++counts[std::string(name)];
  }
  return counts;
}

}  // namespace memsnap
