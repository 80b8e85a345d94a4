#include "analysis/reports/timeline.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/categories.h"
#include "analysis/core/sources.h"
#include "memsnap/replay.h"

namespace memsnap {

Buckets bucketize(const std::vector<double>& positions, const std::vector<double>& values,
                  double extent, double min_width, uint64_t max_buckets) {
  Buckets buckets;
  if (positions.empty() || max_buckets == 0) return buckets;
  extent = std::max(extent, 0.0);  // a hostile trace can run backwards in time
  double width = std::max(min_width, extent / static_cast<double>(max_buckets));
  if (width <= 0) width = 1;
  auto count = static_cast<uint64_t>(std::floor(extent / width)) + 1;
  count = std::min(count, max_buckets);
  buckets.width = width;
  buckets.min.assign(count, 0);
  buckets.max.assign(count, 0);
  double carry = 0;
  uint64_t filled = 0;  // buckets [0, filled) are final
  for (size_t i = 0; i < positions.size(); ++i) {
    uint64_t bucket = bucket_of(positions[i], width, count);
    while (filled <= bucket) {
      buckets.min[filled] = carry;
      buckets.max[filled] = carry;
      ++filled;
    }
    carry = values[i];
    buckets.min[bucket] = std::min(buckets.min[bucket], carry);
    buckets.max[bucket] = std::max(buckets.max[bucket], carry);
  }
  for (; filled < count; ++filled) {
    buckets.min[filled] = carry;
    buckets.max[filled] = carry;
  }
  return buckets;
}

namespace {

double seconds_between(int64_t from_us, int64_t to_us) {
  return static_cast<double>(to_us - from_us) / 1e6;
}

// Lifetimes of allocations and live bytes by source, as the replay runs.
struct TimelineObserver {
  TimelineObserver(const Snapshot& snapshot_in, const SourceKeyOptions& key_options,
                   Lifetimes& life_in, uint64_t trace_begin_in)
      : snapshot(snapshot_in),
        sources(snapshot_in, key_options),
        life(life_in),
        trace_begin(trace_begin_in) {}

  const Snapshot& snapshot;
  SourceIndex sources;
  Lifetimes& life;
  uint64_t trace_begin = 0;  // model index of the trace's first event
  uint64_t offset_us = 0;    // time of the current event from the trace start, >= 0
  // Per source: bytes live now, and the most it ever held (picks the stacked
  // view's layers).
  std::vector<int64_t> source_live;
  std::vector<int64_t> source_most;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    life.start_us.push_back(offset_us);
    life.end_us.push_back(Lifetimes::kStillLive);
    life.start_event.push_back(event - trace_begin);
    life.end_event.push_back(Lifetimes::kStillLive);
    life.size.push_back(added.size);
    uint32_t source = sources.of(added);
    life.source.push_back(source);
    if (source >= source_live.size()) {
      source_live.resize(source + 1, 0);
      source_most.resize(source + 1, 0);
    }
    source_live[source] = add_bytes(source_live[source], added.size);
    source_most[source] = std::max(source_most[source], source_live[source]);
  }
  // Allocations whose address was reused without a free: the replay keeps
  // counting them, so the drill-down lists them apart (UnlistedMemory).
  struct Replaced {
    uint64_t event = 0;  // model index of the alloc that took the address
    uint64_t offset_us = 0;
    uint64_t size = 0;
  };
  std::vector<Replaced> replaced;

  // Lifetimes are appended in alloc order, so an alloc's ordinal is its index.
  void on_replace(uint64_t event, const LiveAllocation& replaced_allocation) {
    end(event, replaced_allocation);
    replaced.push_back({event, offset_us, replaced_allocation.size});
  }
  void on_free(uint64_t event, const LiveAllocation& freed) { end(event, freed); }
  void end(uint64_t event, const LiveAllocation& gone) {
    life.end_us[gone.ordinal] = offset_us;
    life.end_event[gone.ordinal] = event - trace_begin;
    uint32_t source = life.source[gone.ordinal];
    source_live[source] = sub_bytes(source_live[source], gone.size);
  }
};

// Samples the running layer totals at the moment each stack bucket of one
// view (wall clock or event index) reaches its max. Fed the same positions and
// deltas as bucketize, and places them with the same bucket_of, so a stack
// bucket's max is exactly the largest max of the view buckets it spans.
class LayerSampler {
 public:
  LayerSampler(const Buckets& view, size_t layer_count)
      : width_(view.width), view_count_(view.min.size()), layer_count_(layer_count) {
    if (view_count_ == 0) return;
    per_bucket_ = (view_count_ + kMaxStackBuckets - 1) / kMaxStackBuckets;
    count_ = (view_count_ + per_bucket_ - 1) / per_bucket_;
    samples_.assign(count_ * layer_count_, 0);
    max_.assign(count_, 0);
  }

  // Before an event at `position` changes anything: every bucket up to and
  // including its own starts from the state carried in.
  void before(double position, const std::vector<int64_t>& layers, int64_t delta) {
    if (count_ == 0) return;
    current_ = bucket_of(position, width_, view_count_) / per_bucket_;
    while (filled_ <= current_) start_bucket(layers, delta);
  }
  void after(const std::vector<int64_t>& layers, int64_t delta) {
    if (count_ == 0 || delta <= max_[current_]) return;
    max_[current_] = delta;
    std::copy(layers.begin(), layers.end(), samples_.begin() + current_ * layer_count_);
  }
  // Buckets past the last event hold the final state.
  void finish(const std::vector<int64_t>& layers, int64_t delta) {
    while (filled_ < count_) start_bucket(layers, delta);
  }

