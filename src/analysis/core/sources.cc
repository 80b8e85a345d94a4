#include "analysis/core/sources.h"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>

#include "analysis/core/segments.h"
#include "memsnap/replay.h"

namespace memsnap {

std::string_view key_kind_name(KeyKind kind) {
  switch (kind) {
    case KeyKind::kAllocationSite: return "allocation_site";
    case KeyKind::kFreeSite: return "free_site";
    case KeyKind::kOther: break;
  }
  return "other";
}

SourceIndex::SourceIndex(const Snapshot& snapshot, const SourceKeyOptions& key_options)
    : snapshot_(snapshot),
      group_(key_options.group),
      keys_(snapshot, key_options),
      by_stack_(snapshot.stacks.size() + 1, 0) {
  if (key_options.group == GroupBy::kCategory) {
    categories_.emplace(snapshot, key_options.category_rules);
  }
  if (key_options.group == GroupBy::kPool) {
    for (const Segment& segment : snapshot.segments) {
      pool_ranges_.push_back(PoolRange{segment.device, segment.address,
                                       segment.address + segment.total_size,
                                       PoolId{segment.pool_id_first, segment.pool_id_second}});
    }
    std::sort(pool_ranges_.begin(), pool_ranges_.end(), [](const PoolRange& a, const PoolRange& b) {
      return a.device != b.device ? a.device < b.device : a.begin < b.begin;
    });
  }
  if (key_options.group == GroupBy::kAnnotation) {
    // One stack of open annotations per device, walked in time order (ties
    // in file order); an END closes the latest open START of its name.
    std::vector<int> devices;
    for (const Annotation& note : snapshot.annotations) devices.push_back(note.device);
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    for (int device : devices) {
      std::vector<const Annotation*> notes;
      for (const Annotation& note : snapshot.annotations) {
        if (note.device == device && note.stage != Stage::kOther) notes.push_back(&note);
      }
      std::stable_sort(notes.begin(), notes.end(), [](const Annotation* a, const Annotation* b) {
        return a->time_us < b->time_us;
      });
      AnnotationTimeline timeline{device, {}, {}};
      std::vector<uint32_t> open;
      for (const Annotation* note : notes) {
        if (note->stage == Stage::kStart) {
          open.push_back(note->name.value);
        } else if (auto it = std::find(open.rbegin(), open.rend(), note->name.value);
                   it != open.rend()) {
          open.erase(std::next(it).base());
        }
        uint32_t innermost = open.empty() ? 0 : open.back() + 1;
        if (!timeline.times.empty() && timeline.times.back() == note->time_us) {
          timeline.innermost.back() = innermost;
        } else {
          timeline.times.push_back(note->time_us);
          timeline.innermost.push_back(innermost);
        }
      }
      annotation_timelines_.push_back(std::move(timeline));
    }
  }
}

int SourceIndex::device_of(uint64_t event) const {
  for (const DeviceTrace& trace : snapshot_.devices) {
    if (event >= trace.begin && event < trace.end) return trace.device;
  }
  return 0;
}

uint32_t SourceIndex::pool_name(PoolId pool) {
  return id_of(pool_label(pool));
}

// The entry's own pool_id; else, when the file writes pool_id on entries,
// the default pool; else the pool of the dump's segment holding the address.
uint32_t SourceIndex::pool_of(const LiveAllocation& allocation) {
  if (allocation.event == kNoEvent) return id_of("<pool not recorded>");
  const EventColumns& events = snapshot_.events;
  if (auto own = events.pool_id.find(allocation.event); own != events.pool_id.end()) {
    return pool_name(own->second);
  }
  if (events.entries_carry_pool_id) return pool_name(PoolId{});
  const int device = device_of(allocation.event);
  const uint64_t addr = events.addr[allocation.event];
  auto after = std::upper_bound(pool_ranges_.begin(), pool_ranges_.end(), std::pair{device, addr},
                                [](const std::pair<int, uint64_t>& key, const PoolRange& range) {
                                  return key.first != range.device ? key.first < range.device
                                                                   : key.second < range.begin;
                                });
  if (after != pool_ranges_.begin()) {
    const PoolRange& range = *std::prev(after);
    if (range.device == device && addr < range.end) return pool_name(range.pool);
  }
  return id_of("<pool not recorded>");
}

uint32_t SourceIndex::annotation_of(const LiveAllocation& allocation) {
  static const std::string kNone = "<no annotation>";
  if (allocation.event == kNoEvent) return id_of(kNone);
  const int64_t time_us = snapshot_.events.time_us[allocation.event];
  if (time_us == 0) return id_of(kNone);
  const int device = device_of(allocation.event);
  for (const AnnotationTimeline& timeline : annotation_timelines_) {
    if (timeline.device != device) continue;
    auto after = std::upper_bound(timeline.times.begin(), timeline.times.end(), time_us);
    if (after == timeline.times.begin()) break;
    uint32_t innermost =
        timeline.innermost[static_cast<size_t>(std::prev(after) - timeline.times.begin())];
    if (innermost == 0) break;
    return id_of(std::string(snapshot_.strings.get(StringId{innermost - 1})));
  }
  return id_of(kNone);
}

uint32_t SourceIndex::of_block(const Segment& segment, const Block& block) {
  if (group_ == GroupBy::kPool)
    return pool_name(PoolId{segment.pool_id_first, segment.pool_id_second});
  return of(LiveAllocation{block.size, block.stack, kNoEvent, 0});
}

uint32_t SourceIndex::of_held_block(const Segment& segment, const Block& block) {
  if (!categories_) return of_block(segment, block);
  return category_source(categories_->classify_held_block(block.stack));
}

uint32_t SourceIndex::id_of(const std::string& name, KeyKind kind) {
  auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (inserted) {
    names_.push_back(name);
    kinds_.push_back(kind);
    evidence_.push_back(kNoEvidence);
  }
  return it->second;
}

uint32_t SourceIndex::category_source(Categorized categorized) {
  const uint32_t key = (static_cast<uint32_t>(categorized.category) << 16) | categorized.evidence;
  auto [it, inserted] = category_ids_.try_emplace(key, static_cast<uint32_t>(names_.size()));
  if (inserted) {
    names_.emplace_back(category_name(categorized.category));
    kinds_.push_back(KeyKind::kOther);
    evidence_.push_back(categorized.evidence);
  }
  return it->second;
}

std::vector<SourceUsage> SourceIndex::rows(std::span<const uint64_t> bytes,
                                           std::span<const uint64_t> counts) const {
  std::vector<SourceUsage> rows;
  absl::flat_hash_map<std::string_view, size_t> row_of_name;
  for (size_t s = 0; s < bytes.size() && s < counts.size(); ++s) {
    if (counts[s] == 0) continue;
    const auto id = static_cast<uint32_t>(s);
    const auto [at, added] = row_of_name.try_emplace(names_[id], rows.size());
    if (added) rows.push_back(SourceUsage{names_[id], 0, 0, kinds_[id], {}});
    SourceUsage& row = rows[at->second];
    row.bytes += bytes[s];
    row.count += counts[s];
    if (evidence_[id] != kNoEvidence) row.evidence.push_back({evidence_[id], bytes[s], counts[s]});
  }
  for (SourceUsage& row : rows) {
    std::sort(row.evidence.begin(), row.evidence.end(),
              [](const RowEvidence& a, const RowEvidence& b) {
                return a.bytes != b.bytes ? a.bytes > b.bytes : a.evidence < b.evidence;
              });
  }
  std::sort(rows.begin(), rows.end(), [](const SourceUsage& a, const SourceUsage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.source < b.source;
  });
  return rows;
}

uint32_t SourceIndex::of_free(uint64_t event, uint64_t size) {
  const StackId stack = snapshot_.events.stack[event];
  switch (group_) {
    case GroupBy::kPool: return pool_of(LiveAllocation{size, stack, event, 0});
    case GroupBy::kAnnotation:
    case GroupBy::kUserMetadata:
    case GroupBy::kCompileContext: return id_of(std::string(kBeforeTraceGroup));
    case GroupBy::kCategory: return category_source(categories_->classify_free_site(event, stack));
    case GroupBy::kSource:
    case GroupBy::kFile:
    case GroupBy::kFunction:
    case GroupBy::kStack: break;
  }
  if (!stack.valid()) return id_of(std::string(kNoFrames));
  if (stack.value >= freed_by_stack_.size()) freed_by_stack_.resize(stack.value + 1, 0);
  uint32_t& cached = freed_by_stack_[stack.value];
  if (cached == 0) {
    cached = id_of(fmt::format("{}{}{}", kFreedAtPrefix, keys_.freeing_code(stack), kFreedAtSuffix),
                   KeyKind::kFreeSite) +
             1;
  }
  return cached - 1;
}

uint32_t SourceIndex::of(const LiveAllocation& allocation) {
  if (group_ == GroupBy::kPool) return pool_of(allocation);
  if (group_ == GroupBy::kAnnotation) return annotation_of(allocation);
  if (group_ == GroupBy::kUserMetadata || group_ == GroupBy::kCompileContext) {
    const EventColumns& events = snapshot_.events;
    const auto& strings =
        group_ == GroupBy::kUserMetadata ? events.user_metadata : events.compile_context;
    auto found = allocation.event == kNoEvent ? strings.end() : strings.find(allocation.event);
    if (found == strings.end()) {
      return id_of(group_ == GroupBy::kUserMetadata ? "<no user_metadata>"
                                                    : "<no compile_context>");
    }
    return id_of(std::string(snapshot_.strings.get(found->second)));
  }
  if (!categories_ || allocation.event == kNoEvent) return of(allocation.stack);
  // A category can depend on the time (active annotations): one per event,
  // but only kCategoryCount names, so the table stays tiny.
  return category_source(categories_->classify(allocation.event, allocation.stack));
}

uint32_t SourceIndex::of(StackId stack) {
  if (categories_) return category_source(categories_->classify_stack(stack));
  if (stack.value >= by_stack_.size()) by_stack_.resize(stack.value + 1, 0);  // model grew
  uint32_t& cached = by_stack_[stack.value];
  if (cached == 0) {
    const std::string& key = keys_.key(stack);
    cached = id_of(key, key == kNoFrames ? KeyKind::kOther : KeyKind::kAllocationSite) + 1;
  }
  return cached - 1;
}

namespace {

// Keeps live bytes and counts per source id up to date as the replay runs.
class LiveBySource {
 public:
  explicit LiveBySource(SourceIndex& sources, const BaselineSources* baseline = nullptr)
      : sources_(sources), baseline_(baseline) {
    if (baseline_ == nullptr) return;
    bytes_ = baseline_->bytes;
    counts_ = baseline_->counts;
  }

