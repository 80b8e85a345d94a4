// libFuzzer target: everything after the decoder. Whatever decodes must go
// through every analysis and every renderer (text, JSON, HTML) without a
// crash, a hang or undefined behaviour; refusals are memsnap::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/walk_ahead.h"
#include "analysis/reports/check.h"
#include "analysis/reports/compare.h"
#include "analysis/reports/event_list.h"
#include "analysis/reports/explain.h"
#include "analysis/reports/parse_report.h"
#include "analysis/reports/ranks.h"
#include "analysis/reports/run_summary.h"
#include "analysis/reports/step_report.h"
#include "analysis/reports/time_report.h"
#include "analysis/reports/timeline.h"
#include "formats/budget_file.h"
#include "formats/summary_json.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "report/check_render.h"
#include "report/compare_render.h"
#include "report/event_render.h"
#include "report/explain_render.h"
#include "report/html_plot.h"
#include "report/oom_render.h"
#include "report/parse_render.h"
#include "report/ranks_render.h"
#include "report/segment_render.h"
#include "report/step_render.h"
#include "report/text_chart.h"
#include "report/time_render.h"
#include "snapshot/decoder.h"
#include "text_inputs.h"

namespace {

using memsnap::Error;

// What the command line would print, discarded: only the work matters.
template <typename Json>
void consume(const Json& json) {
  (void)json.dump(2, ' ', false, Json::error_handler_t::replace);
}

void every_report(const memsnap::Snapshot& snapshot, std::optional<int> device) {
  using namespace memsnap;
  // Both naming rules, at two depths.
  const SourceKeyOptions user{1, KeyRule::kUserCode, {}, {}};
  const SourceKeyOptions user_deep{2, KeyRule::kUserCode, {}, {}};
  const SourceKeyOptions reference{1, KeyRule::kReference, {}, {}};
  FileAnalysis file = analyze_file("fuzz", snapshot, device);
  ParseReport parse = parse_report(file, ParseOptions{user_deep});
  (void)render_parse_text(parse, 5);
  consume(render_parse_json(parse, 5));
  const ExplainReport explained = explain_file(file, ExplainOptions{user});
  (void)render_explain_text(explained, 5);
  consume(render_explain_json(explained, 0));

  EventListing events = list_events(snapshot, device, 3, reference);
  const TextSink discard = [](std::string_view) {};
  write_events_text(events, "fuzz", discard);
  write_events_json(events, false, discard);
  write_events_json(events, true, discard);

  if (!file.steps().empty()) {
    ReplayStepResult all = replay_steps(file, std::nullopt, user);
    (void)render_steps_text(all, 5);
    consume(render_steps_json(all, 5));
    (void)render_steps_text(replay_steps(file, file.steps().front().number, reference), 5);
  }
  for (double seconds : {0.0, 0.001, 1e12}) {
    try {
      TimeSide side = replay_to_time(file, seconds, user);
      (void)render_time_text(side, 5);
      consume(render_time_json(side, 5));
      TimePair pair = compare_at_time(side, side);
      (void)render_time_pair_text(pair, 5);
      consume(render_time_pair_json(pair, 5));
    } catch (const Error&) {  // no time_us: refused with a message
    }
  }
  CompareResult compare = compare_files(file, file, std::nullopt, user);
  (void)render_compare_text(compare, 5);
  consume(render_compare_json(compare, 5));

  std::vector<RunTimeline> runs{build_timeline(file, "fuzz", 1.0, user)};
  (void)render_text_chart(runs, TextChartOptions{});
  if (html_plot_available()) (void)render_plot_html(runs, 1.0);
  // The page with moments instead of lifetimes (plot --max-lifetimes 1).
  consume(plot_data_json({build_timeline(file, "fuzz", 1.0, user, 1)}, 1.0));

  // Groups that read the entries' times and pools rather than frames.
  for (GroupBy group : {GroupBy::kAnnotation, GroupBy::kPool}) {
    SourceKeyOptions grouped = user;
    grouped.group = group;
    consume(render_parse_json(parse_report(file, ParseOptions{grouped}), 5));
    consume(plot_data_json({build_timeline(file, "fuzz", 1.0, grouped)}, 1.0));
  }
  SegmentReport segments = segments_at_dump("fuzz", snapshot, file.device());
  (void)render_segments_text(segments, 5);
  consume(render_segments_json(segments, 5));
  OomAnalysis oom = analyze_oom(analyze_file("fuzz", snapshot, device),
                                OomOptions{1, 1.0, uint64_t{80} << 30, user});
  (void)render_oom_text(oom, 5);
  consume(render_oom_json(oom, 5));
  OomOptions at_peak{1, 1.0, 0, user};
  at_peak.at_peak = true;
  consume(render_oom_json(analyze_oom(file, at_peak), 5));

  // The many-rank path: a summary, its JSON read back, ranks and check over it.
  RunSummary summary =
      run_summary(analyze_file("fuzz_7.pickle", snapshot, device), SummaryOptions{user, 7});
  const std::string summary_text = render_summary_json(summary).dump(
      -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  RunSummary again = read_summary_json(summary_text, "fuzz.summary.json");
  std::vector<RunSummary> ranks{summary, again};
  RanksReport ranked = analyze_ranks(ranks);
  (void)render_ranks_text(ranked, {}, 5);
  consume(render_ranks_json(ranked, {}));
  std::vector<Limit> limits = budget_from_run(summary, 0.05);
  limits.push_back(Limit{LimitKind::kMaxSourceGrowth, Amount{1, true}, {}, false});
  CheckReport checked = run_check(again, &summary, limits, {.baseline_is_summary = true});
  (void)render_check_text(checked, 5);
  consume(render_check_json(checked, 5));
  (void)render_check_junit(checked, 5);
  (void)render_check_github(checked, 5);
  (void)render_check_markdown(checked, 5);
  (void)read_budget(write_budget_toml(limits, "fuzz"), "fuzz.toml");
}

// The allocator history's start state derived forward must be the walk
// back's wherever it is taken (the proof at derive_start): on every device,
// the same start, check and peak of free memory, and the same state midway.
bool same_state(const memsnap::AllocatorState& a, const memsnap::AllocatorState& b) {
  const auto same_range = [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.size == y.second.size &&
           x.second.stream == y.second.stream && x.second.pool.first == y.second.pool.first &&
           x.second.pool.second == y.second.pool.second && x.second.kind == y.second.kind &&
           x.second.expandable == y.second.expandable;
  };
  const auto same_block = [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.size == y.second.size &&
           x.second.requested == y.second.requested && x.second.state == y.second.state &&
           x.second.size_inferred == y.second.size_inferred;
  };
  return a.reserved == b.reserved && a.held == b.held &&
         std::equal(a.ranges.begin(), a.ranges.end(), b.ranges.begin(), b.ranges.end(),
                    same_range) &&
         std::equal(a.blocks.begin(), a.blocks.end(), b.blocks.begin(), b.blocks.end(), same_block);
}

// Everything a history gives, the same as the walk back's.
bool same_as_the_walk_backs(const memsnap::Snapshot& snapshot, const memsnap::DeviceTrace& trace,
                            const memsnap::AllocatorHistory& tried) {
  using namespace memsnap;
  const AllocatorHistory back(snapshot, trace.device, StartDerivation::kWalkBack);
  const HistoryCheck& f = tried.check();
  const HistoryCheck& b = back.check();
  return f.entries == b.entries && f.misfits_back == b.misfits_back &&
         f.misfits_forward == b.misfits_forward && f.ranges_at_start == b.ranges_at_start &&
         f.blocks_at_start == b.blocks_at_start && f.inferred_sizes == b.inferred_sizes &&
         f.rounding == b.rounding && f.exact == b.exact && f.differences == b.differences &&
         tried.peak_free().bytes == back.peak_free().bytes &&
         tried.peak_free().position == back.peak_free().position &&
         tried.peak_free().reserved == back.peak_free().reserved &&
         same_state(tried.start(), back.start()) &&
         same_state(tried.at(trace.count() / 2), back.at(trace.count() / 2));
}

// The start derived forward, and the walk made beside the read (device 0),
// wherever a history takes them, are the walk back's.
void derived_start_is_the_walk_backs(const memsnap::Snapshot& snapshot,
                                     memsnap::AllocatorWalkAhead& walk) {
  using namespace memsnap;
  for (const DeviceTrace& trace : snapshot.devices) {
    const AllocatorHistory forward(snapshot, trace.device, StartDerivation::kForwardFirst);
    if (forward.derived_forward() && !same_as_the_walk_backs(snapshot, trace, forward)) {
      __builtin_trap();
    }
  }
  const DeviceTrace* first = snapshot.trace_of(0);
  const std::unique_ptr<StartDiscovery> walked = walk.take(0);
  if (first == nullptr || walked == nullptr) return;
  const AllocatorHistory tried(snapshot, 0, StartDerivation::kForwardFirst, walked.get());
  if (tried.discovered() && !same_as_the_walk_backs(snapshot, *first, tried)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Summaries, budgets, rules files and patterns (fuzz/text_inputs.h).
  if (memsnap::fuzz::exercise_text_input(data, size)) return 0;
  memsnap::Snapshot snapshot;
  // The allocator walk beside the read, as the command line runs it.
  // (Declared after the model: it stops reading the columns before they go.)
  auto walk = std::make_unique<memsnap::AllocatorWalkAhead>();
  try {
    memsnap::InputBuffer input =
        memsnap::InputBuffer::from_memory(std::vector<uint8_t>(data, data + size), "fuzz");
    memsnap::LoadOptions options;
    options.listener = walk.get();
    snapshot = memsnap::decode_snapshot(input, options);
  } catch (const Error&) {
    return 0;
  }
  derived_start_is_the_walk_backs(snapshot, *walk);
  std::vector<std::optional<int>> devices{std::nullopt};
  for (int device : snapshot.devices_in_use()) devices.emplace_back(device);
  for (const std::optional<int>& device : devices) {
    try {
      every_report(snapshot, device);
    } catch (const Error&) {
    }
  }
  return 0;
}
