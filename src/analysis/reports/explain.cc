#include "analysis/reports/explain.h"

#include <algorithm>

#include "analysis/core/segments.h"
#include "analysis/core/steps.h"

namespace memsnap {
namespace {

bool any_stack(const Snapshot& snapshot, const DeviceTrace& trace) {
  const auto* first = snapshot.events.stack.data() + trace.begin;
  return std::any_of(first, first + trace.count(), [](StackId stack) { return stack.valid(); });
}

ExplainOom first_oom(const FileAnalysis& file, const ExplainOptions& options) {
  OomOptions oom_options;
  oom_options.keys = options.keys;
  const OomAnalysis analysis = analyze_oom(file, oom_options);
  ExplainOom oom;
  oom.count = analysis.oom_count;
  if (!analysis.chosen) return oom;
  const OomCase& c = *analysis.chosen;
  oom.event = c.event;
  if (c.has_time) oom.time_s = c.time_s;
  oom.request = c.request;
  oom.device_free = c.device_free;
  oom.live = c.state.live;
  oom.reserved = c.state.reserved;
  oom.free = c.state.free;
  if (c.state.blocks_known()) oom.largest_usable = c.state.largest_usable;
  oom.verdicts = c.verdicts;
  oom.request_source = c.request_source;
  oom.shortfall = c.shortfall;
  oom.prediction = analysis.prediction;
  return oom;
}

}  // namespace

std::string_view lack_name(Lack lack) {
  switch (lack) {
    case Lack::kNoTrace: return "no_trace";
    case Lack::kTraceTruncated: return "trace_truncated";
    case Lack::kNoStacks:
    case Lack::kNoTraceStacks: return "no_stacks";
    case Lack::kNoTimes: return "no_times";
    case Lack::kNoBlockFrames: return "no_block_frames";
  }
  return "unknown";
}

namespace {

// Every device of the file: its entries, OOMs and reserved memory.
void add_devices(const Snapshot& snapshot, ExplainReport& r) {
  for (int device : r.choice.devices) {
    ExplainDevice row;
    row.device = device;
    if (const DeviceTrace* t = snapshot.trace_of(device)) {
      row.entries = t->count();
      row.oom_count = snapshot.count_of(*t, Action::kOom);
    }
    row.reserved = segment_totals(snapshot, device).total_size;
    r.devices.push_back(row);
  }
  r.empty =
      snapshot.segments.empty() && std::all_of(snapshot.devices.begin(), snapshot.devices.end(),
                                               [](const DeviceTrace& t) { return t.count() == 0; });
}

// The peak, and what was live then: the trace's allocations and, where the
// blocks and unmatched frees carry frames, memory from before it. Returns
// whether that memory's sources are known.
bool add_peak(const FileAnalysis& file, const ExplainOptions& options, ExplainReport& r) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const ReplayTotals& totals = file.trace_analysis().totals;
  ExplainPeak& peak = r.peak;
  peak.baseline = file.baseline().baseline_at_start;
  peak.delta = totals.peak_delta;
  peak.absolute = file.absolute_peak();
  peak.at_trace_start = totals.peak_event == kNoEvent;
  const uint64_t position = file.full_peak_position();
  if (!peak.at_trace_start) {
    peak.event = totals.peak_event - trace.begin;
    peak.time_s = file.seconds_at(totals.peak_event);
  }
  SourceIndex sources(snapshot, options.keys);
  SourceKeyOptions by_category = options.keys;
  by_category.group = GroupBy::kCategory;
  SourceIndex categories(snapshot, by_category);
  const BaselineSources baseline = baseline_sources(snapshot, file.baseline_pieces(), sources);
  const BaselineSources baseline_categories =
      baseline_sources(snapshot, file.baseline_pieces(), categories);
  // Always counted, so that the tables add up to the figure above them:
  // bytes without frames are one `<no frames>` row (category unknown).
  r.baseline_by_source = baseline.rows(sources);
  r.baseline_by_category = baseline_categories.rows(categories);
  peak.includes_baseline = !r.baseline_by_source.empty();
  peak.by_source = live_at(snapshot, trace, sources, position, &baseline).sources;
  peak.by_category = live_at(snapshot, trace, categories, position, &baseline_categories).sources;