  void on_alloc(uint64_t /*event*/, const LiveAllocation& added) {
    add(sources_.of(added), added.size);
  }
  void add(uint32_t source, uint64_t size) {
    if (source >= bytes_.size()) {
      bytes_.resize(source + 1, 0);
      counts_.resize(source + 1, 0);
    }
    bytes_[source] += size;
    ++counts_[source];
  }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) { remove(replaced); }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) { remove(freed); }
  // A block allocated before the trace is freed: out of its baseline source.
  void on_unmatched_free(uint64_t event, uint64_t size) {
    if (baseline_ == nullptr) return;
    auto found = baseline_->freed_source.find(event);
    if (found == baseline_->freed_source.end() || found->second >= bytes_.size()) return;
    bytes_[found->second] -= std::min(bytes_[found->second], size);
    counts_[found->second] -= std::min<uint64_t>(counts_[found->second], 1);
  }

  [[nodiscard]] std::vector<SourceUsage> rows() const { return sources_.rows(bytes_, counts_); }

 private:
  void remove(const LiveAllocation& gone) {
    uint32_t source = sources_.of(gone);  // the same group as when it was allocated
    bytes_[source] -= gone.size;
    --counts_[source];
  }

  SourceIndex& sources_;
  const BaselineSources* baseline_ = nullptr;
  std::vector<uint64_t> bytes_;  // by source id
  std::vector<uint64_t> counts_;
};

