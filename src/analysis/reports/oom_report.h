// `memsnap oom`: why a request failed. For one `oom` trace entry: the
// request, the allocator's state at that moment, what was live (by source and
// by category), what grew just before, and a verdict chosen by documented
// rules. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/reports/segment_report.h"
#include "analysis/reports/whatif.h"

namespace memsnap {

enum class OomVerdict : uint8_t {
  kCapacity,        // live tensors + the request exceed what PyTorch held plus what the driver had
  kFragmentation,   // enough free bytes in this stream's segments, no block large enough
  kPoolsOrStreams,  // the free bytes that would have sufficed sit in other pools/streams or await
                    // free
  kOutside,  // the device's capacity (--capacity) minus reserved minus free covers the request
  kSpike,    // the last --window seconds added at least the request and a quarter of the live bytes
  kUnexplained,  // by the file's numbers the request fits: the cause is not in the snapshot
};
std::string_view verdict_name(OomVerdict verdict);

struct OomOptions {
  int at = 1;             // which oom entry of the device, from 1
  double window_s = 1.0;  // "just before the OOM"
  uint64_t capacity = 0;  // the device's memory, when the user knows it (0: unknown)
  SourceKeyOptions keys;
  bool at_peak = false;  // instead of an oom entry: the same analysis at the absolute peak
};

// Where the block-level facts of an OomState come from.
enum class BlockFacts : uint8_t {
  kUnknown,      // the dump is not the moment's state and the trace cannot replay it
  kDump,         // no entry after the moment changed a block or a segment: the dump is the state
  kReplayed,     // replayed from the dump through the trace, which reproduces the dump exactly
  kApproximate,  // replayed, but the trace does not reproduce the dump block for block
};
std::string_view block_facts_name(BlockFacts facts);

// The allocator at the OOM. Totals are exact from the trace: reserved is the
// dump's walked back through the segment entries after the OOM; live is the
// replay's absolute memory (baseline + delta) at the OOM; awaiting free counts
// traced blocks whose free was requested before the OOM and not completed by
// it. Block-level facts (largest free block, per pool and stream) come from
// the dump when no entry after the OOM changed a block or a segment
// (dump_is_oom_state), else from the allocator's state replayed to the OOM
// (AllocatorHistory), else they are unknown and left out.
struct OomState {
  uint64_t reserved = 0;
  int64_t live = 0;
  uint64_t awaiting_free = 0;
  int64_t free = 0;  // reserved - live - awaiting free (negative: the file's numbers disagree)
  bool dump_is_oom_state = false;
  uint64_t entries_after = 0;  // trace entries after the OOM that change blocks or segments
  BlockFacts block_facts = BlockFacts::kUnknown;
  std::string block_facts_unknown;  // why, when kUnknown
  [[nodiscard]] bool blocks_known() const { return block_facts != BlockFacts::kUnknown; }
  // From the dump's segments or the replayed state, when blocks_known():
  uint64_t usable_free = 0;  // free blocks in the default pool on the request's stream
  uint64_t largest_usable = 0;
  uint64_t elsewhere_free = 0;  // free blocks in private pools or on other streams
  uint64_t private_pool_reserved = 0;
  uint64_t block_awaiting_free = 0;  // blocks awaiting free, traced or not
  std::vector<PoolStreamRow> groups;
};

struct GrowthRow {
  std::string source;
  int64_t bytes = 0;  // live at the OOM minus live window_s before
};

// One moment of a run: an oom entry, or (--at peak) the trace's absolute
// peak, where the "request" is the allocation that reached it.
struct OomCase {
  uint64_t ordinal = 1;         // 1-based among the device's oom entries (0 at the peak)
  uint64_t event = 0;           // index in the device's trace (as `memsnap events` numbers it)
  bool at_trace_start = false;  // --at peak when nothing in the trace rose above its start
  double time_s = 0;            // from the trace start; 0 without timestamps
  bool has_time = false;
  uint64_t request = 0;
  uint64_t stream = 0;
  std::optional<uint64_t> device_free;
  std::string request_source;  // the failing allocation's frames, keyed
  std::string request_category;
  OomState state;
  std::vector<SourceUsage> live_by_source;
  std::vector<SourceUsage> live_by_category;
  std::vector<GrowthRow> growth;  // largest increases first; only increases
  int64_t growth_bytes = 0;       // live at the OOM minus live window_s before
  // The highest absolute memory before the window: what the run had survived.
  std::optional<int64_t> prior_peak;
  // With profiler steps: the OOM's step, and the highest absolute peak among
  // the complete steps that ended before the OOM (the headroom per step).
  std::optional<int64_t> oom_step;
  std::optional<int64_t> prior_step;
  std::optional<int64_t> prior_step_peak;
  // Headroom: what the request lacked, and the biggest category's share of it.
  int64_t shortfall = 0;  // bytes the request lacked under the primary verdict (0: none)
  std::optional<uint64_t> outside_bytes;  // capacity - reserved - device free, with --capacity
  uint64_t available = 0;  // usable free bytes + device free: what this request could draw on
  uint64_t elsewhere = 0;  // free where this stream cannot use it, plus awaiting free
  std::vector<OomVerdict> verdicts;  // primary first, then the other rules that hold; none at peak
  // The live tables come from the dump's blocks (their own frames) because
  // the moment is the dump's state and the trace names too little of it.
  bool live_from_blocks = false;
  // The live tables count memory allocated before the trace under its own
  // source (dump blocks and unmatched frees with frames), not only the trace's.
  bool live_includes_baseline = false;
};

// Everything `memsnap oom` reports about one file (named apart from parse's
// OomEntry, the short list of oom entries).
struct OomAnalysis {
  std::string file;
  int device = 0;
  uint64_t oom_count = 0;    // oom entries on the device
  uint64_t event_count = 0;  // trace entries on the device
  // Trace entries of the file skipped as malformed (an oom entry with a size
  // that is no size among them): "no oom entry" is then not the whole truth.
  uint64_t malformed_entries = 0;
  double window_s = 1.0;
  std::optional<uint64_t> capacity;
  std::vector<int> devices_with_oom;
  bool expandable_segments = false;  // allocator_settings, or any segment of the file is expandable
  bool at_peak = false;           // the moment is the absolute peak (--at peak), not an oom entry
  std::optional<OomCase> chosen;  // none: the file has no oom entry on the device
  // For the first oom entry: what the allocator model says other settings
  // would have done (whatif.h).
  std::optional<OomPrediction> prediction;
};

// The file's chosen device, already replayed (plot reuses its FileAnalysis).
OomAnalysis analyze_oom(const FileAnalysis& file, const OomOptions& options);

// `memsnap oom DIR` (or several files): one row per rank, which ranks hit an
// OOM, on which device, the verdict and its numbers; then the full analysis of
// the first OOM in time (by the entries' wall-clock time_us, which ranks share).
struct OomRankRow {
  std::string file;
  std::string name;  // the rank number, or the shortest part of the path that tells it apart
  std::optional<int64_t> rank;
  int device = 0;
  uint64_t oom_count = 0;
  std::optional<OomVerdict> verdict;
  uint64_t request = 0;
  std::optional<uint64_t> device_free;
  int64_t live = 0;
  int64_t time_us = 0;  // the first OOM entry's own time (0: none)
  std::string error;    // the file could not be read: why
};
struct OomRanks {
  std::vector<OomRankRow> rows;          // in the order given (folders in natural name order)
  std::optional<size_t> first;           // the row of the first OOM in time
  std::optional<OomAnalysis> first_oom;  // its full analysis
};
// One rank's row from its analysis (the first oom entry of its device).
OomRankRow oom_rank_row(const FileAnalysis& file, const OomAnalysis& analysis);
// The row whose OOM came first: the least time_us among rows with an OOM
// (rows without times come after those with; ties go to the earlier row).
std::optional<size_t> first_oom_row(const std::vector<OomRankRow>& rows);

}  // namespace memsnap