  const ReservedHistory& reserved = file.reserved();
  peak.reserved = reserved.at_position(trace, position);
  peak.reserved_peak = reserved.peak;
  r.reserved_at_dump = reserved.at_dump;
  r.allocated_at_dump = file.segments().allocated_size;
  if (trace.count() > 0) {
    const FragmentationHistory& fragmentation = file.fragmentation();
    if (fragmentation.known) {
      peak.free_at_reserved_peak = fragmentation.free_at_reserved_peak;
      peak.largest_free_at_reserved_peak = fragmentation.largest_free_at_reserved_peak;
    }
  }
  return baseline.known;
}

// The complete steps, and the one that peaked highest.
void add_steps(const FileAnalysis& file, ExplainReport& r) {
  r.steps.origin = file.step_windows().inference();
  for (const StepStats& stats : file.trace_analysis().steps) {
    if (!stats.step.complete) continue;
    ++r.steps.count;
    const int64_t step_peak = file.step_absolute_peak(stats);
    if (!r.steps.highest || step_peak > r.steps.highest_peak) {
      r.steps.highest = stats.step.number;
      r.steps.highest_peak = step_peak;
    }
  }
}

// What the file lacks, and which commands are worth running next.
void add_lacks_and_next(const FileAnalysis& file, bool baseline_known, ExplainReport& r) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const ReplayTotals& totals = file.trace_analysis().totals;
  const bool has_trace = trace.count() > 0;
  const ExplainPeak& peak = r.peak;
  if (!has_trace) {
    r.lacks.push_back(Lack::kNoTrace);
  } else {
    if (trace_looks_truncated(totals)) {
      r.lacks.push_back(Lack::kTraceTruncated);
      r.trace_cut = trace_cut(trace.count());
    }
    if (!any_stack(snapshot, trace))
      r.lacks.push_back(baseline_known ? Lack::kNoTraceStacks : Lack::kNoStacks);
    if (file.trace_analysis().counts.first_time_us == 0) r.lacks.push_back(Lack::kNoTimes);
  }
  // Worth saying only when that memory matters: 1 MiB and 1% of the peak.
  const int64_t worth = std::max<int64_t>(int64_t{1} << 20, peak.absolute / 100);
  if (peak.baseline >= worth && !baseline_known) r.lacks.push_back(Lack::kNoBlockFrames);

  if (r.oom) r.next.push_back(NextCommand::kOom);
  // replay-to-time lists the trace's allocations: all that was live at the
  // peak only where memory from before the trace is under 1% of it.
  if (has_trace && peak.time_s) {
    r.next.push_back(peak.baseline * 100 <= peak.absolute ? NextCommand::kReplayToTime
                                                          : NextCommand::kReplayToTimeTraced);
  }
  if (r.steps.highest) r.next.push_back(NextCommand::kReplayStep);
  // A plot of a trace whose line never moves (one entry, a 2.0 dump) is a flat line.
  if (totals.alloc_count + totals.free_count >= 2) r.next.push_back(NextCommand::kPlot);
  r.next.push_back(NextCommand::kSegments);
  for (int device : r.choice.oom_devices) {
    if (device != r.choice.device) {
      r.other_oom_device = device;
      r.next.push_back(NextCommand::kOtherDevice);
      break;
    }
  }
}

}  // namespace

ExplainReport explain_file(const FileAnalysis& file, const ExplainOptions& options) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  ExplainReport r;
  r.file = file.path();
  r.file_size = snapshot.file_size;
  r.choice = file.device_choice();
  if (trace.count() > 0) file.start_allocator_history();  // fragmentation at the reserved peak
  add_devices(snapshot, r);
  const TraceCounts& counts = file.trace_analysis().counts;
  r.event_count = trace.count();
  if (counts.first_time_us != 0) {
    r.duration_s = static_cast<double>(counts.latest_time_us - counts.first_time_us) / 1e6;
  }
  const bool baseline_known = add_peak(file, options, r);
  if (!counts.oom_events.empty()) r.oom = first_oom(file, options);
  add_steps(file, r);
  add_lacks_and_next(file, baseline_known, r);
  return r;
}

}  // namespace memsnap
