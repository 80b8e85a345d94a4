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

#include "analysis/core/allocator_simulation.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/step_series.h"

namespace memsnap {

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
// The settings people try, each run within the capacity (nullopt: the
// file's, see WhatIfReport::capacity); with `conf` (PYTORCH_CUDA_ALLOC_CONF's
// text: "expandable_segments:True,max_split_size_mb:128"), that
// configuration against the file's own, with the timelines. Throws a usage
// Error for a text the model does not read.
WhatIfReport what_if(const FileAnalysis& file, std::optional<uint64_t> capacity,
                     std::optional<std::string> conf = std::nullopt);
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
