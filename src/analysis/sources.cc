#include "analysis/sources.h"

#include <algorithm>
#include <map>

#include "memsnap/replay.h"

namespace memsnap {

SourceIndex::SourceIndex(const Snapshot& snapshot, const SourceKeyOptions& key_options)
    : snapshot_(snapshot),
      group_(key_options.group),
      keys_(snapshot, key_options),
      by_stack_(snapshot.stacks.size() + 1, 0) {
  if (key_options.group == GroupBy::kCategory) {
    categories_.emplace(snapshot, key_options.category_rules);
  }
}

uint32_t SourceIndex::id_of(const std::string& name) {
  auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

uint32_t SourceIndex::of(const LiveAllocation& allocation) {
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
  return id_of(std::string(category_name(categories_->of(allocation.event, allocation.stack))));
}

uint32_t SourceIndex::of(StackId stack) {
  if (categories_) return id_of(std::string(category_name(categories_->of_stack(stack))));
  if (stack.value >= by_stack_.size()) by_stack_.resize(stack.value + 1, 0);  // model grew
  uint32_t& cached = by_stack_[stack.value];
  if (cached == 0) cached = id_of(keys_.key(stack)) + 1;
  return cached - 1;
}

namespace {

// Keeps live bytes and counts per source id up to date as the replay runs.
class LiveBySource {
 public:
  explicit LiveBySource(SourceIndex& sources) : sources_(sources) {}

  void on_alloc(uint64_t /*event*/, const LiveAllocation& added) {
    uint32_t source = sources_.of(added);
    if (source >= bytes_.size()) {
      bytes_.resize(source + 1, 0);
      counts_.resize(source + 1, 0);
    }
    bytes_[source] += added.size;
    ++counts_[source];
  }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) { remove(replaced); }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) { remove(freed); }

  [[nodiscard]] std::vector<SourceUsage> rows() const {
    std::vector<SourceUsage> rows;
    for (size_t s = 0; s < bytes_.size(); ++s) {
      if (counts_[s] != 0)
        rows.push_back(SourceUsage{sources_.name(static_cast<uint32_t>(s)), bytes_[s], counts_[s]});
    }
    std::sort(rows.begin(), rows.end(), [](const SourceUsage& a, const SourceUsage& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.source < b.source;
    });
    return rows;
  }

 private:
  void remove(const LiveAllocation& gone) {
    uint32_t source = sources_.of(gone);  // the same group as when it was allocated
    bytes_[source] -= gone.size;
    --counts_[source];
  }

  SourceIndex& sources_;
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
                                              std::span<const uint64_t> positions) {
  LiveBySource live(sources);
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
                                                     std::span<const uint64_t> positions) {
  Replay replay(snapshot);
  return rows_at(replay, trace, sources, positions);
}

LiveAt live_at(const Snapshot& snapshot, const DeviceTrace& trace, SourceIndex& sources,
               uint64_t position) {
  Replay replay(snapshot);
  std::vector<uint64_t> positions{position};
  LiveAt at;
  at.sources = std::move(rows_at(replay, trace, sources, positions)[0]);
  at.totals = replay.totals();
  return at;
}

std::vector<SourceUsage> live_at_dump_by_source(const Snapshot& snapshot, int device,
                                                SourceIndex& sources) {
  LiveBySource live(sources);
  bool any_stack = false;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const Block& block : snapshot.blocks_of(segment)) {
      if (block.state != BlockState::kActiveAllocated) continue;
      any_stack = any_stack || block.stack.valid();
      live.on_alloc(0, LiveAllocation{block.size, block.stack, kNoEvent, 0});  // no trace entry
    }
  }
  return any_stack ? live.rows() : std::vector<SourceUsage>{};
}

std::vector<SourceDiff> diff_sources(const std::vector<SourceUsage>& a,
                                     const std::vector<SourceUsage>& b) {
  std::map<std::string, SourceDiff> joined;
  for (const SourceUsage& row : a) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
    d.bytes_a = row.bytes;
    d.count_a = row.count;
  }
  for (const SourceUsage& row : b) {
    SourceDiff& d = joined[row.source];
    d.source = row.source;
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
