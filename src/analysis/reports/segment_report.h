// What the allocator held on one device at the dump: segments and their
// blocks, free space inside them (external fragmentation) and lost to
// rounding (internal), the largest free block per pool and stream, and a fill
// map per segment. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/segments.h"
#include "analysis/core/step_series.h"
#include "memsnap/model.h"

namespace memsnap {

class FileAnalysis;

// Bytes of one segment, or of a group of them, by block state.
struct BlockBytes {
  uint64_t reserved = 0;       // total_size
  uint64_t allocated = 0;      // active_allocated blocks
  uint64_t awaiting_free = 0;  // active_pending_free blocks (freed, stream work outstanding)
  uint64_t free = 0;           // inactive blocks: reserved but free (external fragmentation)
  uint64_t requested = 0;      // what the allocated blocks' requests asked for
  uint64_t rounding = 0;       // allocated - requested where known (internal fragmentation)
  uint64_t largest_free = 0;   // the largest inactive block
  uint64_t blocks = 0;
};

struct SegmentRow {
  uint64_t address = 0;
  uint64_t stream = 0;
  PoolId pool;
  std::string kind;  // segment_type: "large", "small", or "" when the file has none
  bool expandable = false;
  BlockBytes bytes;
  // One character per equal slice of the segment: '#' allocated throughout,
  // '.' free throughout, '~' mostly awaiting free, '1'-'9' that many tenths
  // allocated (rounded down, at least 1), ' ' no block covers it.
  std::string fill;
  // Every block, free ones included, in address order: kept only for the
  // plot page's allocator panel (AllocatorMoments::segments) and serve's
  // segment map (keep_blocks).
  std::vector<Block> blocks;
};

struct PoolStreamRow {
  PoolId pool;
  uint64_t stream = 0;
  uint64_t segments = 0;
  BlockBytes bytes;
};

struct SegmentReport {
  std::string file;
  int device = 0;
  // The moment: the dump, or the state after `position` entries of the
  // trace, `time_s` seconds after its first entry (replayed from the dump).
  bool at_dump = true;
  uint64_t position = 0;
  double time_s = 0;
  double requested_time_s = 0;  // --time as given (time_s is clamped to the trace)
  // How well the trace explains the dump (set by `segments`; see HistoryCheck).
  std::optional<HistoryCheck> history;
  bool blocks_known = true;  // false: some segment lists no blocks (sizes from its own fields)
  BlockBytes totals;
  std::vector<PoolStreamRow> groups;  // by pool, then stream
  std::vector<SegmentRow> segments;   // largest first, then by address
};

constexpr int kFillWidth = 40;

// `keep_blocks`: every segment keeps its blocks (SegmentRow::blocks), for
// serve's segment map.
SegmentReport segments_at_dump(const std::string& file, const Snapshot& snapshot, int device,
                               bool keep_blocks = false);
// `memsnap segments`: the dump's state with the history's check, or the state
// `seconds` into the trace (nullopt: at the dump).
SegmentReport segments_report(const FileAnalysis& file, std::optional<double> seconds);
// The allocator `seconds` after the device's first trace entry, replayed from
// the dump (clamped to the trace's end), with the history check filled in.
// Throws when the trace carries no times or the dump's blocks are unknown.
SegmentReport segments_at_time(const FileAnalysis& analysis, double seconds,
                               bool keep_blocks = false);
// The same after `position` entries of the trace (clamped to it); time_s is
// left 0 (the caller knows the time, if the trace has one).
SegmentReport segments_at_position(const FileAnalysis& analysis, uint64_t position,
                                   bool keep_blocks = false);
// The same report for a reconstructed state (free blocks are its gaps).
SegmentReport segments_at_state(const std::string& file, int device, const AllocatorState& state,
                                bool keep_blocks = false);

// The allocator at chosen moments of one run, for the plot page's allocator
// panel. Each moment holds what `segments --time T` gives for its time: the
// totals, the number of segments, and its largest kMomentSegments segments
// with their blocks, as indices into AllocatorMoments::segments, where a
// segment is stored once for each change of its blocks (most moments share
// all their segments but one with the moment before). As many moments as
// fit in the page's budget (kAllocatorPageBytes, shared by the runs of the
// page): one after each change of the allocator where they all fit (a
// trace of tens of thousands of entries), else evenly over the trace, plus
// the given times (the reserved peak, the OOMs); at most kMaxAllocatorMoments.
constexpr size_t kMomentSegments = 48;
constexpr uint64_t kAllocatorPageBytes = uint64_t{6} << 20;
constexpr uint64_t kMaxAllocatorMoments = uint64_t{1} << 16;
// A moment costs a walk over the whole state (its segments and blocks):
// kMomentWork bounds their sum over the moments, so that a state of tens of
// thousands of blocks gets about a thousand moments, not a minute of plot
// (2^25: 0.2 s of plot on a 1M-entry generated trace, and every change of
// a 22k-entry training trace whose state holds some 2,000 blocks).
constexpr uint64_t kMomentWork = uint64_t{1} << 25;
struct AllocatorMoment {
  double time_s = 0;
  uint64_t position = 0;  // trace entries applied
  BlockBytes totals;
  uint64_t segment_count = 0;
  std::vector<uint32_t> drawn;  // the largest segments, largest first (then by address)
};
// The largest free block is a walk over every block: taken at this many
// evenly spaced moments.
constexpr uint64_t kLargestFreeSamples = 512;
struct AllocatorMoments {
  bool available = false;
  std::string unavailable_reason;  // when not: no trace, no times, or no block addresses
  HistoryCheck check;
  // One moment at the time of every entry that changed the allocator (and at
  // the start): the state at any time is the last moment at or before it.
  bool every_change = false;
  std::vector<SegmentRow> segments;      // drawn segments, blocks kept, fill left empty
  std::vector<AllocatorMoment> moments;  // ascending time
  StepSeries free;                       // reserved bytes no block holds (inactive), over the trace
  StepSeries largest_free;               // the largest free block, at kLargestFreeSamples moments
};
// `page_bytes`: this run's share of the page's budget.
AllocatorMoments allocator_moments(const FileAnalysis& file, const std::vector<double>& times_s,
                                   uint64_t page_bytes = kAllocatorPageBytes);

}  // namespace memsnap
