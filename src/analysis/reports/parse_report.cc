#include "analysis/reports/parse_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "analysis/core/file_analysis.h"
#include "analysis/core/sources.h"
#include "analysis/reports/oom_report.h"
#include "snapshot/allocator_settings.h"

namespace memsnap {
namespace {

// Thresholds of the warnings; see docs/commands/parse.md.
constexpr double kBaselineShareWarning = 0.5;
constexpr uint64_t kBaselineBytesWarning = uint64_t{64} << 20;

// Bytes and counts of every allocation by source. Every alloc entry counts,
// whatever became of it, so this needs no replay: the entry alone names it.
std::vector<SourceThroughput> throughput_by_source(const Snapshot& snapshot,
                                                   const DeviceTrace& trace, SourceIndex& sources) {
  const EventColumns& events = snapshot.events;
  std::vector<SourceThroughput> rows;  // indexed by source id
  uint64_t ordinal = 0;
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (events.action[i] != Action::kAlloc) continue;
    const LiveAllocation added{events.size[i], events.stack[i], i, ordinal++};
    const uint32_t source = sources.of(added);
    if (source >= rows.size()) rows.resize(source + 1);
    rows[source].throughput_bytes += added.size;
    ++rows[source].alloc_count;
  }
  for (uint32_t source = 0; source < rows.size(); ++source)
    rows[source].source = sources.name(source);
  return rows;
}

// The peak and the trace's counts (PeakFacts).
PeakFacts peak_facts(const FileAnalysis& file) {
  const DeviceTrace& trace = file.trace();
  const TraceAnalysis& analysis = file.trace_analysis();
  const TraceCounts& counts = analysis.counts;
  const ReplayTotals& totals = analysis.totals;
  PeakFacts facts;
  facts.event_count = trace.count();
  facts.alloc_count = totals.alloc_count;
  facts.unmatched_free_count = totals.unmatched_free_count;
  facts.unmatched_free_bytes = totals.unmatched_free_bytes;
  facts.has_time = counts.first_time_us != 0;
  facts.trace_duration_s =
      static_cast<double>(counts.latest_time_us - counts.earliest_time_us) / 1e6;
  facts.baseline = file.baseline().baseline_at_start;
  facts.peak_delta = totals.peak_delta;
  facts.absolute_peak = add_bytes(facts.baseline, static_cast<uint64_t>(totals.peak_delta));
  if (totals.peak_event != kNoEvent) {
    facts.peak_event = totals.peak_event - trace.begin;
    facts.peak_time_s = file.seconds_at(totals.peak_event);
  } else if (facts.has_time) {
    facts.peak_time_s = 0.0;  // the delta never rose above the start
  }
  facts.reserved_peak = file.reserved().peak;
  facts.reserved_peak_time_s = file.seconds_at(file.reserved().peak_event);
  return facts;
}

// The trace: its replay totals, baseline, actions, OOMs.
void read_trace(const FileAnalysis& file, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  result.facts = peak_facts(file);
  result.reserved = file.reserved();

  const TraceAnalysis& analysis = file.trace_analysis();
  const TraceCounts& counts = analysis.counts;
  result.replay = analysis.totals;
  result.free_frames = analysis.counts.free_frames;
  // Reports count events within the device's trace, not the model's columns.
  if (result.replay.peak_event != kNoEvent) result.replay.peak_event -= trace.begin;
  result.baseline = file.baseline();
  result.times_backwards = counts.times_backwards;
  result.actions = counts.other_actions;
  for (int a = 0; a < kActionCount; ++a) {
    if (counts.actions[static_cast<size_t>(a)] != 0) {
      result.actions[std::string(action_name(static_cast<Action>(a)))] =
          counts.actions[static_cast<size_t>(a)];
    }
  }
  for (const uint64_t i : counts.oom_events) {
    OomEntry oom{i - trace.begin, events.size[i], std::nullopt, events.time_us[i]};
    if (auto it = events.device_free.find(i); it != events.device_free.end()) {
      oom.device_free = it->second;
    }
    result.ooms.push_back(oom);
  }
}

// Sources by allocated bytes, most first.
void add_throughput(const FileAnalysis& file, SourceIndex& source_ids, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  std::vector<SourceThroughput> sources = throughput_by_source(snapshot, trace, source_ids);
  std::sort(sources.begin(), sources.end(), [](const auto& a, const auto& b) {
    return a.throughput_bytes != b.throughput_bytes ? a.throughput_bytes > b.throughput_bytes
                                                    : a.source < b.source;
  });
  result.throughput = std::move(sources);
}

// The steps and the record_function ranges by kind.
void add_steps_and_annotations(const FileAnalysis& file, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  result.steps = file.steps();
  result.steps_origin = file.step_windows().inference();
  result.step_source = file.step_source();
  if (result.steps.empty()) result.step_marks = count_step_marks(file.snapshot(), file.trace());
  result.steps_ending_before_start = file.steps_ending_before_start();
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != result.device) continue;
    ++result.annotation_count;
    if (note.stage != Stage::kStart) continue;
    std::string_view name = snapshot.strings.get(note.name);
    ++result.annotation_kinds[std::string(name.substr(0, name.find('#')))];
  }
}