  [[nodiscard]] bool layer_used(size_t layer) const {
    for (uint64_t b = 0; b < count_; ++b) {
      if (samples_[b * layer_count_ + layer] != 0) return true;
    }
    return false;
  }
  // The kept layers, in order, as rows of the stacked view.
  [[nodiscard]] StackedBuckets take(const std::vector<size_t>& kept) const {
    StackedBuckets out;
    if (count_ == 0) return out;
    out.per_bucket = per_bucket_;
    for (size_t layer : kept) {
      std::vector<double> row(count_);
      for (uint64_t b = 0; b < count_; ++b)
        row[b] = static_cast<double>(samples_[b * layer_count_ + layer]);
      out.layers.push_back(std::move(row));
    }
    return out;
  }

 private:
  void start_bucket(const std::vector<int64_t>& layers, int64_t delta) {
    std::copy(layers.begin(), layers.end(), samples_.begin() + filled_ * layer_count_);
    max_[filled_] = delta;
    ++filled_;
  }

  double width_ = 1;
  uint64_t view_count_ = 0;
  size_t layer_count_ = 0;
  uint64_t per_bucket_ = 1;
  uint64_t count_ = 0;
  uint64_t filled_ = 0;           // buckets [0, filled_) have started
  uint64_t current_ = 0;          // the bucket of the event being applied
  std::vector<int64_t> samples_;  // [bucket][layer]
  std::vector<int64_t> max_;      // delta, as bucketize keeps it
};

// Layer totals, kept up to date by the replay. Layer 0 is memory allocated
// before the trace (baseline, less each unmatched free); the last layer holds
// allocations whose address was reused without a free (the replay still counts
// them); the ones between are the allocations' own layers.
struct LayerTotals {
  LayerTotals(size_t own_layers, int64_t baseline) : bytes(own_layers + 2, 0) {
    bytes[0] = baseline;
  }
  std::vector<int64_t> bytes;
  [[nodiscard]] size_t replaced_layer() const { return bytes.size() - 1; }
};

// The second replay of build_timeline: layer totals by category and by source.
struct StackObserver {
  StackObserver(const Snapshot& snapshot, const SourceKeyOptions& key_options,
                const std::vector<uint32_t>& source_of_ordinal_in,
                std::vector<uint32_t> source_layer_in, size_t source_layers, int64_t baseline)
      : categorizer(snapshot, key_options.category_rules),
        source_of_ordinal(source_of_ordinal_in),
        source_layer(std::move(source_layer_in)),
        by_category(kCategoryCount, baseline),
        by_source(source_layers, baseline) {}

  Categorizer categorizer;
  const std::vector<uint32_t>& source_of_ordinal;
  std::vector<uint32_t> source_layer;   // source id -> layer
  std::vector<uint8_t> category_layer;  // alloc ordinal -> layer
  LayerTotals by_category;
  LayerTotals by_source;

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    auto layer = static_cast<uint8_t>(1 + static_cast<size_t>(categorizer.of(event, added.stack)));
    category_layer.push_back(layer);
    add(by_category, layer, added.size);
    add(by_source, source_layer[source_of_ordinal[added.ordinal]], added.size);
  }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) {
    move_to_replaced(by_category, category_layer[replaced.ordinal], replaced.size);
    move_to_replaced(by_source, source_layer[source_of_ordinal[replaced.ordinal]], replaced.size);
  }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) {
    sub(by_category, category_layer[freed.ordinal], freed.size);
    sub(by_source, source_layer[source_of_ordinal[freed.ordinal]], freed.size);
  }
  void on_unmatched_free(uint64_t event, uint64_t size) {
    sub(by_category, layer_of_freed(baseline_category_layer, event), size);
    sub(by_source, layer_of_freed(baseline_source_layer, event), size);
  }

  // Memory from before the trace, named by its frames (BaselineSources): its
  // bytes start in their own layers, and each unmatched free leaves the layer
  // it started in; what no frame names stays in the first layer.
  absl::flat_hash_map<uint64_t, size_t> baseline_category_layer;  // unmatched free -> layer
  absl::flat_hash_map<uint64_t, size_t> baseline_source_layer;
  static size_t layer_of_freed(const absl::flat_hash_map<uint64_t, size_t>& layers,
                               uint64_t event) {
    auto found = layers.find(event);
    return found == layers.end() ? 0 : found->second;
  }
  static void seed(LayerTotals& totals, const BaselineSources& baseline,
                   const std::function<size_t(uint32_t)>& layer_of,
                   absl::flat_hash_map<uint64_t, size_t>& freed_layer) {
    if (!baseline.known) return;
    for (uint32_t s = 0; s < baseline.bytes.size(); ++s) {
      if (baseline.bytes[s] == 0) continue;
      const size_t layer = layer_of(s);
      totals.bytes[layer] = add_bytes(totals.bytes[layer], baseline.bytes[s]);
      totals.bytes[0] = sub_bytes(totals.bytes[0], baseline.bytes[s]);
    }
    for (const auto& [event, source] : baseline.freed_source) freed_layer[event] = layer_of(source);
  }

 private:
  static void add(LayerTotals& totals, size_t layer, uint64_t size) {
    totals.bytes[layer] = add_bytes(totals.bytes[layer], size);
  }
  static void sub(LayerTotals& totals, size_t layer, uint64_t size) {
    totals.bytes[layer] = sub_bytes(totals.bytes[layer], size);
  }
  static void move_to_replaced(LayerTotals& totals, size_t layer, uint64_t size) {
    sub(totals, layer, size);
    add(totals, totals.replaced_layer(), size);
  }
};

