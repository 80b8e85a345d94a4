// Memory by source line: source ids, live bytes by source at chosen replay
// positions, and the join of two files' rows by source name.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/categories.h"
#include "analysis/core/free_frames.h"
#include "analysis/core/level_index.h"
#include "analysis/core/source_key.h"
#include "memsnap/model.h"
#include "memsnap/replay.h"

namespace memsnap {

// What a row's name claims (JSON `key_kind`).
enum class KeyKind : uint8_t {
  kAllocationSite,  // frames of the allocation: the memory was allocated there
  kFreeSite,        // frames of the free: allocated before the trace, freed there
  kOther,           // no site: a category, pool, annotation, metadata, or a placeholder
};
// "allocation_site", "free_site", "other".
std::string_view key_kind_name(KeyKind kind);

// The name of memory from before the trace known only by its free.
inline constexpr std::string_view kFreedAtPrefix = "freed at ";
inline constexpr std::string_view kFreedAtSuffix = " (allocated before the trace)";
// Its group where the free says nothing of it (its annotation, metadata).
inline constexpr std::string_view kBeforeTraceGroup = "<allocated before the trace>";

// Source keys of one snapshot, numbered densely so that per-source totals are
// a flat array. Source ids are per file: diff by name, never by id.
class SourceIndex {
 public:
  SourceIndex(const Snapshot& snapshot, const SourceKeyOptions& key_options);
  // The group of a traced allocation (its event matters for categories).
  uint32_t of(const LiveAllocation& allocation);
  // The group of a stack alone (no event, so no time and no entry's fields).
  uint32_t of(StackId stack);
  // The group of a block of the segments at the dump.
  uint32_t of_block(const Segment& segment, const Block& block);
  // The same for a block the dump holds since before the trace (a trace
  // that never allocated it): by category, a frameless one is persistent.
  uint32_t of_held_block(const Segment& segment, const Block& block);
  // The group of memory allocated before the trace that only its free
  // (trace entry `event`) shows, where the free's frames are the freeing
  // code's (FreeFrames::kFree or kUnknown): "freed at <code> (allocated before
  // the trace)", or a free-site category (categories.h: free_site_rules).
  uint32_t of_free(uint64_t event, uint64_t size);
  // Whether a block's group comes from its frames (every group but pool),
  // so that blocks without frames say nothing.
  [[nodiscard]] bool blocks_need_frames() const { return group_ != GroupBy::kPool; }
  // A group of the caller's own naming (e.g. memory no block names).
  uint32_t intern(std::string_view name) { return id_of(std::string(name)); }
  [[nodiscard]] const std::string& name(uint32_t source) const { return names_[source]; }
  [[nodiscard]] KeyKind kind(uint32_t source) const { return kinds_[source]; }
  [[nodiscard]] size_t size() const { return names_.size(); }
  // Rows of per-source totals (by source id), largest first; ids of one
  // name (a category reached by several pieces of evidence) are one row,
  // with its evidence split out.
  [[nodiscard]] std::vector<struct SourceUsage> rows(std::span<const uint64_t> bytes,
                                                     std::span<const uint64_t> counts) const;

 private:
  uint32_t id_of(const std::string& name, KeyKind kind = KeyKind::kOther);
  // One id per category and evidence, named by the category.
  uint32_t category_source(Categorized categorized);
  uint32_t pool_of(const LiveAllocation& allocation);
  uint32_t annotation_of(const LiveAllocation& allocation);
  uint32_t pool_name(PoolId pool);
  [[nodiscard]] int device_of(uint64_t event) const;