// Sources live on one side only, above kOnlyOneSideMinBytes.
OnlyOnOneSide only_on_one_side(const std::vector<SourceDiff>& rows, bool side_a) {
  OnlyOnOneSide only;
  for (const SourceDiff& row : rows) {
    uint64_t bytes = side_a ? row.bytes_a : row.bytes_b;
    uint64_t other_count = side_a ? row.count_b : row.count_a;
    if (other_count == 0 && bytes > kOnlyOneSideMinBytes) {
      ++only.sources;
      only.bytes += bytes;
    }
  }
  return only;
}

// Runs `replay` from the trace start and takes the per-source table at each
// position (ascending).
std::vector<std::vector<SourceUsage>> rows_at(Replay& replay, const DeviceTrace& trace,
                                              SourceIndex& sources,
                                              std::span<const uint64_t> positions,
                                              const BaselineSources* baseline) {
  LiveBySource live(sources, baseline);
  std::vector<std::vector<SourceUsage>> out;
  out.reserve(positions.size());
  uint64_t applied = 0;
  for (uint64_t position : positions) {
    uint64_t target = std::min(position, trace.count());
    if (target > applied) {
      replay.run(trace.begin + applied, trace.begin + target, live);
      applied = target;
    }
    out.push_back(live.rows());
  }
  return out;
}

}  // namespace