constexpr std::string_view kBeforeTraceLayer = "before the trace";
constexpr std::string_view kOtherSourcesLayer = "other sources";
constexpr std::string_view kReplacedLayer = "address reused without a free";

// The layers [first, first + count) that are parts of the other sources'
// layer `other` (stacked by source), or none.
struct OtherParts {
  size_t first = 0;
  size_t count = 0;
  size_t other = 0;
};

// The layers worth a place in the view: "before the trace" always, the others
// when some bucket holds bytes in them. Parts of the other sources go to
// other_parts and count in "other sources" too, which then stays in the view.
StackedView finish_view(std::vector<std::string> names, const LayerSampler& time,
                        const LayerSampler& index, OtherParts parts = {}) {
  const auto is_part = [&](size_t layer) {
    return layer >= parts.first && layer < parts.first + parts.count;
  };
  const auto used = [&](size_t layer) { return time.layer_used(layer) || index.layer_used(layer); };
  std::vector<size_t> kept;
  std::vector<size_t> kept_parts;
  size_t other_row = SIZE_MAX;
  StackedView view;
  for (size_t layer = 0; layer < names.size(); ++layer) {
    if (is_part(layer)) {
      if (used(layer)) {
        kept_parts.push_back(layer);
        view.other_parts.push_back(names[layer]);
      }
    } else if (layer == 0 || used(layer) || (layer == parts.other && !kept_parts.empty())) {
      if (layer == parts.other && !kept_parts.empty()) other_row = kept.size();
      kept.push_back(layer);
      view.names.push_back(names[layer]);
    }
  }
  view.time = time.take(kept);
  view.index = index.take(kept);
  view.other_parts_time = time.take(kept_parts);
  view.other_parts_index = index.take(kept_parts);
  if (other_row != SIZE_MAX) {
    for (auto [whole, split] : {std::pair{&view.time, &view.other_parts_time},
                                std::pair{&view.index, &view.other_parts_index}}) {
      if (whole->layers.empty()) continue;
      std::vector<double>& other = whole->layers[other_row];
      for (const std::vector<double>& part : split->layers) {
        for (size_t b = 0; b < other.size(); ++b) other[b] += part[b];
      }
    }
  }
  return view;
}

// Memory from before the trace by the run's source ids and by category.
struct NamedBaseline {
  BaselineSources by_source;
  BaselineSources by_category;
  std::vector<std::string> category_names;  // by_category's ids -> names
};

// The stacked-by-source view's layers: before the trace, the top sources,
// the other sources' parts, the rest of the other sources, reused addresses.
// The parts are sampled as layers of their own and folded back into "other
// sources" when the view is taken (finish_view).
struct SourceLayers {
  std::vector<uint32_t> of_source;  // each source's layer
  std::vector<std::string> names;
  size_t top = 0;    // sources with a layer of their own
  size_t parts = 0;  // the other sources' parts
  uint32_t first_part = 0;
  uint32_t other_layer = 0;
};

SourceLayers source_layers(const RunTimeline& run, const std::vector<int64_t>& source_most) {
  const size_t source_count = run.sources.size();
  auto most = [&](uint32_t s) { return s < source_most.size() ? source_most[s] : 0; };
  std::vector<uint32_t> order(source_count);
  for (uint32_t s = 0; s < source_count; ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (most(a) != most(b)) return most(a) > most(b);
    return run.sources[a] < run.sources[b];
  });
  SourceLayers layers;
  size_t& top = layers.top;
  size_t& parts = layers.parts;
  while (top < std::min(kStackedTopSources, source_count) && most(order[top]) > 0) ++top;
  while (parts < kStackedOtherParts && top + parts < source_count && most(order[top + parts]) > 0)
    ++parts;
  layers.first_part = static_cast<uint32_t>(1 + top);
  layers.other_layer = static_cast<uint32_t>(1 + top + parts);
  layers.of_source.assign(source_count, layers.other_layer);
  layers.names.emplace_back(kBeforeTraceLayer);
  for (size_t k = 0; k < top + parts; ++k) {
    layers.of_source[order[k]] = static_cast<uint32_t>(1 + k);
    layers.names.push_back(run.sources[order[k]]);
  }
  layers.names.emplace_back(kOtherSourcesLayer);
  layers.names.emplace_back(kReplacedLayer);
  return layers;
}

// The stacked-by-category view's layers: before the trace, each category,
// reused addresses.
std::vector<std::string> category_layer_names() {
  std::vector<std::string> names{std::string(kBeforeTraceLayer)};
  for (size_t c = 0; c < kCategoryCount; ++c)
    names.emplace_back(category_name(static_cast<Category>(c)));
  names.emplace_back(kReplacedLayer);
  return names;
}

