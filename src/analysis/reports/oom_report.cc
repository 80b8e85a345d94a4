#include "analysis/reports/oom_report.h"

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "analysis/core/categories.h"
#include "analysis/core/segments.h"
#include "memsnap/error.h"
#include "memsnap/replay.h"

namespace memsnap {

std::string_view verdict_name(OomVerdict verdict) {
  switch (verdict) {
    case OomVerdict::kCapacity: return "capacity";
    case OomVerdict::kFragmentation: return "fragmentation";
    case OomVerdict::kPoolsOrStreams: return "private_pools_or_streams";
    case OomVerdict::kOutside: return "outside_pytorch";
    case OomVerdict::kSpike: return "spike";
    case OomVerdict::kUnexplained: return "unexplained";
  }
  return "capacity";
}

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

bool changes_allocator(Action action) {
  switch (action) {
    case Action::kAlloc:
    case Action::kFreeRequested:
    case Action::kFreeCompleted:
    case Action::kSegmentAlloc:
    case Action::kSegmentFree:
    case Action::kSegmentMap:
    case Action::kSegmentUnmap: return true;
    default: return false;
  }
}

// Traced blocks whose free was requested and not completed yet (the
// allocator holds them until the stream work that used them is done).
struct AwaitingFree {
  const Snapshot& snapshot;
  const LiveSet* live = nullptr;
  absl::flat_hash_map<uint64_t, uint64_t> pending;  // addr -> size
  uint64_t bytes = 0;

  void on_other(uint64_t event) {
    if (snapshot.events.action[event] != Action::kFreeRequested) return;
    const uint64_t addr = snapshot.events.addr[event];
    auto found = live->find(addr);
    if (found == live->end()) return;  // allocated before the trace: unknown size
    if (pending.try_emplace(addr, found->second.size).second) bytes += found->second.size;
  }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) { settle(freed); }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) { settle(replaced); }
  void settle(const LiveAllocation& gone) {
    const uint64_t addr = snapshot.events.addr[gone.event];
    if (auto it = pending.find(addr); it != pending.end()) {
      bytes -= it->second;
      pending.erase(it);
    }
  }
};

bool expandable_in_settings(const Snapshot& snapshot, int device) {
  if (snapshot.allocator_settings.expandable_segments) {
    return *snapshot.allocator_settings.expandable_segments;
  }
  return std::any_of(snapshot.segments.begin(), snapshot.segments.end(),
                     [&](const Segment& s) { return s.device == device && s.is_expandable; });
}

}  // namespace

std::string_view block_facts_name(BlockFacts facts) {
  switch (facts) {
    case BlockFacts::kUnknown: return "unknown";
    case BlockFacts::kDump: return "dump";
    case BlockFacts::kReplayed: return "replayed";
    case BlockFacts::kApproximate: return "approximate";
  }
  return "unknown";
}

