#include "analysis/summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>

#include "analysis/trace_analysis.h"
#include "io/error.h"
#include "report/format.h"

namespace memsnap {
namespace {

constexpr std::string_view kStepPrefix = "ProfilerStep#";

// Thresholds of the warnings; see README "Warnings".
constexpr double kUnmatchedShareWarning = 0.05;
constexpr uint64_t kUnmatchedCountWarning = 10;
constexpr double kBaselineShareWarning = 0.5;
constexpr uint64_t kBaselineBytesWarning = uint64_t{64} << 20;

}  // namespace

SegmentTotals segment_totals(const Snapshot& snapshot, int device) {
  SegmentTotals totals;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    ++totals.count;
    totals.total_size += segment.total_size;
    totals.allocated_size += segment.allocated_size;
    totals.active_size += segment.active_size;
    totals.block_count += segment.block_count;
    if (segment.is_expandable) ++totals.expandable_count;
    if (segment.pool_id_first != 0 || segment.pool_id_second != 0) ++totals.private_pool_count;
  }
  totals.awaiting_free_size =
      totals.active_size > totals.allocated_size ? totals.active_size - totals.allocated_size : 0;
  totals.inactive_size =
      totals.total_size > totals.active_size ? totals.total_size - totals.active_size : 0;
  totals.fragmentation = totals.total_size == 0 ? 0.0
                                                : static_cast<double>(totals.inactive_size) /
                                                      static_cast<double>(totals.total_size);
  return totals;
}

Baseline compute_baseline(const SegmentTotals& segments, const ReplayTotals& replay) {
  Baseline baseline;
  baseline.segments_active = segments.active_size;
  baseline.pre_existing_freed = replay.unmatched_free_bytes;
  baseline.profiling_still_live = replay.live_bytes_at_end;
  baseline.baseline_at_start =
      add_bytes(sub_bytes(static_cast<int64_t>(segments.active_size), replay.live_bytes_at_end),
                replay.unmatched_free_bytes);
  return baseline;
}

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

int choose_device(const Snapshot& snapshot, std::optional<int> requested) {
  if (!requested) return snapshot.default_device();
  std::vector<int> in_use = snapshot.devices_in_use();
  bool known = std::find(in_use.begin(), in_use.end(), *requested) != in_use.end() ||
               snapshot.trace_of(*requested) != nullptr;
  if (!known) {
    throw Error(fmt::format("device {} is not in this snapshot (devices with data: {})", *requested,
                            in_use.empty() ? "none" : fmt::format("{}", fmt::join(in_use, ", "))));
  }
  return *requested;
}