std::vector<std::vector<SourceUsage>> live_by_source(const Snapshot& snapshot,
                                                     const DeviceTrace& trace, SourceIndex& sources,
                                                     std::span<const uint64_t> positions,
                                                     const BaselineSources* baseline) {
  Replay replay(snapshot);
  return rows_at(replay, trace, sources, positions, baseline);
}

LiveAt live_at(const Snapshot& snapshot, const DeviceTrace& trace, SourceIndex& sources,
               uint64_t position, const BaselineSources* baseline) {
  Replay replay(snapshot);
  std::vector<uint64_t> positions{position};
  LiveAt at;
  at.sources = std::move(rows_at(replay, trace, sources, positions, baseline)[0]);
  const ReplayTotals totals = replay.totals();
  at.alloc_count = totals.alloc_count;
  at.free_count = totals.free_count;
  at.delta = totals.end_delta;
  at.live_count = totals.live_count_at_end;
  at.live_bytes = totals.live_bytes_at_end;
  return at;
}

LiveAt live_at(const Snapshot& snapshot, const DeviceTrace& trace, const LevelIndex& levels,
               const AllocationSpans& spans, SourceIndex& sources, uint64_t position) {
  const EventColumns& events = snapshot.events;
  position = std::min(position, trace.count());
  LiveAt at;
  const auto first = events.action.begin() + static_cast<std::ptrdiff_t>(trace.begin);
  const auto last = first + static_cast<std::ptrdiff_t>(position);
  at.alloc_count = static_cast<uint64_t>(std::count(first, last, Action::kAlloc));
  at.free_count = static_cast<uint64_t>(std::count(first, last, Action::kFreeCompleted));
  at.delta = levels.at(position);
  LiveBySource live(sources);
  for (const AllocationSpan& span : spans.by_size()) {
    if (!span.live_at(position)) continue;
    const uint64_t event = trace.begin + span.entry();
    const uint64_t size = spans.size_of(span);
    // What the replay would have made of it: of() reads the event and stack.
    live.add(sources.of(LiveAllocation{size, events.stack[event], event, 0}), size);
    ++at.live_count;
    at.live_bytes += size;
  }
  at.sources = live.rows();
  return at;
}

namespace {

// Collects the trace's frees without their alloc.
struct UnmatchedFrees {
  std::vector<BaselinePieces::Free>& out;
  void on_unmatched_free(uint64_t event, uint64_t size) { out.push_back({event, size}); }
};

}  // namespace

BaselinePieces baseline_pieces(const Snapshot& snapshot, const DeviceTrace& trace,
                               FreeFrames free_frames) {
  BaselinePieces pieces;
  pieces.free_frames = free_frames;
  UnmatchedFrees frees{pieces.unmatched_frees};
  Replay replay(snapshot);
  replay.run(trace.begin, trace.end, frees);
  // Active blocks at the dump that no live traced allocation accounts for.
  const LiveSet& traced = replay.live();
  uint64_t active = 0;
  uint64_t held = 0;
  for (size_t s = 0; s < snapshot.segments.size(); ++s) {
    const Segment& segment = snapshot.segments[s];
    if (segment.device != trace.device) continue;
    for (uint32_t b = segment.first_block; b < segment.first_block + segment.block_count; ++b) {
      const Block& block = snapshot.blocks[b];
      if (block.state != BlockState::kActiveAllocated &&
          block.state != BlockState::kActivePendingFree) {
        continue;
      }
      active += block.size;
      if (traced.contains(block.address)) continue;
      pieces.blocks.push_back({static_cast<uint32_t>(s), b});
      held += block.size;
    }
  }
  // The baseline is active - (traced bytes live at the end) + unmatched frees
  // (compute_baseline). Where a traced allocation's size differs from its
  // block's, or it has no block, the blocks leave part of it unnamed.
  const uint64_t still_live = active - held;  // blocks the trace accounts for
  const uint64_t traced_at_end = replay.totals().live_bytes_at_end;
  if (traced_at_end < still_live) pieces.unnamed = still_live - traced_at_end;
  return pieces;
}