// One row per device, where the file has several.
void add_per_device(const FileAnalysis& file, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  const TraceAnalysis& analysis = file.trace_analysis();
  if (result.devices.size() > 1) {
    for (int device : result.devices) {
      DeviceOverview row;
      row.device = device;
      row.segments = device == result.device ? file.segments() : segment_totals(snapshot, device);
      if (const DeviceTrace* device_trace = snapshot.trace_of(device)) {
        // The chosen device was replayed above.
        ReplayTotals totals =
            device == result.device ? analysis.totals : replay_device(snapshot, *device_trace);
        row.event_count = device_trace->count();
        row.alloc_count = totals.alloc_count;
        row.peak_delta = totals.peak_delta;
        row.unmatched_free_count = totals.unmatched_free_count;
        row.baseline_at_start = compute_baseline(row.segments, totals).baseline_at_start;
        row.oom_count = snapshot.count_of(*device_trace, Action::kOom);
      } else {
        row.baseline_at_start = static_cast<int64_t>(row.segments.active_size);
      }
      row.absolute_peak = add_bytes(row.baseline_at_start, static_cast<uint64_t>(row.peak_delta));
      result.per_device.push_back(row);
    }
  }
}

// Where the trace cannot name the live memory (none, or most of it was
// allocated before recording started), the segments' blocks can. Returns
// whether the baseline is large enough to warn of.
bool add_live_at_dump(const FileAnalysis& file, SourceIndex& source_ids, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  const Baseline& baseline = result.baseline;
  bool large_baseline =
      result.facts.event_count > 0 && baseline.baseline_at_start > 0 &&
      static_cast<uint64_t>(baseline.baseline_at_start) >= kBaselineBytesWarning &&
      static_cast<double>(baseline.baseline_at_start) >=
          kBaselineShareWarning * static_cast<double>(baseline.segments_active);
  if (result.facts.event_count == 0 || large_baseline) {
    result.live_at_dump = live_at_dump_by_source(snapshot, result.device, source_ids);
  }
  return large_baseline;
}