namespace {

// Largest free block, free bytes by pool and stream: from the dump when it is
// the moment's state, else from the state replayed to `position`.
void fill_block_facts(const FileAnalysis& file, uint64_t position, uint64_t stream,
                      OomState& state) {
  const Snapshot& snapshot = file.snapshot();
  SegmentReport blocks;
  if (state.entries_after == 0) {
    blocks = segments_at_dump(file.path(), snapshot, file.device());
    state.block_facts = BlockFacts::kDump;
  } else {
    // Entries after the moment: the trace is not empty, so analyze_file replayed it.
    const AllocatorHistory& history = *file.allocator_history();
    const HistoryCheck& check = history.check();
    if (!check.possible) {
      state.block_facts_unknown = check.impossible_reason;
      return;
    }
    blocks = segments_at_state(file.path(), file.device(), history.at(position));
    state.block_facts = check.exact ? BlockFacts::kReplayed : BlockFacts::kApproximate;
  }
  state.groups = blocks.groups;
  for (const PoolStreamRow& group : blocks.groups) {
    if (group.pool.is_default() && group.stream == stream) {
      state.usable_free += group.bytes.free;
      state.largest_usable = std::max(state.largest_usable, group.bytes.largest_free);
    } else {
      state.elsewhere_free += group.bytes.free;
    }
    if (!group.pool.is_default()) state.private_pool_reserved += group.bytes.reserved;
  }
  state.block_awaiting_free = blocks.totals.awaiting_free;
}

// The verdict (docs/commands/oom.md lists these rules).
void judge(const OomAnalysis& report, const OomOptions& options, OomCase& c) {
  const OomState& state = c.state;
  const uint64_t free_bytes = static_cast<uint64_t>(std::max<int64_t>(state.free, 0));
  const uint64_t usable = state.blocks_known() ? state.usable_free : free_bytes;
  const uint64_t elsewhere =
      state.blocks_known() ? state.elsewhere_free + state.block_awaiting_free : state.awaiting_free;
  const uint64_t request = c.request;
  const uint64_t driver_free = c.device_free.value_or(0);
  c.available = usable + driver_free;
  c.elsewhere = elsewhere;
  if (report.capacity) {
    const int64_t outside = static_cast<int64_t>(*report.capacity) -
                            static_cast<int64_t>(state.reserved) -
                            static_cast<int64_t>(driver_free);
    if (outside > 0) c.outside_bytes = static_cast<uint64_t>(outside);
  }
  if (report.at_peak) return;  // no request failed: the report gives the headroom instead
  const bool fits_by_bytes = c.available >= request;
  const bool fragmentation = fits_by_bytes && driver_free < request &&
                             (!state.blocks_known() || state.largest_usable < request);
  const bool pools = !fits_by_bytes && c.available + elsewhere >= request;
  const bool outside = c.outside_bytes && *c.outside_bytes >= request && *c.outside_bytes >= kGiB;
  // A spike: the trace before the window is at least as long as the window,
  // and at the OOM memory stood above anything the run had survived before by
  // at least the request.
  const bool spike = c.prior_peak && c.time_s >= 2 * options.window_s &&
                     c.growth_bytes >= static_cast<int64_t>(request) &&
                     state.live - *c.prior_peak >= static_cast<int64_t>(request);
  if (fragmentation) {
    c.verdicts.push_back(OomVerdict::kFragmentation);
    c.shortfall = static_cast<int64_t>(request) -
                  static_cast<int64_t>(std::max(state.largest_usable, driver_free));
  } else if (pools) {
    c.verdicts.push_back(OomVerdict::kPoolsOrStreams);
    c.shortfall = static_cast<int64_t>(request - c.available);
  } else {
    c.shortfall = fits_by_bytes ? 0 : static_cast<int64_t>(request - c.available - elsewhere);
    c.verdicts.push_back(outside         ? OomVerdict::kOutside
                         : spike         ? OomVerdict::kSpike
                         : fits_by_bytes ? OomVerdict::kUnexplained
                                         : OomVerdict::kCapacity);
  }
  if (outside && c.verdicts.front() != OomVerdict::kOutside)
    c.verdicts.push_back(OomVerdict::kOutside);
  if (spike && c.verdicts.front() != OomVerdict::kSpike) c.verdicts.push_back(OomVerdict::kSpike);
}

// Where an OOM analysis looks: after `at` entries of the device's trace; `e`
// the entry there (an oom entry, or the allocation that reached the peak),
// kNoEvent at the start.
struct OomMoment {
  uint64_t e = kNoEvent;
  uint64_t at = 0;
};

// What the replay up to the moment found.
struct OomReplay {
  int64_t delta = 0;                // live memory above the trace's start
  uint64_t awaiting_free = 0;       // freed, awaiting their streams
  uint64_t traced_live_at_end = 0;  // bytes the trace's own allocations hold at the moment
};

// The moment asked for (options.at_peak, or the at-th oom entry); nullopt
// where the device has no oom entry to look at.
std::optional<OomMoment> choose_moment(const FileAnalysis& file, const OomOptions& options,
                                       OomCase& c) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  const std::vector<uint64_t>& ooms = file.trace_analysis().counts.oom_events;
  const int64_t t0 = file.time().start_us();
  // The moment: after `at` entries of the trace; `e` the entry there (an oom
  // entry, or the allocation that reached the peak), kNoEvent at the start.
  OomMoment m;
  if (options.at_peak) {
    c.ordinal = 0;
    m.at = file.full_peak_position();
    c.at_trace_start = m.at == 0;
    if (m.at > 0) m.e = trace.begin + m.at - 1;
    c.has_time = t0 != 0;
  } else {
    if (ooms.empty()) return std::nullopt;
    if (options.at < 1 || static_cast<uint64_t>(options.at) > ooms.size()) {
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format("oom entry {} asked for: device {} has {} oom entr{} (1-{})", options.at,
                      file.device(), ooms.size(), ooms.size() == 1 ? "y" : "ies", ooms.size()));
    }
    m.e = ooms[static_cast<size_t>(options.at - 1)];
    m.at = m.e + 1 - trace.begin;
    c.ordinal = static_cast<uint64_t>(options.at);
    c.has_time = t0 != 0 && events.time_us[m.e] != 0;
  }
  return m;
}