// The stacked views of `run`, whose buckets and lifetimes are built: the
// sources that held the most at any one moment get a layer each, and a second
// replay samples every layer at each stack bucket's max.
template <typename OffsetOf>
void add_stacked_views(RunTimeline& run, const Snapshot& snapshot, const DeviceTrace& trace,
                       const SourceKeyOptions& key_options, const std::vector<int64_t>& source_most,
                       const NamedBaseline& baseline, OffsetOf offset_of) {
  SourceLayers layers = source_layers(run, source_most);
  const size_t top = layers.top;
  const size_t parts = layers.parts;
  const uint32_t first_part = layers.first_part;
  const uint32_t other_layer = layers.other_layer;
  std::vector<uint32_t> source_layer = std::move(layers.of_source);
  std::vector<std::string> source_names = std::move(layers.names);
  std::vector<std::string> category_names = category_layer_names();

  const std::vector<uint32_t> layer_of_source = source_layer;
  StackObserver stacks(snapshot, key_options, run.lifetimes.source, std::move(source_layer),
                       top + parts + 1, run.baseline);
  StackObserver::seed(
      stacks.by_source, baseline.by_source,
      [&](uint32_t s) { return s < layer_of_source.size() ? layer_of_source[s] : other_layer; },
      stacks.baseline_source_layer);
  StackObserver::seed(
      stacks.by_category, baseline.by_category,
      [&](uint32_t c) {
        for (size_t k = 0; k < kCategoryCount; ++k) {
          if (baseline.category_names[c] == category_name(static_cast<Category>(k))) return 1 + k;
        }
        return size_t{0};
      },
      stacks.baseline_category_layer);
  LayerSampler category_time(run.time_buckets, category_names.size());
  LayerSampler category_index(run.index_buckets, category_names.size());
  LayerSampler source_time(run.time_buckets, source_names.size());
  LayerSampler source_index(run.index_buckets, source_names.size());
  const std::vector<int64_t>& by_category = stacks.by_category.bytes;
  const std::vector<int64_t>& by_source = stacks.by_source.bytes;
  const EventColumns& events = snapshot.events;
  Replay replay(snapshot);
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    Action action = events.action[i];
    if (action != Action::kAlloc && action != Action::kFreeCompleted) {
      replay.apply(i, stacks);
      continue;
    }
    auto t = static_cast<double>(offset_of(i));
    auto e = static_cast<double>(i - trace.begin);
    category_time.before(t, by_category, replay.delta());
    category_index.before(e, by_category, replay.delta());
    source_time.before(t, by_source, replay.delta());
    source_index.before(e, by_source, replay.delta());
    replay.apply(i, stacks);
    category_time.after(by_category, replay.delta());
    category_index.after(by_category, replay.delta());
    source_time.after(by_source, replay.delta());
    source_index.after(by_source, replay.delta());
  }
  for (LayerSampler* sampler : {&category_time, &category_index})
    sampler->finish(by_category, replay.delta());
  for (LayerSampler* sampler : {&source_time, &source_index})
    sampler->finish(by_source, replay.delta());
  run.by_category = finish_view(std::move(category_names), category_time, category_index);
  run.by_source = finish_view(std::move(source_names), source_time, source_index,
                              OtherParts{first_part, parts, other_layer});
}

// Memory from before the trace and at reused addresses, as the drill-down's
// rows and their changes over the trace (UnlistedMemory), from the baseline's
// pieces named by the run's own SourceIndex (as explain names them).
constexpr std::string_view kOtherBeforeTraceRow = "other memory from before the trace";
struct UnlistedCandidate {
  std::string name;
  int64_t bytes = 0;
  int64_t count = 0;
};
constexpr size_t kNoCandidate = SIZE_MAX;

// Memory from before the trace by its sources, with the residual the pieces
// miss the baseline by; candidate_of_source maps a source id to its entry.
std::vector<UnlistedCandidate> unlisted_candidates(const FileAnalysis& file,
                                                   const BaselineSources& baseline,
                                                   const SourceIndex& sources,
                                                   std::vector<size_t>& candidate_of_source) {
  std::vector<UnlistedCandidate> candidates;
  candidate_of_source.assign(baseline.bytes.size(), kNoCandidate);
  int64_t named = 0;
  for (size_t s = 0; s < baseline.bytes.size(); ++s) {
    if (baseline.counts[s] == 0) continue;
    candidate_of_source[s] = candidates.size();
    candidates.push_back({sources.name(static_cast<uint32_t>(s)),
                          static_cast<int64_t>(baseline.bytes[s]),
                          static_cast<int64_t>(baseline.counts[s])});
    named = add_bytes(named, baseline.bytes[s]);
  }
  // The pieces miss the baseline by what the segments' own active_size and
  // their blocks disagree on (or a traced allocation larger than its
  // block): that residual, either sign, joins the row of bytes no block
  // names, so that the rows start at exactly the line's baseline.
  const int64_t residual =
      sub_bytes(file.baseline().baseline_at_start, static_cast<uint64_t>(named));
  if (residual != 0) {
    auto unnamed =
        std::find_if(candidates.begin(), candidates.end(),
                     [](const UnlistedCandidate& c) { return c.name == kBaselineUnmatched; });
    if (unnamed == candidates.end()) {
      candidates.push_back({std::string(kBaselineUnmatched), 0, 0});
      unnamed = std::prev(candidates.end());
    }
    unnamed->bytes = add_bytes(unnamed->bytes, static_cast<uint64_t>(residual));
  }
  return candidates;
}

