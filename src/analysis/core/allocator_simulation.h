// The allocator model (caching_allocator.h) run over a device's trace: the
// engine under `whatif`, the OOM prediction of `oom` and `explain`, and the
// simulated reserved line of the page.
//
// Two uses. The check (check_recorded_segments): under the file's own
// settings, from the allocator's state at the trace's first entry, the model
// must make the segments the file recorded, at the same entries, and place
// the blocks where the trace's allocs took them; how far it does is the
// ground of every answer below. The simulation (simulate): the trace's
// requests and frees under other settings and within a capacity, and what
// the allocator would then have reserved.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/pytorch_allocator_policy.h"
#include "analysis/core/step_series.h"

namespace memsnap {

// How the model, under the file's own settings, reproduces what the file
// recorded.
struct SegmentCheck {
  std::string file;
  int device = 0;
  bool possible = false;  // the state before the trace is known (the dump lists its blocks)
  std::string impossible_reason;
  // The file's settings the model ran with (max_split_size: UINT64_MAX when
  // unlimited), and the allocator's state it started from.
  uint64_t max_split_size = UINT64_MAX;
  uint64_t segments_at_start = 0;
  uint64_t blocks_at_start = 0;
  uint64_t inferred_sizes = 0;  // of those, sizes from the split rule (freed in the trace)
  bool expandable = false;      // expandable segments: the file's settings, or its mapped pages
  // The request rounding the model kept: CUDA's, or torch_npu's (32 bytes
  // more), whichever reproduces the file closer.
  RoundingRule rounding = RoundingRule::kCuda;
  // Segments reserved (segment_alloc): recorded, made by the model, and
  // made by both for the same request with the same size.
  uint64_t recorded_reserves = 0;
  uint64_t model_reserves = 0;
  uint64_t matched_reserves = 0;
  // Segments the file released (segment_free: empty_cache, or a release
  // before a retried cudaMalloc) that the model followed: the model had the
  // segment cached whole then. Those it could not are divergences.
  uint64_t recorded_releases = 0;
  uint64_t followed_releases = 0;
  // The trace's allocs, and those the model placed at the recorded address.
  uint64_t allocs = 0;
  uint64_t allocs_at_recorded_address = 0;
  // Of the others, those the model then placed where the file did (a cached
  // block held the address), so that one placement does not part the rest.
  uint64_t followed_placements = 0;
  uint64_t unknown_frees = 0;  // free_completed of a block the model does not hold
  // Where model and file part, first: a segment one reserved and the other
  // did not, a release the model could not follow, or a block placed at
  // another address.
  enum class Parting : uint8_t { kModelReserves, kFileReserves, kRelease, kAddress };
  struct Divergence {
    Parting parting = Parting::kAddress;
    uint64_t position = 0;       // trace entry index
    uint64_t size = 0;           // the segment's bytes, or the request's
    uint64_t file_address = 0;   // the file's segment or block
    uint64_t model_address = 0;  // the model's block (kAddress)
    uint64_t request = 0;        // the request served (kModelReserves)
  };
  std::optional<Divergence> first_divergence;
  uint64_t divergences = 0;  // entries where they part
  // Reserved bytes at their highest, as the file recorded them (the
  // analysis' reserved part, as parse reports it) and as the model had them.
  uint64_t peak_reserved_recorded = 0;
  uint64_t peak_reserved_model = 0;
  // The model's state at the end against the dump's: segments (address and
  // size) and allocated blocks (address and size) on one side only.
  uint64_t end_segments_differing = 0;
  uint64_t end_blocks_differing = 0;
  [[nodiscard]] bool end_equals_dump() const {
    return end_segments_differing == 0 && end_blocks_differing == 0;
  }
  uint64_t entries = 0;  // the device's trace entries
  // Segment entries the trace holds (reserved and released): without any,
  // nothing shows how the model makes segments.
  [[nodiscard]] uint64_t segment_events() const { return recorded_reserves + recorded_releases; }
  // Nothing to check: no trace, or one without a segment entry or an alloc.
  [[nodiscard]] bool nothing_to_check() const {
    return entries == 0 || (possible && segment_events() == 0 && allocs == 0);
  }
  // What the issue asks of the model: every segment the file reserved and
  // released, reproduced at the same entry with the same size, and the
  // dump's segments and blocks at the end.
  [[nodiscard]] bool segments_exact() const {
    return possible && matched_reserves == recorded_reserves &&
           model_reserves == recorded_reserves && followed_releases == recorded_releases &&
           end_equals_dump();
  }
  // ... and every block where the file placed it, by the model's own
  // choice; never where nothing was checked (a trace without segment
  // entries tests placements, not how segments are made).
  [[nodiscard]] bool exact() const {
    return segment_events() > 0 && segments_exact() && allocs_at_recorded_address == allocs;
  }
};

SegmentCheck check_recorded_segments(const FileAnalysis& file);

// What a what-if run starts from: the segments the file held at the first
// entry, or, where the trace reserves no segment, an empty allocator that
// serves the blocks live then in segments of its own settings.
enum class StartFrom : uint8_t { kRecordedSegments, kFreshSegments };

// One configuration of the allocator, as PYTORCH_CUDA_ALLOC_CONF sets it.
struct WhatIfSettings {
  std::string label;  // "the file's own", "expandable_segments:True", ...
  SplitRule split;    // rounding, max_split_size, roundup_power2_divisions, expandable
  double gc_threshold = 0;
};

// What the allocator would have done under some settings, on the device's
// trace from the state before it, within a capacity.
struct WhatIfRun {
  WhatIfSettings settings;
  uint64_t peak_reserved = 0;
  uint64_t allocated_at_peak = 0;           // block bytes in use when reserved memory peaked
  std::optional<uint64_t> reserved_at_oom;  // at the file's first oom entry
  uint64_t reserves = 0;                    // cudaMalloc calls (or page mappings)
  uint64_t releases = 0;  // cudaFree calls (or unmappings), empty_cache's included
  // The file's oom entries, and those whose request would have fit then.
  uint64_t oom_requests = 0;
  uint64_t oom_requests_fit = 0;
  // Requests the model could not serve within the capacity (the run would
  // have stopped at the first), and the first one's entry.
  uint64_t model_ooms = 0;
  std::optional<uint64_t> first_model_oom;
  // At the file's first oom entry: the live requests (each rounded to 512
  // bytes), whether its request was served with nothing refused before it,
  // and reserved memory at its highest up to and with it.
  uint64_t live_at_oom = 0;
  bool first_oom_fit = false;
  uint64_t peak_reserved_to_oom = 0;
  // With a timeline (--set): reserved memory at its highest in each column
  // of the timeline (SimulationOptions::column_width).
  std::vector<uint64_t> timeline;
  // Without a capacity (no oom entry, no --capacity): the least capacity
  // this setting runs in (least_capacity).
  std::optional<uint64_t> capacity_needed;
  [[nodiscard]] bool fits() const { return model_ooms == 0 && oom_requests_fit == oom_requests; }
};

// The allocator history the model starts from; nullptr, with `why_not`
// said, when the file has none for the device or its state before the
// trace is unknown.
const AllocatorHistory* usable_history(const FileAnalysis& file, std::string& why_not);

// The file's own settings: allocator_settings, expandable segments as the
// file shows them (its settings, or for files written before
// allocator_settings existed, its mapped pages), and the rounding.
SplitRule file_rule(const FileAnalysis& file, RoundingRule rounding);

// Where every run starts: the recorded segments, unless the trace has no
// segment entry at all (every segment was reserved before recording and
// none released), where they would hide what the settings change (the
// model keeps them, and the trace fits in them under any setting). A trace
// that releases a segment keeps the recorded start: the model follows that
// release, and the check tests it.
StartFrom start_from(const SegmentCheck& check);

struct SimulationOptions {
  // Entries per column of WhatIfRun::timeline; 0: no timeline.
  uint64_t column_width = 0;
  // Reserved memory over the trace's wall clock and over its entries, from
  // the state at the start (the plot's simulated line): both or neither.
  BoundedStepSeries* by_time = nullptr;
  BoundedStepSeries* by_entry = nullptr;
};

// The trace through the model under `settings` within `capacity`: the
// program's requests and frees, and the file's releases (a release the
// model cannot follow, in a burst, is taken as empty_cache); the
// allocator's other choices (segments, releases before a retry within the
// capacity) the model's. `floor`, when given: the highest the live
// requests reached (pytorch::live_request_bytes each), which no setting
// reserves less than.
WhatIfRun simulate(const FileAnalysis& file, const AllocatorHistory& history,
                   const WhatIfSettings& settings, uint64_t capacity, StartFrom start,
                   const SimulationOptions& options = {}, uint64_t* floor = nullptr);

// The least capacity `settings` fits in, by bisection between `low` (it
// does not fit) and `high` (it does), to 2 MiB or 0.5%, rounded up by
// round_capacity.
uint64_t least_capacity(const FileAnalysis& file, const AllocatorHistory& history,
                        const WhatIfSettings& settings, StartFrom start, uint64_t low,
                        uint64_t high);

// No capacity: a limit no run reaches.
inline constexpr uint64_t kNoCapacity = uint64_t{1} << 60;
// A capacity the bisection found, rounded up to a step of at least 2 MiB
// and about 0.4% of it (a power of two), the precision the bisection has.
uint64_t round_capacity(uint64_t bytes);

// The file's own settings changed by `conf` (the keys the model knows:
// expandable_segments, max_split_size_mb, garbage_collection_threshold,
// roundup_power2_divisions); the label is the text.
WhatIfSettings settings_of_conf(std::string_view conf, const SplitRule& own);

}  // namespace memsnap