// The request at the moment: its size, stream, the device's free memory,
// its source and category.
void describe_request(const FileAnalysis& file, const OomMoment& m, SourceIndex& sources,
                      Categorizer& categories, OomCase& c) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  const int64_t t0 = file.time().start_us();
  if (m.e == kNoEvent) return;
  const uint64_t e = m.e;
  c.event = e - trace.begin;
  c.time_s = c.has_time ? static_cast<double>(events.time_us[e] - t0) / 1e6 : 0;
  c.request = events.size[e];
  c.stream = events.stream[e];
  if (auto it = events.device_free.find(e); it != events.device_free.end()) {
    c.device_free = it->second;
  } else if (events.action[e] == Action::kOom && !events.without_addr.contains(e) &&
             events.addr[e] != 0) {
    c.device_free = events.addr[e];  // before device_free had a key of its own
  }
  const StackId stack = events.stack[e];
  c.request_source = sources.name(sources.of(LiveAllocation{c.request, stack, e, 0}));
  c.request_category = std::string(category_name(categories.of(e, stack)));
}

// Live memory at the moment and window_s before it (by source, and what grew
// in the window), by category at the moment, awaiting free then.
OomReplay replay_to_moment(const FileAnalysis& file, const OomOptions& options, const OomMoment& m,
                           SourceIndex& sources, SourceIndex& category_index, OomCase& c) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const uint64_t before =
      c.has_time ? std::min(m.at, file.time().position_at(c.time_s - options.window_s)) : m.at;
  Replay replay(snapshot);
  AwaitingFree awaiting{snapshot, &replay.live(), {}, 0};
  replay.run(trace.begin, trace.begin + before, awaiting);
  const int64_t delta_before = replay.delta();
  // A window that starts at the trace's first event has nothing before it.
  if (c.has_time && before > 0) {
    c.prior_peak = file.baseline().baseline_at_start + replay.totals().peak_delta;
  }
  replay.run(trace.begin + before, trace.begin + m.at, awaiting);
  // Deltas stay within +-2^61 (the decoder's byte budgets), so these sums cannot overflow.
  c.growth_bytes = replay.delta() - delta_before;
  // Memory allocated before the trace counts under its own source (its
  // frameless bytes as `<no frames>`), so that the tables add up.
  BaselineSources baseline = baseline_sources(snapshot, file.baseline_pieces(), sources);
  const BaselineSources* with_baseline = &baseline;
  auto rows =
      live_by_source(snapshot, trace, sources, std::vector<uint64_t>{before, m.at}, with_baseline);
  c.live_by_source = rows[1];
  SourceComparison grown = compare_sources(rows[0], rows[1]);
  for (const SourceDiff& row : grown.rows) {
    if (row.delta() > 0) c.growth.push_back(GrowthRow{row.source, row.delta()});
  }
  std::stable_sort(c.growth.begin(), c.growth.end(),
                   [](const GrowthRow& a, const GrowthRow& b) { return a.bytes > b.bytes; });
  BaselineSources baseline_categories =
      baseline_sources(snapshot, file.baseline_pieces(), category_index);
  c.live_by_category = live_at(snapshot, trace, category_index, m.at, &baseline_categories).sources;
  c.live_includes_baseline = !baseline.rows(sources).empty();
  return {replay.delta(), awaiting.bytes, replay.totals().live_bytes_at_end};
}

// Steps: the one the moment fell in, and the highest complete step before it.
void find_steps_around(const FileAnalysis& file, const OomMoment& m, OomCase& c) {
  const EventColumns& events = file.snapshot().events;
  if (c.has_time && m.e != kNoEvent) {
    const int64_t moment_us = events.time_us[m.e];
    for (const StepStats& stats : file.trace_analysis().steps) {
      const ProfilerStep& step = stats.step;
      if (step.start_us <= moment_us && (!step.complete || moment_us <= step.end_us)) {
        c.oom_step = step.number;
      } else if (step.complete && step.end_us < moment_us) {
        const int64_t peak = file.step_absolute_peak(stats);
        if (!c.prior_step_peak || peak > *c.prior_step_peak) {
          c.prior_step_peak = peak;
          c.prior_step = step.number;
        }
      }
    }
  }
}