uint32_t add_unlisted_row(UnlistedMemory& out, std::string name, int64_t bytes, int64_t count) {
  out.rows.push_back(std::move(name));
  out.start_bytes.push_back(bytes);
  out.start_count.push_back(count);
  return static_cast<uint32_t>(out.rows.size() - 1);
}

// The rows: the largest candidates one each, the rest one "other" row;
// returns each candidate's row.
std::vector<uint32_t> unlisted_rows(const std::vector<UnlistedCandidate>& candidates,
                                    UnlistedMemory& out) {
  std::vector<size_t> order(candidates.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (candidates[a].bytes != candidates[b].bytes)
      return candidates[a].bytes > candidates[b].bytes;
    return candidates[a].name < candidates[b].name;
  });
  // The largest get a row each; one more would be an "other" of one.
  const size_t own =
      candidates.size() <= kUnlistedTopSources + 1 ? candidates.size() : kUnlistedTopSources;
  std::vector<uint32_t> row_of_candidate(candidates.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const UnlistedCandidate& candidate = candidates[order[k]];
    if (k < own) {
      row_of_candidate[order[k]] =
          add_unlisted_row(out, candidate.name, candidate.bytes, candidate.count);
      continue;
    }
    if (k == own) add_unlisted_row(out, std::string(kOtherBeforeTraceRow), 0, 0);
    const size_t other = out.rows.size() - 1;
    out.start_bytes[other] =
        add_bytes(out.start_bytes[other], static_cast<uint64_t>(candidate.bytes));
    out.start_count[other] += candidate.count;
    row_of_candidate[order[k]] = static_cast<uint32_t>(other);
  }
  return row_of_candidate;
}

template <typename OffsetOf>
UnlistedMemory unlisted_memory(const FileAnalysis& file, const BaselineSources& baseline,
                               const SourceIndex& sources,
                               const std::vector<TimelineObserver::Replaced>& replaced,
                               OffsetOf offset_of) {
  std::vector<size_t> candidate_of_source;
  const std::vector<UnlistedCandidate> candidates =
      unlisted_candidates(file, baseline, sources, candidate_of_source);
  UnlistedMemory out;
  const std::vector<uint32_t> row_of_candidate = unlisted_rows(candidates, out);
  const uint32_t replaced_row =
      replaced.empty() ? 0 : add_unlisted_row(out, std::string(kReplacedLayer), 0, 0);

  // The changes in trace order: each unmatched free leaves the row its
  // bytes started in; each reused address adds the allocation it replaced.
  const std::vector<BaselinePieces::Free>& frees = file.baseline_pieces().unmatched_frees;
  const uint64_t trace_begin = file.trace().begin;
  auto add_change = [&](uint64_t event, uint32_t row, int64_t bytes, int64_t count) {
    out.change_us.push_back(static_cast<uint64_t>(std::max<int64_t>(offset_of(event), 0)));
    out.change_event.push_back(event - trace_begin);
    out.change_row.push_back(row);
    out.change_bytes.push_back(bytes);
    out.change_count.push_back(count);
  };
  size_t f = 0;
  size_t r = 0;
  while (f < frees.size() || r < replaced.size()) {
    if (r == replaced.size() || (f < frees.size() && frees[f].event < replaced[r].event)) {
      const BaselinePieces::Free& free = frees[f++];
      // Every unmatched free is named (baseline_sources), so it has a row.
      auto found = baseline.freed_source.find(free.event);
      const size_t candidate =
          found == baseline.freed_source.end() || found->second >= candidate_of_source.size()
              ? kNoCandidate
              : candidate_of_source[found->second];
      const uint32_t row = candidate == kNoCandidate ? 0 : row_of_candidate[candidate];
      add_change(free.event, row, sub_bytes(0, free.size), -1);
    } else {
      const TimelineObserver::Replaced& reuse = replaced[r++];
      add_change(reuse.event, replaced_row, static_cast<int64_t>(reuse.size), 1);
    }
  }
  return out;
}

// A run's figures before its lines: label, file, device, baseline, peaks,
// counts, and the trace's span.
RunTimeline timeline_of(const FileAnalysis& file, const std::string& label) {
  const DeviceTrace& trace = file.trace();
  const ReplayTotals& totals = file.trace_analysis().totals;
  RunTimeline run;
  run.label = label;
  run.file = file.path();
  run.device = file.device();
  run.baseline = file.baseline().baseline_at_start;
  run.peak_delta = totals.peak_delta;
  run.absolute_peak = file.absolute_peak();
  run.alloc_count = totals.alloc_count;
  run.unmatched_frees = totals.unmatched_free_count;
  run.unmatched_free_bytes = totals.unmatched_free_bytes;
  run.event_count = trace.count();
  const TraceTime& time = file.time();
  run.has_time = time.timed();
  // Clamped: in a hostile file the last timed entry can precede the first.
  run.duration_s =
      run.has_time ? std::max(0.0, seconds_between(time.start_us(), time.end_us())) : 0;
  return run;
}