// Warnings a user needs before trusting the numbers.
void add_warnings(const FileAnalysis& file, bool large_baseline, ParseReport& result) {
  const Snapshot& snapshot = file.snapshot();
  const Baseline& baseline = result.baseline;
  // The blocks name the live memory only where some carry frames (else one <no frames> row).
  const bool from_blocks =
      std::any_of(result.live_at_dump.begin(), result.live_at_dump.end(),
                  [](const SourceUsage& row) { return row.source != kNoFrames; });
  auto& warnings = result.warnings;
  if (result.facts.event_count == 0) warnings.emplace_back(finding::NoHistory{from_blocks});
  const ReplayTotals& replay = result.replay;
  if (trace_looks_truncated(replay)) {
    warnings.emplace_back(finding::TruncatedTrace{
        replay.unmatched_free_count, replay.free_count, replay.unmatched_free_bytes,
        trace_cut(result.facts.event_count), result.facts.event_count});
  }
  if (large_baseline) {
    warnings.emplace_back(
        finding::LargeBaseline{static_cast<uint64_t>(baseline.baseline_at_start), from_blocks});
  }
  if (baseline.baseline_at_start < 0) {
    warnings.emplace_back(finding::NegativeBaseline{baseline.baseline_at_start});
  }
  if (result.facts.event_count > 0 && !result.facts.has_time)
    warnings.emplace_back(finding::NoTimestamps{});
  for (size_t i = 0; i < std::min(result.ooms.size(), finding::kOomFindings); ++i) {
    const OomEntry& oom = result.ooms[i];
    warnings.emplace_back(finding::OutOfMemory{result.device, oom.requested, oom.device_free});
  }
  if (result.ooms.size() > finding::kOomFindings) {
    warnings.emplace_back(finding::MoreOutOfMemory{
        result.device, result.ooms.size() - finding::kOomFindings, result.ooms.size()});
  }
  const DeviceChoice& choice = file.device_choice();
  if (!file.device_requested() && choice.others()) {
    std::vector<int> oom_devices = choice.oom_devices;
    std::erase(oom_devices, result.device);
    warnings.emplace_back(finding::OtherDevices{std::nullopt, result.device, choice.reason,
                                                choice.devices, oom_devices});
  }
  const DecodeAnomalies& anomalies = snapshot.anomalies;
  for (const MalformedField& field : anomalies.malformed_fields) {
    warnings.emplace_back(finding::MalformedField{field.field, field.found});
  }
  for (const auto& [key, value] : snapshot.allocator_settings.unread) {
    warnings.emplace_back(finding::UnreadSetting{key, value});
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
  if (anomalies.truncated_strings != 0) {
    warnings.emplace_back(finding::TruncatedStrings{anomalies.truncated_strings});
  }
  if (anomalies.unusable_times != 0) {
    warnings.emplace_back(finding::UnusableTimes{anomalies.unusable_times});
  }
  if (anomalies.bytes_after_stop != 0 || anomalies.bytes_after_compressed != 0) {
    warnings.emplace_back(
        finding::BytesNotRead{anomalies.bytes_after_stop, anomalies.bytes_after_compressed});
  }
}

}  // namespace

ParseReport parse_report(const FileAnalysis& file, const ParseOptions& options) {
  file.start_allocator_history();
  const Snapshot& snapshot = file.snapshot();
  ParseReport result;
  result.group = options.keys.group;
  result.file = file.path();
  result.file_size_bytes = snapshot.file_size;
  result.pickle_bytes = snapshot.pickle_size;
  result.compression = snapshot.compression;
  result.pickle_protocol = snapshot.pickle_protocol;
  result.device = file.device();
  result.device_requested = file.device_requested();
  result.devices = snapshot.devices_in_use();
  result.top_level_list = snapshot.top_level_list;
  result.legacy_format = snapshot.legacy_block_history;
  result.allocator_settings = allocator_settings_json(snapshot.allocator_settings);
  result.segments = file.segments();
  result.distinct_frames = snapshot.frames.size() - 1;
  result.distinct_stacks = snapshot.stacks.size();
  result.anomalies = snapshot.anomalies;

  read_trace(file, result);
  SourceIndex source_ids(snapshot, options.keys);
  add_throughput(file, source_ids, result);
  add_steps_and_annotations(file, result);
  add_per_device(file, result);
  const bool large_baseline = add_live_at_dump(file, source_ids, result);
  add_warnings(file, large_baseline, result);
  result.fragmentation = file.fragmentation();
  if (result.fragmentation.peak_free_position > 0) {
    result.peak_free_time_s =
        file.seconds_at(file.trace().begin + result.fragmentation.peak_free_position - 1);
  }
  return result;
}

}  // namespace memsnap