  const Snapshot& snapshot_;
  GroupBy group_;
  SourceKeys keys_;
  std::optional<Categorizer> categories_;  // --group-by category
  std::vector<uint32_t> by_stack_;         // stack id value -> source id + 1 (0: not yet computed)
  std::vector<uint32_t> freed_by_stack_;   // the same for of_free
  std::vector<std::string> names_;
  std::vector<KeyKind> kinds_;  // by source id
  static constexpr EvidenceId kNoEvidence = UINT16_MAX;
  std::vector<EvidenceId> evidence_;  // by source id: a category's evidence, or kNoEvidence
  absl::flat_hash_map<std::string, uint32_t> ids_;
  absl::flat_hash_map<uint32_t, uint32_t> category_ids_;  // category << 16 | evidence -> id

  // --group-by pool, for entries without their own pool_id: the segments at
  // the dump by (device, address).
  struct PoolRange {
    int device = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    PoolId pool;
  };
  std::vector<PoolRange> pool_ranges_;
  // --group-by annotation, per device: after each START/END (in time order),
  // the innermost annotation still open (StringId value + 1; 0: none).
  struct AnnotationTimeline {
    int device = 0;
    std::vector<int64_t> times;
    std::vector<uint32_t> innermost;
  };
  std::vector<AnnotationTimeline> annotation_timelines_;
};

// The part of a category row that one piece of evidence put there.
struct RowEvidence {
  EvidenceId evidence = 0;  // into category_evidence()
  uint64_t bytes = 0;
  uint64_t count = 0;
};

struct SourceUsage {
  std::string source;
  uint64_t bytes = 0;
  uint64_t count = 0;
  KeyKind kind = KeyKind::kAllocationSite;
  std::vector<RowEvidence> evidence;  // category rows: why, largest first; else empty
};

// Memory allocated before the trace began, by source (or category: whatever
// the SourceIndex groups by). Two parts: the dump's active blocks that the
// trace did not allocate (still live at the dump), named by their own frames
// (the allocation's), and the trace's frees without an alloc, named by the
// free's frames: as an allocation site only where the file's frees carry
// their allocation's frames (FreeFrames::kAllocation), else as the code that
// freed it (SourceIndex::of_free). Their sum is the baseline at the trace
// start when the trace replays to the dump; each unmatched free takes its
// bytes out again where it happens.
// The row of baseline bytes that no block names (see baseline_sources).
inline constexpr std::string_view kBaselineUnmatched = "<before the trace: no block matches>";
struct BaselineSources {
  // Some of it carries frames (or the grouping needs none): without that,
  // the rows would all be one "no frames" source, and callers leave it out.
  bool known = false;
  std::vector<uint64_t> bytes;   // by source id: live before the first entry
  std::vector<uint64_t> counts;  // by source id
  absl::flat_hash_map<uint64_t, uint32_t> freed_source;  // unmatched free (model index) -> source
  // Rows at the trace start, sorted like live_by_source's.
  [[nodiscard]] std::vector<SourceUsage> rows(const SourceIndex& sources) const;
};
// Memory from before the trace before it is named: one replay of the
// device's trace finds the pieces (FileAnalysis keeps them), and naming them
// by any SourceIndex (baseline_sources) is a walk over the pieces alone.
struct BaselinePieces {
  struct Free {
    uint64_t event = 0;  // model index of a free without its alloc
    uint64_t size = 0;
  };
  std::vector<Free> unmatched_frees;  // in trace order
  struct HeldBlock {
    uint32_t segment = 0;  // index in snapshot.segments
    uint32_t block = 0;    // index in snapshot.blocks
  };
  std::vector<HeldBlock> blocks;  // active at the dump, no live traced allocation at its address
  FreeFrames free_frames = FreeFrames::kUnknown;  // whose frames the frees carry
  // Baseline bytes that no block names: a traced allocation whose size
  // differs from its block's, or that has none (see baseline_sources).
  uint64_t unnamed = 0;
};
BaselinePieces baseline_pieces(const Snapshot& snapshot, const DeviceTrace& trace,
                               FreeFrames free_frames);
BaselineSources baseline_sources(const Snapshot& snapshot, const BaselinePieces& pieces,
                                 SourceIndex& sources);

// Live bytes by source after `positions[k]` events of the trace were applied
// (positions ascending, each <= trace.count()). Rows sorted by bytes, largest
// first; sources with nothing live are left out. One replay pass; the live
// set is never copied, only the small per-source table at each position.
// With `baseline` (made with the same SourceIndex), memory allocated before
// the trace counts under its own source too, less the unmatched frees so far.
std::vector<std::vector<SourceUsage>> live_by_source(const Snapshot& snapshot,
                                                     const DeviceTrace& trace, SourceIndex& sources,
                                                     std::span<const uint64_t> positions,
                                                     const BaselineSources* baseline = nullptr);

// live_by_source at one position, with the replay's counts there: what was
// live at time T.
struct LiveAt {
  uint64_t alloc_count = 0;  // alloc entries applied
  uint64_t free_count = 0;   // free_completed entries applied
  int64_t delta = 0;         // the replay's delta there
  uint64_t live_count = 0;   // allocations live there, and their bytes
  uint64_t live_bytes = 0;
  std::vector<SourceUsage> sources;
};
// In one replay from the trace's start.
LiveAt live_at(const Snapshot& snapshot, const DeviceTrace& trace, SourceIndex& sources,
               uint64_t position, const BaselineSources* baseline = nullptr);
// The same answer (without a baseline) from the levels and spans that serve
// keeps (FileAnalysis::levels): one scan of the spans and a count of the
// actions before the position, instead of a replay of everything before it,
// so that a click late in a long trace costs what a click early does.
LiveAt live_at(const Snapshot& snapshot, const DeviceTrace& trace, const LevelIndex& levels,
               const AllocationSpans& spans, SourceIndex& sources, uint64_t position);

// Live memory at the dump by source, from the segments' blocks of one device
// (a block's own frames, or the newest entry of a PyTorch 2.0 `history`):
// what the trace cannot show when it is missing or started after the
// allocations. Active allocated blocks only; rows sorted like live_by_source.
// Blocks without frames are one `<no frames>` row, or with
// kBySizeClass one row per power-of-two size class
// ("<no frames: blocks of 2-4 MiB>"), so that two frameless dumps still
// compare by something.
enum class FramelessBlocks : uint8_t { kOneRow, kBySizeClass };
std::vector<SourceUsage> live_at_dump_by_source(
    const Snapshot& snapshot, int device, SourceIndex& sources,
    FramelessBlocks frameless = FramelessBlocks::kOneRow);
// The row of frameless blocks of `size` bytes under kBySizeClass.
std::string frameless_size_class(uint64_t size);

struct SourceDiff {
  std::string source;
  KeyKind kind = KeyKind::kAllocationSite;
  uint64_t bytes_a = 0, count_a = 0, bytes_b = 0, count_b = 0;
  [[nodiscard]] int64_t delta() const {
    return static_cast<int64_t>(bytes_b) - static_cast<int64_t>(bytes_a);
  }
};
// Rows of both sides joined by source name, sorted by |B - A|.
std::vector<SourceDiff> diff_sources(const std::vector<SourceUsage>& a,
                                     const std::vector<SourceUsage>& b);

// Sources live on one side only (the other has no allocation of them), above
// kOnlyOneSideMinBytes.
struct OnlyOnOneSide {
  uint64_t sources = 0;
  uint64_t bytes = 0;
};
constexpr uint64_t kOnlyOneSideMinBytes = uint64_t{1} << 20;
OnlyOnOneSide only_in_a(const std::vector<SourceDiff>& rows);
OnlyOnOneSide only_in_b(const std::vector<SourceDiff>& rows);

// A live set at one moment in two files, joined by source.
struct SourceComparison {
  std::vector<SourceDiff> rows;  // all rows, sorted by |B - A|
  OnlyOnOneSide only_a, only_b;
};
SourceComparison compare_sources(const std::vector<SourceUsage>& a,
                                 const std::vector<SourceUsage>& b);

}  // namespace memsnap
