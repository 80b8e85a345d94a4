#include "analysis/parse_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>
#include <future>

#include "analysis/file_analysis.h"
#include "analysis/sources.h"

namespace memsnap {
namespace {

// Thresholds of the warnings; see README "Warnings".
constexpr double kUnmatchedShareWarning = 0.05;
constexpr uint64_t kUnmatchedCountWarning = 10;
constexpr double kBaselineShareWarning = 0.5;
constexpr uint64_t kBaselineBytesWarning = uint64_t{64} << 20;

// Bytes and counts of allocations by source, as the replay sees them.
struct ThroughputBySource {
  ThroughputBySource(const Snapshot& snapshot, const SourceKeyOptions& key_options)
      : sources(snapshot, key_options) {}

  SourceIndex sources;
  std::vector<SourceThroughput> rows;  // indexed by source id

  void on_alloc(uint64_t /*event*/, const LiveAllocation& added) {
    uint32_t source = sources.of(added);
    if (source >= rows.size()) rows.resize(source + 1);
    rows[source].throughput_bytes += added.size;
    ++rows[source].alloc_count;
  }
};

}  // namespace

ParseResult summarize(const Snapshot& snapshot, const std::string& file,
                      const ParseOptions& options) {
  ParseResult result;
  result.group = options.keys.group;
  result.file = file;
  result.file_size_bytes = snapshot.file_size;
  result.pickle_bytes = snapshot.pickle_size;
  result.compression = snapshot.compression;
  result.pickle_protocol = snapshot.pickle_protocol;
  result.device = choose_device(snapshot, options.device);
  result.device_requested = options.device.has_value();
  result.devices = snapshot.devices_in_use();
  result.top_level_list = snapshot.top_level_list;
  result.legacy_format = snapshot.legacy_block_history;
  if (!snapshot.allocator_settings_json.empty())
    result.allocator_settings = nlohmann::ordered_json::parse(snapshot.allocator_settings_json);
  result.segments = segment_totals(snapshot, result.device);
  result.distinct_frames = snapshot.frames.size() - 1;
  result.distinct_stacks = snapshot.stacks.size();
  result.anomalies = snapshot.anomalies;

  const DeviceTrace trace = trace_or_empty(snapshot, result.device);
  const EventColumns& events = snapshot.events;
  result.event_count = trace.count();
  result.reserved = reserved_history(snapshot, trace, result.segments.total_size);
  if (const int64_t origin = trace_start_us(snapshot, trace);
      origin != 0 && result.reserved.peak_event != kNoEvent &&
      events.time_us[result.reserved.peak_event] != 0) {
    result.reserved_peak_time_s =
        static_cast<double>(events.time_us[result.reserved.peak_event] - origin) / 1e6;
  }
  // The allocator replay only reads the model: it runs beside the replay of
  // allocations below (two cores are the common case), joined at the end.
  auto fragmentation =
      std::async(std::launch::async, [&snapshot, trace, reserved = result.reserved] {
        return fragmentation_over_trace(snapshot, trace, reserved);
      });

  // One pass: the replay, plus event counts, time span, oom entries and
  // throughput by source.
  std::array<uint64_t, kActionCount> action_counts{};
  ThroughputBySource throughput(snapshot, options.keys);
  int64_t first_time = 0;
  int64_t last_time = 0;
  int64_t earliest_time = 0;
  int64_t latest_time = 0;
  Replay full_replay(snapshot);
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    full_replay.apply(i, throughput);
    Action action = events.action[i];
    if (action == Action::kOther) {
      ++result.actions[std::string(snapshot.action_label(i))];
    } else {
      ++action_counts[static_cast<size_t>(action)];
    }
    if (const int64_t t = events.time_us[i]; t > 0) {
      if (first_time == 0) first_time = earliest_time = latest_time = t;
      if (t < last_time) ++result.times_backwards;
      earliest_time = std::min(earliest_time, t);
      latest_time = std::max(latest_time, t);
      last_time = t;
    }
    if (action == Action::kOom) {
      OomReport oom{i, events.size[i], std::nullopt, events.time_us[i]};
      if (auto it = events.device_free.find(i); it != events.device_free.end()) {
        oom.device_free = it->second;
      }
      result.ooms.push_back(oom);
    }
  }
  result.replay = full_replay.totals();
  ReplayTotals device_totals = result.replay;  // model indices, for the per-device table
  // Reports count events within the device's trace, not the model's columns.
  if (result.replay.peak_event != kNoEvent) result.replay.peak_event -= trace.begin;
  result.baseline = compute_baseline(result.segments, result.replay);
  if (first_time != 0 && device_totals.peak_event == kNoEvent) {
    result.peak_time_s = 0.0;  // the delta never rose above the start
  } else if (first_time != 0 && events.time_us[device_totals.peak_event] != 0) {
    result.peak_time_s =
        static_cast<double>(events.time_us[device_totals.peak_event] - first_time) / 1e6;
  }
  SourceIndex& source_ids = throughput.sources;
  std::vector<SourceThroughput>& by_source = throughput.rows;
  for (int a = 0; a < kActionCount; ++a) {
    if (action_counts[static_cast<size_t>(a)] != 0) {
      result.actions[std::string(action_name(static_cast<Action>(a)))] =
          action_counts[static_cast<size_t>(a)];
    }
  }
  result.has_time = first_time != 0;
  result.trace_duration_s = static_cast<double>(latest_time - earliest_time) / 1e6;

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