// The allocator at the moment.
void fill_state(const FileAnalysis& file, const OomMoment& m, const OomReplay& replayed,
                OomCase& c) {
  const Snapshot& snapshot = file.snapshot();
  const DeviceTrace& trace = file.trace();
  const EventColumns& events = snapshot.events;
  OomState& state = c.state;
  state.entries_after = static_cast<uint64_t>(std::count_if(
      events.action.begin() + static_cast<std::ptrdiff_t>(trace.begin + m.at),
      events.action.begin() + static_cast<std::ptrdiff_t>(trace.end), changes_allocator));
  state.reserved = file.reserved().at_position(trace, m.at);
  state.live = file.baseline().baseline_at_start + replayed.delta;
  state.awaiting_free = replayed.awaiting_free;
  state.free =
      static_cast<int64_t>(state.reserved) - state.live - static_cast<int64_t>(state.awaiting_free);
  state.dump_is_oom_state = state.entries_after == 0;
  fill_block_facts(file, m.at, c.stream, state);
}

// When the moment is the dump's state and the trace names less than half of
// what was live (recording started late, or there is no trace), the dump's
// blocks name it instead.
void name_live_from_blocks(const FileAnalysis& file, const OomReplay& replayed,
                           SourceIndex& sources, SourceIndex& category_index, OomCase& c) {
  const Snapshot& snapshot = file.snapshot();
  const OomState& state = c.state;
  if (state.dump_is_oom_state && state.live > 0 &&
      2 * replayed.traced_live_at_end < static_cast<uint64_t>(state.live)) {
    std::vector<SourceUsage> by_source = live_at_dump_by_source(snapshot, file.device(), sources);
    if (!by_source.empty()) {
      c.live_by_source = std::move(by_source);
      c.live_by_category = live_at_dump_by_source(snapshot, file.device(), category_index);
      c.live_from_blocks = true;
      c.live_includes_baseline = false;
    }
  }
}

}  // namespace

OomAnalysis analyze_oom(const FileAnalysis& file, const OomOptions& options) {
  file.start_allocator_history();  // the block facts read it; it runs beside the rest
  const std::string& path = file.path();
  const Snapshot& snapshot = file.snapshot();
  OomAnalysis report;
  report.file = path;
  report.window_s = options.window_s;
  report.at_peak = options.at_peak;
  if (options.capacity != 0) report.capacity = options.capacity;
  report.devices_with_oom = snapshot.devices_with_oom();
  report.device = file.device();
  report.expandable_segments = expandable_in_settings(snapshot, file.device());
  const DeviceTrace& trace = file.trace();
  report.oom_count = file.trace_analysis().counts.oom_events.size();
  report.event_count = trace.count();
  report.malformed_entries = snapshot.anomalies.malformed_entries;
  OomCase c;
  const std::optional<OomMoment> moment = choose_moment(file, options, c);
  if (!moment) return report;
  SourceIndex sources(snapshot, options.keys);
  Categorizer categories(snapshot, options.keys.category_rules);
  describe_request(file, *moment, sources, categories, c);
  SourceKeyOptions by_category = options.keys;
  by_category.group = GroupBy::kCategory;
  SourceIndex category_index(snapshot, by_category);
  const OomReplay replayed = replay_to_moment(file, options, *moment, sources, category_index, c);
  find_steps_around(file, *moment, c);
  fill_state(file, *moment, replayed, c);
  name_live_from_blocks(file, replayed, sources, category_index, c);
  judge(report, options, c);
  if (!options.at_peak && c.ordinal == 1) {
    report.prediction = predict_first_oom(
        file, options.capacity != 0 ? std::optional<uint64_t>(options.capacity) : std::nullopt);
  }
  report.chosen = std::move(c);
  return report;
}

OomRankRow oom_rank_row(const FileAnalysis& file, const OomAnalysis& analysis) {
  OomRankRow row;
  row.file = file.path();
  row.device = analysis.device;
  row.oom_count = analysis.oom_count;
  if (analysis.chosen && !analysis.at_peak) {
    const OomCase& c = *analysis.chosen;
    if (!c.verdicts.empty()) row.verdict = c.verdicts.front();
    row.request = c.request;
    row.device_free = c.device_free;
    row.live = c.state.live;
    row.time_us = file.snapshot().events.time_us[file.trace().begin + c.event];
  }
  return row;
}

std::optional<size_t> first_oom_row(const std::vector<OomRankRow>& rows) {
  std::optional<size_t> first;
  auto earlier = [](const OomRankRow& a, const OomRankRow& b) {
    if ((a.time_us != 0) != (b.time_us != 0)) return a.time_us != 0;
    return a.time_us < b.time_us;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].oom_count == 0 || !rows[i].error.empty()) continue;
    if (!first || earlier(rows[i], rows[*first])) first = i;
  }
  return first;
}

}  // namespace memsnap