// Reserved memory, as the file's reserved history walked it, at most
// kFreeSeriesBuckets buckets' max and last points, like the free line: over
// the wall clock and over the event axis. A trace without segment entries
// reserved the same all along: the dump's segments, drawn flat from start to
// end.
template <typename OffsetOf>
void add_reserved_line(const FileAnalysis& file, const OffsetOf& offset_of, RunTimeline& run) {
  const ReservedHistory& history = file.reserved();
  const DeviceTrace& trace = file.trace();
  if (history.steps.empty() && (history.at_dump == 0 || trace.count() == 0)) return;
  BoundedStepSeries by_time(run.duration_s * 1e6, run.reserved);
  BoundedStepSeries by_entry(static_cast<double>(trace.count()), run.reserved_by_entry);
  by_time.add(0, history.at_start);
  by_entry.add(0, history.at_start);
  for (const ReservedStep& step : history.steps) {
    const auto bytes = static_cast<uint64_t>(std::max<int64_t>(step.reserved, 0));
    by_time.add(std::max<int64_t>(offset_of(step.event), 0), bytes);
    by_entry.add(static_cast<int64_t>(step.event - trace.begin), bytes);
  }
  if (history.steps.empty()) {
    by_time.add(static_cast<int64_t>(run.duration_s * 1e6), history.at_dump);
    by_entry.add(static_cast<int64_t>(trace.count()), history.at_dump);
  }
  by_time.finish();
  by_entry.finish();
}

// The steps, the record_function ranges (ProfilerStep aside) and the oom
// entries, in seconds from the trace's start.
void add_markers(const FileAnalysis& file, int64_t t0, RunTimeline& run) {
  const Snapshot& snapshot = file.snapshot();
  const EventColumns& events = snapshot.events;
  const DeviceTrace& trace = file.trace();
  run.steps_origin = file.step_windows().inference();
  for (const ProfilerStep& step : file.steps()) {
    Marker marker{std::to_string(step.number), seconds_between(t0, step.start_us), std::nullopt};
    if (step.complete) marker.end_s = seconds_between(t0, step.end_us);
    run.steps.push_back(marker);
  }
  std::map<std::string, std::vector<size_t>> open;
  for (const Annotation& note : snapshot.annotations) {
    if (note.device != file.device()) continue;
    std::string name(snapshot.strings.get(note.name));
    if (name.starts_with("ProfilerStep#")) continue;
    if (note.stage == Stage::kStart) {
      open[name].push_back(run.annotations.size());
      run.annotations.push_back(Marker{name, seconds_between(t0, note.time_us), std::nullopt});
    } else if (note.stage == Stage::kEnd && note.time_us > 0) {
      auto it = open.find(name);
      if (it != open.end() && !it->second.empty()) {
        run.annotations[it->second.back()].end_s = seconds_between(t0, note.time_us);
        it->second.pop_back();
      }
    }
  }
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    if (events.action[i] != Action::kOom) continue;
    OomMarker oom{events.time_us[i] != 0 ? seconds_between(t0, events.time_us[i]) : run.duration_s,
                  events.size[i], std::nullopt};
    if (auto it = events.device_free.find(i); it != events.device_free.end())
      oom.device_free = it->second;
    run.ooms.push_back(oom);
  }
}

}  // namespace

void merge_changes_at_moments(UnlistedMemory& unlisted, const std::vector<uint64_t>& moment_us) {
  // Change k shows from the first moment at or after its time; one after
  // the last moment never shows.
  struct Placed {
    size_t moment = 0;
    size_t change = 0;
  };
  std::vector<Placed> placed;
  for (size_t k = 0; k < unlisted.change_us.size(); ++k) {
    const auto at = std::lower_bound(moment_us.begin(), moment_us.end(), unlisted.change_us[k]) -
                    moment_us.begin();
    if (static_cast<size_t>(at) < moment_us.size()) placed.push_back({static_cast<size_t>(at), k});
  }
  std::stable_sort(placed.begin(), placed.end(), [&](const Placed& a, const Placed& b) {
    if (a.moment != b.moment) return a.moment < b.moment;
    return unlisted.change_row[a.change] < unlisted.change_row[b.change];
  });
  UnlistedMemory merged;
  merged.rows = std::move(unlisted.rows);
  merged.start_bytes = std::move(unlisted.start_bytes);
  merged.start_count = std::move(unlisted.start_count);
  for (size_t i = 0; i < placed.size(); ++i) {
    const size_t k = placed[i].change;
    const bool same = i > 0 && placed[i - 1].moment == placed[i].moment &&
                      unlisted.change_row[placed[i - 1].change] == unlisted.change_row[k];
    if (!same) {
      merged.change_us.push_back(moment_us[placed[i].moment]);
      merged.change_event.push_back(unlisted.change_event[k]);
      merged.change_row.push_back(unlisted.change_row[k]);
      merged.change_bytes.push_back(0);
      merged.change_count.push_back(0);
    }
    merged.change_event.back() = std::max(merged.change_event.back(), unlisted.change_event[k]);
    merged.change_bytes.back() =
        add_bytes(merged.change_bytes.back(), static_cast<uint64_t>(unlisted.change_bytes[k]));
    merged.change_count.back() += unlisted.change_count[k];
  }
  unlisted = std::move(merged);
}