  result.steps = profiler_steps(snapshot, result.device, &result.steps_ending_before_start);
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
            device == result.device ? device_totals : replay_device(snapshot, *device_trace);
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

  // Where the trace cannot name the live memory (none, or most of it was
  // allocated before recording started), the segments' blocks can.
  const Baseline& baseline = result.baseline;
  bool large_baseline =
      result.event_count > 0 && baseline.baseline_at_start > 0 &&
      static_cast<uint64_t>(baseline.baseline_at_start) >= kBaselineBytesWarning &&
      static_cast<double>(baseline.baseline_at_start) >=
          kBaselineShareWarning * static_cast<double>(baseline.segments_active);
  if (result.event_count == 0 || large_baseline) {
    std::vector<SourceUsage> live = live_at_dump_by_source(snapshot, result.device, source_ids);
    result.live_at_dump_sources = live.size();
    if (options.top >= 0 && live.size() > static_cast<size_t>(options.top)) {
      live.resize(static_cast<size_t>(options.top));
    }
    result.live_at_dump = std::move(live);
  }
  bool from_blocks = result.live_at_dump_sources > 0;

  // Warnings a user needs before trusting the numbers.
  auto& warnings = result.warnings;
  if (result.event_count == 0) warnings.emplace_back(finding::NoHistory{from_blocks});
  const ReplayTotals& replay = result.replay;
  if (replay.unmatched_free_count >= kUnmatchedCountWarning &&
      static_cast<double>(replay.unmatched_free_count) >=
          kUnmatchedShareWarning * static_cast<double>(std::max<uint64_t>(replay.free_count, 1))) {
    warnings.emplace_back(finding::TruncatedTrace{replay.unmatched_free_count, replay.free_count,
                                                  replay.unmatched_free_bytes});
  }
  if (large_baseline) {
    warnings.emplace_back(
        finding::LargeBaseline{static_cast<uint64_t>(baseline.baseline_at_start), from_blocks});
  }
  if (baseline.baseline_at_start < 0) {
    warnings.emplace_back(finding::NegativeBaseline{baseline.baseline_at_start});
  }
  if (result.event_count > 0 && !result.has_time) warnings.emplace_back(finding::NoTimestamps{});
  for (const OomReport& oom : result.ooms) {
    warnings.emplace_back(finding::OutOfMemory{result.device, oom.requested, oom.device_free});
  }
  if (!options.device && result.devices.size() > 1) {
    std::vector<int> oom_devices;
    for (int device : result.devices) {
      const DeviceTrace other = trace_or_empty(snapshot, device);
      if (device == result.device) continue;
      for (uint64_t i = other.begin; i < other.end; ++i) {
        if (events.action[i] == Action::kOom) {
          oom_devices.push_back(device);
          break;
        }
      }
    }
    warnings.emplace_back(
        finding::OtherDevices{std::nullopt, result.device, result.devices, oom_devices});
  }
  const DecodeAnomalies& anomalies = snapshot.anomalies;
  for (const MalformedField& field : anomalies.malformed_fields) {
    warnings.emplace_back(finding::MalformedField{field.field, field.found});
  }
  if (anomalies.flat_device_traces) warnings.emplace_back(finding::FlatDeviceTraces{});
  if (result.times_backwards != 0) {
    warnings.emplace_back(finding::TimesGoBackwards{result.times_backwards});
  }
  if (!result.steps_ending_before_start.empty()) {
    warnings.emplace_back(finding::StepsEndBeforeStart{result.steps_ending_before_start});
  }
  if (anomalies.malformed_entries != 0) {
    warnings.emplace_back(finding::MalformedEntries{anomalies.malformed_entries});
  }
  if (anomalies.malformed_segments != 0 || anomalies.malformed_blocks != 0) {
    warnings.emplace_back(
        finding::MalformedSegments{anomalies.malformed_segments, anomalies.malformed_blocks});
  }
  if (anomalies.malformed_annotations != 0) {
    warnings.emplace_back(finding::MalformedAnnotations{anomalies.malformed_annotations});
  }
  if (anomalies.unusable_times != 0) {
    warnings.emplace_back(finding::UnusableTimes{anomalies.unusable_times});
  }
  result.fragmentation = fragmentation.get();
  if (const int64_t origin = trace_start_us(snapshot, trace);
      origin != 0 && result.fragmentation.peak_free_position > 0 &&
      events.time_us[trace.begin + result.fragmentation.peak_free_position - 1] != 0) {
    result.peak_free_time_s =
        static_cast<double>(
            events.time_us[trace.begin + result.fragmentation.peak_free_position - 1] - origin) /
        1e6;
  }
  return result;
}

}  // namespace memsnap
