// `memsnap whatif`: the trace's requests and frees through a model of
// PyTorch's caching allocator (analysis/core/caching_allocator.h).
//
// The check that makes the model trustworthy: run with the file's own
// settings from the allocator's state at the trace's first entry, it must
// make the segments the file recorded, at the same entries, and the blocks
// the trace's allocs took.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/reports/segment_report.h"

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
  // of WhatIfReport::timeline_positions.
  std::vector<uint64_t> timeline;
  // Without a capacity (no oom entry, no --capacity): the least capacity
  // this setting runs in (WhatIfReport::capacity_to_fit's bisection).
  std::optional<uint64_t> capacity_needed;
  [[nodiscard]] bool fits() const { return model_ooms == 0 && oom_requests_fit == oom_requests; }
};

struct WhatIfReport {
  std::string file;
  int device = 0;
  bool possible = false;
  std::string impossible_reason;
  // What cudaMalloc could reserve: given, or the first oom entry's free
  // device memory plus what the file had reserved then, or (no oom entry,
  // no --capacity: kNone) no limit at all. Without one, no row can run out
  // of memory: each says the capacity it needs instead.
  uint64_t capacity = 0;
  enum class CapacityFrom : uint8_t { kGiven, kOom, kNone };
  CapacityFrom capacity_from = CapacityFrom::kNone;
  uint64_t segments_at_start = 0;  // the segments the file held at the first entry
  StartFrom start_from = StartFrom::kRecordedSegments;
  uint64_t trace_entries = 0;           // the device's
  uint64_t recorded_peak_reserved = 0;  // the reserved part's peak
  // The highest the live requests reached, each rounded to 512 bytes: no
  // setting reserves less.
  uint64_t floor = 0;
  std::vector<WhatIfRun> runs;  // the file's own settings first
  // With --set: the trace cut into at most kTimelineColumns columns (each
  // column's last entry position), and reserved memory at its highest in
  // each as the file recorded it; each run has its own.
  std::vector<uint64_t> timeline_positions;
  std::vector<uint64_t> recorded_timeline;
  // How far the model reproduces the file under its own settings
  // (check_recorded_segments): the ground of every row.
  bool model_segments_exact = false;
  uint64_t model_matched_reserves = 0;
  uint64_t recorded_reserves = 0;
  // The least capacity at which the file's own settings serve every
  // request, found to 0.5% and rounded up to what that precision can say
  // (round_capacity), so that every place shows one number; nullopt when
  // it needs more than 4 times the capacity.
  std::optional<uint64_t> capacity_to_fit;
};

inline constexpr uint64_t kTimelineColumns = 1000;
// No capacity: a limit no run reaches.
inline constexpr uint64_t kNoCapacity = uint64_t{1} << 60;
// A capacity the bisection found, rounded up to a step of at least 2 MiB
// and about 0.4% of it (a power of two), the precision the bisection has.
uint64_t round_capacity(uint64_t bytes);

// The settings people try, each run within the capacity (nullopt: the
// file's, see WhatIfReport::capacity); with `conf` (PYTORCH_CUDA_ALLOC_CONF's
// text: "expandable_segments:True,max_split_size_mb:128"), that
// configuration against the file's own, with the timelines. Throws a usage
// Error for a text the model does not read.
WhatIfReport what_if(const FileAnalysis& file, std::optional<uint64_t> capacity,
                     std::optional<std::string> conf = std::nullopt);
// The file's own settings changed by `conf` (the keys the model knows:
// expandable_segments, max_split_size_mb, garbage_collection_threshold,
// roundup_power2_divisions); the label is the text.
WhatIfSettings settings_of_conf(std::string_view conf, const SplitRule& own);

// The one line `oom` and `explain` add for the first oom entry: a setting
// among those tried that would have served its request, or that none can
// (the live requests and the request alone exceed the capacity).
struct OomPrediction {
  enum class Kind : uint8_t { kSettingFits, kNothingFits, kNoneTriedFits };
  Kind kind = Kind::kNoneTriedFits;
  std::string setting;         // kSettingFits: the first that serves it
  uint64_t peak_reserved = 0;  // kSettingFits: reserved at its highest up to and with the request
  uint64_t capacity = 0;
  uint64_t needed = 0;            // the live requests and the request, each rounded to 512 bytes
  bool model_reproduces = false;  // the model makes the file's segments under its own settings
};
// nullopt: no oom entry on the device, or no state before the trace.
std::optional<OomPrediction> predict_first_oom(const FileAnalysis& file,
                                               std::optional<uint64_t> capacity);

// The line `plot --whatif CONF` draws: reserved memory as the model had it
// under the file's own settings changed by `conf`, within the capacity
// `whatif` takes by default, over the trace's wall clock and over its
// entries, bucketed as the recorded reserved line is (`duration_us`: the
// page's run's).
struct SimulatedReservedLine {
  std::string settings;  // the text, as given
  bool possible = false;
  std::string impossible_reason;  // when not: no state before the trace
  uint64_t capacity = 0;
  WhatIfReport::CapacityFrom capacity_from = WhatIfReport::CapacityFrom::kNone;
  uint64_t peak_reserved = 0;           // the model's
  uint64_t recorded_peak_reserved = 0;  // the file's (the reserved part)
  uint64_t model_ooms = 0;              // requests it could not serve within the capacity
  bool model_segments_exact = false;    // it makes the file's segments under its own settings
  StartFrom start_from = StartFrom::kRecordedSegments;
  StepSeries reserved;           // t_us from the trace's first timed entry
  StepSeries reserved_by_entry;  // entries from the trace's first
};
// Throws a usage Error for a text the model does not read.
SimulatedReservedLine simulated_reserved_line(const FileAnalysis& file, const std::string& conf,
                                              double duration_us);

}  // namespace memsnap
