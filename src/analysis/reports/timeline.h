// Memory over time for `memsnap plot`: min/max buckets over wall clock and
// over event index, allocation lifetimes for the click-to-drill-down, the
// reserved-memory series and markers. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/step_series.h"
#include "analysis/reports/allocation.h"
#include "analysis/reports/allocation_layout.h"
#include "analysis/reports/oom_report.h"
#include "analysis/reports/segment_report.h"
#include "analysis/reports/whatif.h"

namespace memsnap {

// Point budgets: each run embeds at most this many buckets per view, which
// keeps a 1M-event plot well under 15 MB while the page can still zoom to the
// requested precision on typical traces.
constexpr uint64_t kMaxTimeBuckets = 65536;
constexpr uint64_t kMaxIndexBuckets = 65536;

// Delta (bytes over the trace start) min and max inside each bucket. A bucket
// starts from the value carried in, so empty buckets hold it and the true peak
// is always some bucket's max.
struct Buckets {
  double width = 0;  // µs (time) or events (index)
  std::vector<double> min;
  std::vector<double> max;
};

// Downsamples a step function given as (position, value-after) pairs.
Buckets bucketize(const std::vector<double>& positions, const std::vector<double>& values,
                  double extent, double min_width, uint64_t max_buckets);

struct Lifetimes {
  static constexpr uint64_t kStillLive = UINT64_MAX;
  std::vector<uint64_t> start_us;  // offsets from the trace start
  std::vector<uint64_t> end_us;    // kStillLive: live at the end of the trace
  // Event indices within the device's trace (as `memsnap events` numbers
  // them): the alloc, and the free_completed or replacing alloc that ended
  // it (kStillLive: live at the end). For the page's event-index view.
  std::vector<uint64_t> start_event;
  std::vector<uint64_t> end_event;
  std::vector<uint64_t> size;
  std::vector<uint32_t> source;
};

// Live memory by source at evenly spaced moments of the trace: what the page
// embeds instead of every allocation's lifetime when a run has more than
// max_lifetimes allocations (their size grows with the trace; this does
// not). A click then snaps to the nearest moment, and the page says which;
// each moment's rows are exactly what `replay-to-time --time` gives there.
struct LiveMoments {
  uint64_t allocations = 0;       // the lifetimes they stand for
  std::vector<uint64_t> time_us;  // ascending, offsets from the trace start
  // Moment k's rows are [row_begin[k], row_begin[k + 1]) of the columns.
  std::vector<uint64_t> row_begin;
  std::vector<uint32_t> source;  // index into RunTimeline::sources
  std::vector<uint64_t> bytes;
  std::vector<uint64_t> count;
};
// At most this many moments, fewer when their rows would pass the row budget.
constexpr uint64_t kMaxLiveMoments = 2048;
constexpr uint64_t kMaxLiveMomentRows = uint64_t{1} << 19;
// Runs with more allocations (plus changes of UnlistedMemory) than this embed
// moments (the default of plot's --max-lifetimes: ~16 MiB of lifetimes in
// the page).
constexpr uint64_t kDefaultMaxLifetimes = 500'000;
LiveMoments live_moments(const Lifetimes& lifetimes, size_t source_count, uint64_t duration_us);

// What the line counts that no allocation's lifetime lists, so that the
// drill-down adds up to the line: memory allocated before the trace, named
// as explain names it (BaselineSources: the dump's blocks by their frames, a
// free without its alloc by the code that freed it), which each unmatched
// free takes out where it happens; and allocations whose address another
// alloc reused without a free, which the replay keeps counting from then on.
// Row r holds start_bytes[r] (start_count[r] allocations) at the trace start;
// change k adds change_bytes[k] (change_count[k] allocations; both negative
// for a free) to row change_row[k] at change_us[k] / after event
// change_event[k]. So at any moment the rows plus the live lifetimes sum to
// baseline + delta.
struct UnlistedMemory {
  std::vector<std::string> rows;
  std::vector<int64_t> start_bytes;  // signed: see kUnlistedResidual in timeline.cc
  std::vector<int64_t> start_count;
  std::vector<uint64_t> change_us;     // offsets from the trace start, ascending when times are
  std::vector<uint64_t> change_event;  // indices within the device's trace, ascending
  std::vector<uint32_t> change_row;
  std::vector<int64_t> change_bytes;
  std::vector<int64_t> change_count;
};
// Memory from before the trace gets this many rows by source (the largest at
// the trace start); the rest is one row, so the table stays short and exact.
constexpr size_t kUnlistedTopSources = 8;
// Where a run embeds moments instead of lifetimes, its changes are merged
// per moment and row (a click snaps to a moment, where they are exact).
void merge_changes_at_moments(UnlistedMemory& unlisted, const std::vector<uint64_t>& moment_us);

// The stacked view: what filled memory, layer by layer. Each stack bucket
// spans `per_bucket` of the view's buckets and holds every layer's bytes at
// the moment that span reached its max (the first such moment; the carried-in
// state when nothing in it went higher), so a bucket's layers sum exactly to
// baseline + the largest max of the buckets it spans.
constexpr uint64_t kMaxStackBuckets = 4096;
struct StackedBuckets {
  uint64_t per_bucket = 1;
  std::vector<std::vector<double>> layers;  // [layer][stack bucket], absolute bytes
  [[nodiscard]] uint64_t count() const { return layers.empty() ? 0 : layers[0].size(); }
};
// Layers bottom to top. The first is always memory allocated before the trace
// (baseline minus the unmatched frees so far); the last, when any, memory of
// allocations whose address was reused without a recorded free (the replay
// keeps counting them). Layers that stay at zero are left out.
struct StackedView {
  std::vector<std::string> names;
  StackedBuckets time;  // empty when the trace has no time_us
  StackedBuckets index;
  // By source only: the sources ranked next after the top ones, each with its
  // bytes in the same buckets. They are parts of "other sources", which
  // still holds them, so the page can give the user's choice of sources a
  // layer each, within what it embeds.
  std::vector<std::string> other_parts;
  StackedBuckets other_parts_time;
  StackedBuckets other_parts_index;
};
// The sources that held the most at any one moment get a layer each; the rest
// share "other sources", of which the next kStackedOtherParts are kept apart
// too (at most 4,096 stack buckets per view: about 1.4 MB of page per run).
constexpr size_t kStackedTopSources = 8;
constexpr size_t kStackedOtherParts = 16;

struct Marker {
  std::string name;
  double start_s = 0;
  std::optional<double> end_s;
};

struct OomMarker {
  double t_s = 0;
  uint64_t requested = 0;
  std::optional<uint64_t> device_free;
};

// The allocation view of the offline page (memory_viz's Active Memory
// Timeline without a server): the run's largest allocations visible at
// kPageAllocationColumns columns over the whole trace by event (at most
// max_entries, memory_viz's 15,000 by default), laid out on that axis and,
// where the trace has times, on the wall clock, each over the exact band of
// the rest; their stacks interned, one table of frames and one of stacks.
constexpr uint64_t kDefaultMaxEntries = 15'000;
constexpr int kPageAllocationColumns = 4096;
struct PageAllocations {
  AllocationLayout by_event;
  std::optional<AllocationLayout> by_time;
  std::vector<AllocationFrame> frames;  // distinct frames, users marked
  std::vector<std::vector<uint32_t>>
      stacks;                     // distinct stacks: indices into frames, innermost first
  std::vector<int32_t> stack_of;  // per drawn allocation (by_event.drawn): -1 for none
};
PageAllocations page_allocations(const FileAnalysis& file, uint64_t max_entries,
                                 const SourceKeyOptions& key_options);

struct RunTimeline {
  std::string label;
  std::string file;
  int device = 0;
  int64_t baseline = 0;
  int64_t peak_delta = 0;
  int64_t absolute_peak = 0;
  uint64_t alloc_count = 0;
  uint64_t unmatched_frees = 0;
  uint64_t unmatched_free_bytes = 0;
  uint64_t event_count = 0;
  bool has_time = false;
  double duration_s = 0;
  Buckets time_buckets;  // empty when the trace has no time_us
  Buckets index_buckets;
  // Reserved memory (empty without segment events or dump segments): over
  // the wall clock (t_us from the trace's first timed entry), and over the
  // event axis (entries from the trace's first), for traces without times.
  StepSeries reserved;
  StepSeries reserved_by_entry;
  std::vector<Marker> steps;        // name = step number
  StepsInference steps_origin;      // ProfilerStep marks or iterations inferred from the optimizer
  std::vector<Marker> annotations;  // other record_function ranges
  std::vector<OomMarker> ooms;
  std::vector<std::string> sources;
  Lifetimes lifetimes;
  // Set (and the page gets these instead of the lifetimes) when the run has
  // more allocations than max_lifetimes and timestamps.
  std::optional<LiveMoments> moments;
  UnlistedMemory unlisted;  // what the lifetimes (or moments) leave out of the line
  StackedView by_category;
  StackedView by_source;  // by the run's group (source, file, ... per --group-by)
  // `memsnap oom` for the first kMaxOomPanels oom entries, for the page's OOM
  // panel (filled by add_page_panels; empty for --text).
  std::vector<OomAnalysis> oom_analyses;
  // The allocator's segments and blocks at chosen moments, for the page's
  // allocator panel (filled by add_page_panels; empty for --text).
  AllocatorMoments allocator;
  // The page's allocation view (filled by add_page_panels when the page embeds one).
  std::optional<PageAllocations> allocations;
  // `plot --whatif CONF`: reserved memory as the allocator model had it
  // under those settings (filled by the plot command).
  std::optional<SimulatedReservedLine> whatif;
};
constexpr size_t kMaxOomPanels = 8;

RunTimeline build_timeline(const FileAnalysis& file, const std::string& label, double precision_ms,
                           const SourceKeyOptions& key_options,
                           uint64_t max_lifetimes = kDefaultMaxLifetimes);

// Where a run sits on the page: its place among the page's runs. The
// allocator panel shows the first kAllocatorPanelRuns runs (web/app.js's
// MAX_ALLOC_RUNS), which share the page's budget for it
// (kAllocatorPageBytes); the others get no more than the fewest moments.
// And how many allocations the page's allocation view embeds (0: none, as
// for the page memsnap serve serves, whose view asks the server).
struct PagePlace {
  size_t ordinal = 0;
  size_t runs = 1;
  uint64_t max_entries = kDefaultMaxEntries;
};
constexpr size_t kAllocatorPanelRuns = 4;
uint64_t allocator_budget(PagePlace place);

// What the HTML page shows beside the lines: the OOM panels (memsnap oom for
// the first kMaxOomPanels oom entries) and the allocator panel's moments
// (the reserved peak and each OOM). Starts the allocator replay first.
void add_page_panels(const FileAnalysis& file, const SourceKeyOptions& key_options,
                     RunTimeline& run, PagePlace place = {});

// One run of `plot`: its timeline, and for the HTML page (`page`) the panels,
// with the allocator replay begun first so that it runs beside the timeline;
// with `whatif` (PYTORCH_CUDA_ALLOC_CONF's text), the allocator model's
// reserved line under those settings (a usage Error for a text it does not read).
RunTimeline plot_run(const FileAnalysis& file, const std::string& label, double precision_ms,
                     const SourceKeyOptions& key_options, uint64_t max_lifetimes, bool page,
                     PagePlace place = {}, const std::optional<std::string>& whatif = std::nullopt);

}  // namespace memsnap