LiveMoments live_moments(const Lifetimes& life, size_t source_count, uint64_t duration_us) {
  // Live at t: start <= t < end (what the page's scan and replay-to-time
  // count). One sweep: allocations in start order come in, in end order go
  // out; one that ends no later than it starts is never live.
  std::vector<uint32_t> by_start;
  std::vector<uint32_t> by_end;
  for (uint32_t i = 0; i < life.start_us.size(); ++i) {
    if (life.end_us[i] <= life.start_us[i]) continue;
    by_start.push_back(i);
    if (life.end_us[i] != Lifetimes::kStillLive) by_end.push_back(i);
  }
  const auto start_before = [&life](uint32_t a, uint32_t b) {
    return life.start_us[a] < life.start_us[b];
  };
  if (!std::is_sorted(by_start.begin(), by_start.end(), start_before)) {
    std::stable_sort(by_start.begin(), by_start.end(), start_before);
  }
  std::sort(by_end.begin(), by_end.end(),
            [&life](uint32_t a, uint32_t b) { return life.end_us[a] < life.end_us[b]; });
  for (uint64_t moments = kMaxLiveMoments;; moments /= 2) {
    LiveMoments out;
    std::vector<uint64_t> bytes(source_count + 1);
    std::vector<uint64_t> count(source_count + 1);
    size_t in = 0;
    size_t gone = 0;
    bool over_budget = false;
    const uint64_t steps = std::max<uint64_t>(moments - 1, 1);
    for (uint64_t k = 0; k <= steps && !over_budget; ++k) {
      const uint64_t t = static_cast<uint64_t>(std::llround(
          static_cast<double>(duration_us) * static_cast<double>(k) / static_cast<double>(steps)));
      if (!out.time_us.empty() && t == out.time_us.back()) continue;
      for (; in < by_start.size() && life.start_us[by_start[in]] <= t; ++in) {
        const uint32_t i = by_start[in];
        const size_t s = std::min<size_t>(life.source[i], source_count);
        bytes[s] += life.size[i];
        ++count[s];
      }
      for (; gone < by_end.size() && life.end_us[by_end[gone]] <= t; ++gone) {
        const uint32_t i = by_end[gone];
        const size_t s = std::min<size_t>(life.source[i], source_count);
        bytes[s] -= life.size[i];
        --count[s];
      }
      out.time_us.push_back(t);
      out.row_begin.push_back(out.source.size());
      for (size_t s = 0; s <= source_count; ++s) {
        if (count[s] == 0) continue;
        out.source.push_back(static_cast<uint32_t>(s));
        out.bytes.push_back(bytes[s]);
        out.count.push_back(count[s]);
      }
      over_budget = out.source.size() > kMaxLiveMomentRows;
    }
    if (over_budget && moments > 2) continue;
    out.row_begin.push_back(out.source.size());
    return out;
  }
}

RunTimeline build_timeline(const FileAnalysis& file, const std::string& label, double precision_ms,
                           const SourceKeyOptions& key_options, uint64_t max_lifetimes) {
  const Snapshot& snapshot = file.snapshot();
  const EventColumns& events = snapshot.events;
  const DeviceTrace& trace = file.trace();
  RunTimeline run = timeline_of(file, label);
  const int64_t t0 = file.time().start_us();

  // One replay pass: delta after each delta-changing event, lifetimes.
  std::vector<double> time_positions;
  std::vector<double> index_positions;
  std::vector<double> values;
  TimelineObserver observer(snapshot, key_options, run.lifetimes, trace.begin);
  Replay replay(snapshot);
  auto offset_of = [&](uint64_t i) { return events.time_us[i] != 0 ? events.time_us[i] - t0 : 0; };
  for (uint64_t i = trace.begin; i < trace.end; ++i) {
    int64_t t = offset_of(i);
    observer.offset_us = static_cast<uint64_t>(std::max<int64_t>(t, 0));
    replay.apply(i, observer);
    Action action = events.action[i];
    if (action != Action::kAlloc && action != Action::kFreeCompleted) continue;
    time_positions.push_back(static_cast<double>(t));
    index_positions.push_back(static_cast<double>(i - trace.begin));
    values.push_back(static_cast<double>(replay.delta()));
  }
  SourceIndex& sources = observer.sources;
  // Memory from before the trace, named where its blocks and unmatched frees
  // carry frames: its sources count towards the layers the view keeps.
  NamedBaseline baseline;
  baseline.by_source = baseline_sources(snapshot, file.baseline_pieces(), sources);
  SourceKeyOptions by_category = key_options;
  by_category.group = GroupBy::kCategory;
  SourceIndex categories(snapshot, by_category);
  baseline.by_category = baseline_sources(snapshot, file.baseline_pieces(), categories);
  for (size_t c = 0; c < categories.size(); ++c)
    baseline.category_names.push_back(categories.name(static_cast<uint32_t>(c)));
  std::vector<int64_t>& source_most = observer.source_most;
  if (baseline.by_source.known) {
    source_most.resize(std::max(source_most.size(), baseline.by_source.bytes.size()), 0);
    for (size_t s = 0; s < baseline.by_source.bytes.size(); ++s) {
      source_most[s] = add_bytes(source_most[s], baseline.by_source.bytes[s]);
    }
  }
  run.sources.reserve(sources.size());
  for (size_t s = 0; s < sources.size(); ++s)
    run.sources.push_back(sources.name(static_cast<uint32_t>(s)));

  if (run.has_time) {
    run.time_buckets = bucketize(time_positions, values, run.duration_s * 1e6,
                                 std::max(precision_ms, 0.001) * 1000.0, kMaxTimeBuckets);
  }
  // Whole events per bucket, so the page can label buckets by event index.
  double events_per_bucket = std::max(
      1.0, std::ceil(static_cast<double>(trace.count()) / static_cast<double>(kMaxIndexBuckets)));
  run.index_buckets = bucketize(index_positions, values, static_cast<double>(trace.count()),
                                events_per_bucket, kMaxIndexBuckets);

  add_stacked_views(run, snapshot, trace, key_options, source_most, baseline, offset_of);
  run.unlisted = unlisted_memory(file, baseline.by_source, sources, observer.replaced, offset_of);
  // The page's size grows with the lifetimes and the changes of the rest:
  // past the budget both go, for moments and the changes merged at them.
  if (run.has_time &&
      run.lifetimes.start_us.size() + run.unlisted.change_us.size() > max_lifetimes) {
    run.moments = live_moments(run.lifetimes, run.sources.size(),
                               static_cast<uint64_t>(std::llround(run.duration_s * 1e6)));
    run.moments->allocations = run.lifetimes.start_us.size();
    run.lifetimes = Lifetimes{};  // the page does not get them: their memory goes now
    merge_changes_at_moments(run.unlisted, run.moments->time_us);
  }

  add_reserved_line(file, offset_of, run);
  add_markers(file, t0, run);
  return run;
}