ParseResult summarize(const Snapshot& snapshot, const std::string& file,
                      const ParseOptions& options) {
  ParseResult result;
  result.file = file;
  result.file_size_bytes = snapshot.file_size;
  result.pickle_bytes = snapshot.pickle_size;
  result.compression = snapshot.compression;
  result.pickle_protocol = snapshot.pickle_protocol;
  result.device = choose_device(snapshot, options.device);
  result.devices = snapshot.devices_in_use();
  result.device_trace_lists = snapshot.devices.size();
  result.top_level_list = snapshot.top_level_list;
  result.legacy_format = snapshot.legacy_block_history;
  result.allocator_settings = snapshot.allocator_settings;
  result.segments = segment_totals(snapshot, result.device);
  result.distinct_frames = snapshot.frames.size() - 1;
  result.distinct_stacks = snapshot.stacks.size();
  result.anomalies = snapshot.anomalies;

  DeviceTrace empty_trace{result.device, 0, 0};
  const DeviceTrace* trace = snapshot.trace_of(result.device);
  if (trace == nullptr) trace = &empty_trace;
  const EventColumns& events = snapshot.events;
  result.event_count = trace->count();
  result.replay = replay_device(snapshot, *trace);
  // Reports count events within the device's trace, not the model's columns.
  if (result.replay.peak_event != kNoEvent) result.replay.peak_event -= trace->begin;
  result.baseline = compute_baseline(result.segments, result.replay);

  // Event counts, time span, oom entries and throughput by source: one pass.
  std::array<uint64_t, kActionCount> action_counts{};
  SourceIndex source_ids(snapshot, options.frame_depth);
  std::vector<SourceThroughput> by_source;  // indexed by source id
  int64_t first_time = 0;
  int64_t last_time = 0;
  for (uint64_t i = trace->begin; i < trace->end; ++i) {
    Action action = events.action[i];
    if (action == Action::kOther) {
      ++result.actions[std::string(snapshot.action_label(i))];
    } else {
      ++action_counts[static_cast<size_t>(action)];
    }
    if (events.time_us[i] > 0) {
      if (first_time == 0) first_time = events.time_us[i];
      last_time = events.time_us[i];
    }
    if (action == Action::kAlloc) {
      uint32_t source = source_ids.of(events.stack[i]);
      if (source >= by_source.size()) by_source.resize(source + 1);
      by_source[source].throughput_bytes += events.size[i];
      ++by_source[source].alloc_count;
    } else if (action == Action::kOom) {
      OomReport oom{i, events.size[i], std::nullopt, events.time_us[i]};
      if (auto it = events.device_free.find(i); it != events.device_free.end()) {
        oom.device_free = it->second;
      }
      result.ooms.push_back(oom);
    }
  }
  for (int a = 0; a < kActionCount; ++a) {
    if (action_counts[static_cast<size_t>(a)] != 0) {
      result.actions[std::string(action_name(static_cast<Action>(a)))] =
          action_counts[static_cast<size_t>(a)];
    }
  }
  result.has_time = first_time != 0;
  result.trace_duration_s = static_cast<double>(last_time - first_time) / 1e6;

  for (uint32_t source = 0; source < by_source.size(); ++source) {
    by_source[source].source = source_ids.name(source);
  }
  result.distinct_sources = by_source.size();
  std::vector<SourceThroughput> sources = std::move(by_source);
  std::sort(sources.begin(), sources.end(), [](const auto& a, const auto& b) {
    return a.throughput_bytes != b.throughput_bytes ? a.throughput_bytes > b.throughput_bytes
                                                    : a.source < b.source;
  });
  if (options.top >= 0 && sources.size() > static_cast<size_t>(options.top)) {
    sources.resize(static_cast<size_t>(options.top));
  }
  result.top_sources = std::move(sources);

  result.steps = profiler_steps(snapshot, result.device);
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != result.device) continue;
    ++result.annotation_count;
    if (note.stage != Stage::kStart) continue;
    std::string_view name = snapshot.strings.get(note.name);
    ++result.annotation_kinds[std::string(name.substr(0, name.find('#')))];
  }

  if (result.devices.size() > 1) {
    for (int device : result.devices) {
      DeviceOverview row;
      row.device = device;
      row.segments = segment_totals(snapshot, device);
      if (const DeviceTrace* device_trace = snapshot.trace_of(device)) {
        // The chosen device was replayed above.
        ReplayTotals totals =
            device == result.device ? result.replay : replay_device(snapshot, *device_trace);
        row.event_count = device_trace->count();
        row.alloc_count = totals.alloc_count;
        row.peak_delta = totals.peak_delta;
        row.unmatched_free_count = totals.unmatched_free_count;
        row.baseline_at_start = compute_baseline(row.segments, totals).baseline_at_start;
      } else {
        row.baseline_at_start = static_cast<int64_t>(row.segments.active_size);
      }
      result.per_device.push_back(row);
    }
  }

  // Warnings a user needs before trusting the numbers.
  auto& warnings = result.warnings;
  if (result.event_count == 0) {
    warnings.emplace_back(
        "no allocation history for this device: call "
        "torch.cuda.memory._record_memory_history() before the code you want to see "
        "(the segments are the state at dump time)");
  }
  const ReplayTotals& replay = result.replay;
  if (replay.unmatched_free_count >= kUnmatchedCountWarning &&
      static_cast<double>(replay.unmatched_free_count) >=
          kUnmatchedShareWarning * static_cast<double>(std::max<uint64_t>(replay.free_count, 1))) {
    warnings.push_back(fmt::format(
        "{} of {} frees ({}) have no alloc in the trace: the trace looks truncated by the ring "
        "buffer (raise max_entries in _record_memory_history) or recording started mid-run",
        replay.unmatched_free_count, replay.free_count, format_bytes(replay.unmatched_free_bytes)));
  }
  const Baseline& baseline = result.baseline;
  if (result.event_count > 0 && baseline.baseline_at_start > 0 &&
      static_cast<uint64_t>(baseline.baseline_at_start) >= kBaselineBytesWarning &&
      static_cast<double>(baseline.baseline_at_start) >=
          kBaselineShareWarning * static_cast<double>(baseline.segments_active)) {
    warnings.push_back(fmt::format(
        "{} was already allocated when the trace starts (model weights?): recording started "
        "after model construction, so those allocations have no source",
        format_bytes(static_cast<uint64_t>(baseline.baseline_at_start))));
  }
  if (baseline.baseline_at_start < 0) {
    warnings.push_back(fmt::format(
        "baseline is negative ({}): the trace holds more live memory than the segments; the "
        "snapshot's segments and trace disagree",
        format_signed_bytes(baseline.baseline_at_start)));
  }
  if (result.event_count > 0 && !result.has_time) {
    warnings.emplace_back(
        "trace entries carry no time_us (PyTorch before 2.2): time-based views "
        "(--time, steps) are unavailable");
  }
  for (const OomReport& oom : result.ooms) {
    warnings.push_back(fmt::format(
        "out of memory on device {}: a request of {} failed{}", result.device,
        format_bytes(oom.requested),
        oom.device_free ? fmt::format(" with {} free on the device", format_bytes(*oom.device_free))
                        : std::string()));
  }
  if (snapshot.anomalies.malformed_entries != 0) {
    warnings.push_back(fmt::format("{} malformed trace entries were skipped",
                                   snapshot.anomalies.malformed_entries));
  }
  if (result.steps.empty()) {
    result.steps_hint =
        "no ProfilerStep annotations: profile with torch.profiler.profile(...) and call "
        "prof.step() each iteration (use_pytorch_profiler=True) to get step boundaries";
  }
  return result;
}

}  // namespace memsnap
