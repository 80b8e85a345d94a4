#include "analysis/reports/whatif.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <future>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/pytorch_allocator_policy.h"

namespace memsnap {
namespace {

// Reserved memory at the file's first oom entry plus the driver's free
// memory then: what this process could have had.
std::optional<uint64_t> capacity_at_oom(const FileAnalysis& file) {
  const std::vector<uint64_t>& ooms = file.trace_analysis().counts.oom_events;
  if (ooms.empty()) return std::nullopt;
  const uint64_t i = ooms.front();
  const EventColumns& events = file.snapshot().events;
  auto free = events.device_free.find(i);
  const uint64_t device_free = free != events.device_free.end() ? free->second : events.addr[i];
  return file.reserved().at_position(file.trace(), i - file.trace().begin) + device_free;
}

// The capacity the model runs within: given, or what the process could have
// had at the first oom entry, or none.
std::pair<uint64_t, WhatIfReport::CapacityFrom> capacity_of(const FileAnalysis& file,
                                                            std::optional<uint64_t> given) {
  if (given) return {*given, WhatIfReport::CapacityFrom::kGiven};
  if (const std::optional<uint64_t> at_oom = capacity_at_oom(file)) {
    return {*at_oom, WhatIfReport::CapacityFrom::kOom};
  }
  return {kNoCapacity, WhatIfReport::CapacityFrom::kNone};
}

// Reserved memory as the file recorded it (the reserved part), at its
// highest after any entry of each column of `width` entries.
std::vector<uint64_t> recorded_timeline(const FileAnalysis& file, uint64_t width) {
  const ReservedHistory& reserved = file.reserved();
  const DeviceTrace& trace = file.trace();
  std::vector<uint64_t> out((trace.count() + width - 1) / width, 0);
  const auto at_least_0 = [](int64_t bytes) {
    return static_cast<uint64_t>(std::max<int64_t>(bytes, 0));
  };
  uint64_t level = reserved.at_start;  // after the entries so far
  auto step = reserved.steps.begin();
  for (uint64_t column = 0; column < out.size(); ++column) {
    const uint64_t first = trace.begin + column * width;
    const uint64_t end = std::min(trace.end, first + width);
    // The level carried in counts unless the column's first entry changes it.
    uint64_t high = step != reserved.steps.end() && step->event == first ? 0 : level;
    for (; step != reserved.steps.end() && step->event < end; ++step) {
      level = at_least_0(step->reserved);
      high = std::max(high, level);
    }
    out[column] = high;
  }
  return out;
}

// The settings people try: the file's own, then each change on its own.
std::vector<WhatIfSettings> settings_to_try(const FileAnalysis& file, const SplitRule& own) {
  std::vector<WhatIfSettings> out;
  out.push_back({"the file's own", own, 0});
  WhatIfSettings expandable{
      own.expandable ? "expandable_segments:False" : "expandable_segments:True", own, 0};
  expandable.split.expandable = !own.expandable;
  out.push_back(expandable);
  // max_split_size at the sizes of the trace's large requests: the median
  // and the 90th percentile of those over 20 MiB, each up to a power of two
  // in MiB (PyTorch needs more than 20).
  const EventColumns& events = file.snapshot().events;
  std::vector<uint64_t> large;
  for (uint64_t i = file.trace().begin; i < file.trace().end; ++i) {
    if (events.action[i] == Action::kAlloc && events.size[i] > pytorch::kLargeBuffer) {
      large.push_back(events.size[i]);
    }
  }
  std::sort(large.begin(), large.end());
  std::vector<uint64_t> splits;
  for (double q : {0.5, 0.9}) {
    if (large.empty()) break;
    const uint64_t size = large[static_cast<size_t>(q * static_cast<double>(large.size() - 1))];
    const uint64_t mib = std::max<uint64_t>(32, std::bit_ceil((size + (1 << 20) - 1) >> 20));
    if (mib <= (uint64_t{1} << 30) &&
        std::find(splits.begin(), splits.end(), mib) == splits.end()) {
      splits.push_back(mib);
    }
  }
  for (uint64_t mib : splits) {
    WhatIfSettings split{"max_split_size_mb:" + std::to_string(mib), own, 0};
    split.split.max_split_size = mib << 20;
    out.push_back(split);
  }
  out.push_back({"garbage_collection_threshold:0.8", own, 0.8});
  WhatIfSettings power2{"roundup_power2_divisions:4", own, 0};
  power2.split.power2_divisions.fill(4);
  out.push_back(power2);
  return out;
}

}  // namespace

namespace {

// What every what-if run shares: the history, the capacity, the file's own
// settings and how far the model reproduces the file. False when the state
// before the trace is unknown (`out` then says why).
bool prepare(const FileAnalysis& file, std::optional<uint64_t> capacity, WhatIfReport& out,
             SplitRule& own, const std::optional<std::string>& conf = std::nullopt) {
  out.file = file.path();
  out.device = file.device();
  const AllocatorHistory* history = usable_history(file, out.impossible_reason);
  if (history == nullptr) return false;
  out.possible = true;
  // With --set, the timelines: the trace in at most kTimelineColumns columns.
  const uint64_t width =
      conf ? std::max<uint64_t>(1, (file.trace().count() + kTimelineColumns - 1) / kTimelineColumns)
           : 0;
  if (conf) out.recorded_timeline = recorded_timeline(file, width);
  for (uint64_t c = 0; c < out.recorded_timeline.size(); ++c) {
    out.timeline_positions.push_back(std::min(file.trace().count(), (c + 1) * width));
  }
  out.recorded_peak_reserved = file.reserved().peak;
  std::tie(out.capacity, out.capacity_from) = capacity_of(file, capacity);
  const SegmentCheck check = check_recorded_segments(file);
  out.model_segments_exact = check.segments_exact();
  out.model_matched_reserves = check.matched_reserves;
  out.recorded_reserves = check.recorded_reserves;
  out.segments_at_start = check.segments_at_start;
  out.start_from = start_from(check);
  out.trace_entries = file.trace().count();
  own = file_rule(file, check.rounding);
  // Each setting's run reads only the file and the history: they run side
  // by side (two cores are the common case).
  std::vector<WhatIfSettings> settings_list =
      conf ? std::vector<WhatIfSettings>{{"the file's own", own, 0}, settings_of_conf(*conf, own)}
           : settings_to_try(file, own);
  std::vector<std::future<std::pair<WhatIfRun, uint64_t>>> runs;
  runs.reserve(settings_list.size());
  for (const WhatIfSettings& settings : settings_list) {
    runs.push_back(std::async(std::launch::async, [&file, history, settings, &out, width] {
      uint64_t floor = 0;
      WhatIfRun run = simulate(file, *history, settings, out.capacity, out.start_from,
                               SimulationOptions{.column_width = width}, &floor);
      return std::pair{std::move(run), floor};
    }));
  }
  for (auto& run : runs) {
    auto [result, floor] = run.get();
    out.runs.push_back(std::move(result));
    out.floor = std::max(out.floor, floor);
  }
  return true;
}

}  // namespace

std::optional<OomPrediction> predict_first_oom(const FileAnalysis& file,
                                               std::optional<uint64_t> capacity) {
  if (file.trace_analysis().counts.oom_events.empty()) return std::nullopt;
  WhatIfReport report;
  SplitRule own;
  if (!prepare(file, capacity, report, own)) return std::nullopt;
  const WhatIfRun& mine = report.runs.front();
  OomPrediction out;
  out.capacity = report.capacity;
  out.needed = mine.live_at_oom +
               pytorch::live_request_bytes(
                   file.snapshot().events.size[file.trace_analysis().counts.oom_events.front()]);
  out.model_reproduces = report.model_segments_exact;
  if (out.needed > out.capacity) {
    out.kind = OomPrediction::Kind::kNothingFits;
    return out;
  }
  for (size_t i = 1; i < report.runs.size(); ++i) {
    if (report.runs[i].first_oom_fit) {
      out.kind = OomPrediction::Kind::kSettingFits;
      out.setting = report.runs[i].settings.label;
      out.peak_reserved = report.runs[i].peak_reserved_to_oom;
      return out;
    }
  }
  out.kind = OomPrediction::Kind::kNoneTriedFits;
  return out;
}

WhatIfReport what_if(const FileAnalysis& file, std::optional<uint64_t> capacity,
                     std::optional<std::string> conf) {
  WhatIfReport out;
  SplitRule own;
  if (conf) settings_of_conf(*conf, own);  // a text the model does not read: refused first
  if (!prepare(file, capacity, out, own, conf)) return out;
  const AllocatorHistory* history = file.allocator_history();
  if (out.capacity_from == WhatIfReport::CapacityFrom::kNone) {
    // No limit: every run fitted, at its own peak. Each bisects below it,
    // side by side.
    std::vector<std::future<uint64_t>> needs;
    needs.reserve(out.runs.size());
    for (const WhatIfRun& run : out.runs) {
      needs.push_back(std::async(std::launch::async, [&file, history, &run, &out] {
        return least_capacity(file, *history, run.settings, out.start_from, out.floor,
                              std::max(run.peak_reserved, out.floor));
      }));
    }
    for (size_t i = 0; i < out.runs.size(); ++i) out.runs[i].capacity_needed = needs[i].get();
    out.capacity_to_fit = out.runs.front().capacity_needed;
    return out;
  }
  // Between the floor and 4 times the capacity; a run that fitted within
  // the capacity fits at its own peak.
  const WhatIfRun& mine = out.runs.front();
  uint64_t high = std::max(out.capacity, out.floor) * 4;
  if (mine.fits()) high = std::min(high, std::max(mine.peak_reserved, out.floor));
  if (mine.fits() || simulate(file, *history, mine.settings, high, out.start_from).fits()) {
    out.capacity_to_fit =
        least_capacity(file, *history, mine.settings, out.start_from, out.floor, high);
  }
  return out;
}

SimulatedReservedLine simulated_reserved_line(const FileAnalysis& file, const std::string& conf,
                                              double duration_us) {
  SimulatedReservedLine out;
  out.settings = conf;
  const AllocatorHistory* history = usable_history(file, out.impossible_reason);
  if (history == nullptr) return out;
  out.possible = true;
  std::tie(out.capacity, out.capacity_from) = capacity_of(file, std::nullopt);
  out.recorded_peak_reserved = file.reserved().peak;
  const SegmentCheck check = check_recorded_segments(file);
  out.model_segments_exact = check.segments_exact();
  const WhatIfSettings settings = settings_of_conf(conf, file_rule(file, check.rounding));
  out.start_from = start_from(check);
  BoundedStepSeries by_time(duration_us, out.reserved);
  BoundedStepSeries by_entry(static_cast<double>(file.trace().count()), out.reserved_by_entry);
  const WhatIfRun run = simulate(file, *history, settings, out.capacity, out.start_from,
                                 SimulationOptions{.by_time = &by_time, .by_entry = &by_entry});
  out.peak_reserved = run.peak_reserved;
  out.model_ooms = run.model_ooms;
  return out;
}

}  // namespace memsnap