uint64_t allocator_budget(PagePlace place) {
  if (place.ordinal >= kAllocatorPanelRuns) return 0;
  return kAllocatorPageBytes / std::clamp<size_t>(place.runs, 1, kAllocatorPanelRuns);
}

void add_page_panels(const FileAnalysis& file, const SourceKeyOptions& key_options,
                     RunTimeline& run, PagePlace place) {
  file.start_allocator_history();
  for (size_t k = 1; k <= std::min(run.ooms.size(), kMaxOomPanels); ++k) {
    run.oom_analyses.push_back(
        analyze_oom(file, OomOptions{static_cast<int>(k), 1.0, 0, key_options}));
  }
  // The allocator panel's moments: even ones, the reserved peak, the OOMs.
  std::vector<double> moments;
  if (const std::optional<double> peak = file.seconds_at(file.reserved().peak_event)) {
    moments.push_back(*peak);
  }
  for (const OomMarker& oom : run.ooms) moments.push_back(oom.t_s);
  run.allocator = allocator_moments(file, moments, allocator_budget(place));
  if (place.max_entries > 0 && file.trace().count() > 0) {
    run.allocations = page_allocations(file, place.max_entries, key_options);
  }
}

PageAllocations page_allocations(const FileAnalysis& file, uint64_t max_entries,
                                 const SourceKeyOptions& key_options) {
  PageAllocations out;
  const auto count = static_cast<double>(file.trace().count());
  out.by_event = allocation_layout(
      file, LineWindow{LineAxis::kEvent, 0, count, kPageAllocationColumns},
      static_cast<size_t>(std::min<uint64_t>(max_entries, kMaxLayoutBudget)), "", key_options);
  std::vector<const AllocationSpan*> chosen;
  chosen.reserve(out.by_event.drawn.size());
  for (const DrawnAllocation& drawn : out.by_event.drawn) chosen.push_back(drawn.span);
  const double duration = file.time().duration_s();
  if (file.time().timed() && duration > 0) {
    out.by_time =
        layout_of_chosen(file, LineWindow{LineAxis::kTime, 0, duration, kPageAllocationColumns},
                         chosen, key_options);
  }
  // Stacks and frames once each, in the order the allocations first use them.
  const Snapshot& snapshot = file.snapshot();
  SourceKeys frame_keys(snapshot, key_options);
  absl::flat_hash_map<uint32_t, uint32_t> stack_index;
  absl::flat_hash_map<uint32_t, uint32_t> frame_index;
  for (const DrawnAllocation& drawn : out.by_event.drawn) {
    if (!drawn.stack.valid()) {
      out.stack_of.push_back(-1);
      continue;
    }
    const auto [at, added] =
        stack_index.try_emplace(drawn.stack.value, static_cast<uint32_t>(out.stacks.size()));
    if (added) {
      std::vector<uint32_t> frames;
      for (const FrameId id : snapshot.stacks.get(drawn.stack)) {
        const auto [f, new_frame] =
            frame_index.try_emplace(id.value, static_cast<uint32_t>(out.frames.size()));
        if (new_frame) {
          const Frame& frame = snapshot.frames.get(id);
          out.frames.push_back({snapshot.strings.get(frame.name),
                                snapshot.strings.get(frame.filename), frame.line,
                                frame_keys.is_users(id)});
        }
        frames.push_back(f->second);
      }
      out.stacks.push_back(std::move(frames));
    }
    out.stack_of.push_back(static_cast<int32_t>(at->second));
  }
  return out;
}

RunTimeline plot_run(const FileAnalysis& file, const std::string& label, double precision_ms,
                     const SourceKeyOptions& key_options, uint64_t max_lifetimes, bool page,
                     PagePlace place, const std::optional<std::string>& whatif) {
  if (page) file.start_allocator_history();
  RunTimeline run = build_timeline(file, label, precision_ms, key_options, max_lifetimes);
  if (page) add_page_panels(file, key_options, run, place);
  if (page && whatif) run.whatif = simulated_reserved_line(file, *whatif, run.duration_s * 1e6);
  return run;
}

}  // namespace memsnap