BaselineSources baseline_sources(const Snapshot& snapshot, const BaselinePieces& pieces,
                                 SourceIndex& sources) {
  BaselineSources baseline;
  auto add = [&baseline](uint32_t source, uint64_t size) {
    if (source >= baseline.bytes.size()) {
      baseline.bytes.resize(source + 1, 0);
      baseline.counts.resize(source + 1, 0);
    }
    baseline.bytes[source] += size;
    ++baseline.counts[source];
  };
  const bool frees_name_allocations = pieces.free_frames == FreeFrames::kAllocation;
  for (const BaselinePieces::Free& free : pieces.unmatched_frees) {
    const StackId stack = snapshot.events.stack[free.event];
    const uint32_t source = frees_name_allocations
                                ? sources.of(LiveAllocation{free.size, stack, free.event, 0})
                                : sources.of_free(free.event, free.size);
    baseline.freed_source.emplace(free.event, source);
    baseline.known = baseline.known || stack.valid() || !sources.blocks_need_frames();
    add(source, free.size);
  }
  for (const BaselinePieces::HeldBlock& held : pieces.blocks) {
    const Block& block = snapshot.blocks[held.block];
    baseline.known = baseline.known || block.stack.valid() || !sources.blocks_need_frames();
    add(sources.of_held_block(snapshot.segments[held.segment], block), block.size);
  }
  // One row says what no block names, so that the rows add up.
  if (pieces.unnamed != 0) add(sources.intern(kBaselineUnmatched), pieces.unnamed);
  return baseline;
}

std::vector<SourceUsage> BaselineSources::rows(const SourceIndex& sources) const {
  return sources.rows(bytes, counts);
}

std::string frameless_size_class(uint64_t size) {
  // The power of two at or below the size, and the next: units of 1024.
  int exponent = 0;
  while (exponent < 63 && (uint64_t{1} << (exponent + 1)) <= size) ++exponent;
  static constexpr std::array<std::string_view, 7> kUnits = {"B",   "KiB", "MiB", "GiB",
                                                             "TiB", "PiB", "EiB"};
  const auto bound = [](int power) {
    return fmt::format("{} {}", uint64_t{1} << (power % 10),
                       kUnits[static_cast<size_t>(power / 10)]);
  };
  return fmt::format("<no frames: blocks of {} to {}>", bound(exponent), bound(exponent + 1));
}

std::vector<SourceUsage> live_at_dump_by_source(const Snapshot& snapshot, int device,
                                                SourceIndex& sources, FramelessBlocks frameless) {
  LiveBySource live(sources);
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const Block& block : snapshot.blocks_of(segment)) {
      if (block.state != BlockState::kActiveAllocated) continue;
      if (frameless == FramelessBlocks::kBySizeClass && !block.stack.valid() &&
          sources.blocks_need_frames()) {
        live.add(sources.intern(frameless_size_class(block.size)), block.size);
      } else {
        live.add(sources.of_block(segment, block), block.size);
      }
    }
  }
  return live.rows();
}

std::vector<SourceDiff> diff_sources(const std::vector<SourceUsage>& a,
                                     const std::vector<SourceUsage>& b) {
  std::map<std::string, SourceDiff> joined;
  for (const SourceUsage& row : a) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
    d.kind = row.kind;
    d.bytes_a = row.bytes;
    d.count_a = row.count;
  }
  for (const SourceUsage& row : b) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
    d.kind = row.kind;
    d.bytes_b = row.bytes;
    d.count_b = row.count;
  }
  std::vector<SourceDiff> rows;
  rows.reserve(joined.size());
  for (auto& [name, row] : joined) rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(), [](const SourceDiff& x, const SourceDiff& y) {
    return magnitude(x.delta()) > magnitude(y.delta());
  });
  return rows;
}

OnlyOnOneSide only_in_a(const std::vector<SourceDiff>& rows) {
  return only_on_one_side(rows, true);
}
OnlyOnOneSide only_in_b(const std::vector<SourceDiff>& rows) {
  return only_on_one_side(rows, false);
}

SourceComparison compare_sources(const std::vector<SourceUsage>& a,
                                 const std::vector<SourceUsage>& b) {
  SourceComparison comparison;
  comparison.rows = diff_sources(a, b);
  comparison.only_a = only_in_a(comparison.rows);
  comparison.only_b = only_in_b(comparison.rows);
  return comparison;
}

}  // namespace memsnap
