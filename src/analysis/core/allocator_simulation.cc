#include "analysis/core/allocator_simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/allocator_walk.h"
#include "analysis/core/caching_allocator.h"
#include "analysis/core/pytorch_allocator_policy.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

using Parting = SegmentCheck::Parting;

// Addresses for segments the file did not record: above every address a
// 64-bit device pointer takes, so that they never meet a recorded one.
class UnrecordedAddresses {
 public:
  uint64_t next(uint64_t span) {
    const uint64_t step = (span + kAlign - 1) / kAlign * kAlign;
    if (step > UINT64_MAX - next_) {
      throw Error(ErrorCode::kLimitExceeded,
                  "the allocator model ran out of addresses for new segments (a trace "
                  "that reserves more than 2^60 bytes)");
    }
    const uint64_t address = next_;
    next_ += step;
    return address;
  }

 private:
  static constexpr uint64_t kAlign = uint64_t{2} << 20;
  uint64_t next_ = uint64_t{0xF} << 60;
};

// Segments and blocks on one side only (or of another size there).
template <typename Map>
uint64_t differing(const Map& a, const Map& b) {
  uint64_t count = 0;
  for (const auto& [address, value] : a) {
    auto found = b.find(address);
    if (found == b.end() || found->second.size != value.size) ++count;
  }
  for (const auto& [address, value] : b) {
    if (!a.contains(address)) ++count;
  }
  return count;
}

// Whether the device's allocator used expandable segments: the file's
// settings, or for files written before allocator_settings existed, its
// pages (a mapped range in the dump or in the trace).
bool uses_expandable_segments(const FileAnalysis& file) {
  const Snapshot& snapshot = file.snapshot();
  return snapshot.allocator_settings.expandable_segments.value_or(false) ||
         std::any_of(
             snapshot.segments.begin(), snapshot.segments.end(),
             [&](const Segment& s) { return s.device == file.device() && s.is_expandable; }) ||
         snapshot.count_of(file.trace(), Action::kSegmentMap) > 0;
}

}  // namespace

SplitRule file_rule(const FileAnalysis& file, RoundingRule rounding) {
  SplitRule rule = split_rule_from_settings(file.snapshot().allocator_settings);
  rule.rounding = rounding;
  rule.expandable = uses_expandable_segments(file);
  return rule;
}

namespace {

// One walk of the trace with the model beside it: each entry applied to the
// model as the file says it happened, and what the model did compared.
class Checker {
 public:
  Checker(const FileAnalysis& file, const AllocatorHistory& history, RoundingRule rounding)
      : file_(file), events_(file.snapshot().events), model_(settings(history, rounding)) {
    for (const auto& [address, block] : model_.load(history.start())) live_[address] = block;
    out_.peak_reserved_recorded = file.reserved().peak;
    out_.peak_reserved_model = model_.reserved();
  }

  SegmentCheck run() {
    const DeviceTrace& trace = file_.trace();
    for (uint64_t i = trace.begin; i < trace.end; ++i) {
      const uint64_t position = i - trace.begin;
      switch (events_.action[i]) {
        case Action::kSegmentAlloc:
        case Action::kSegmentMap: reserved(i); break;
        case Action::kSegmentFree:
        case Action::kSegmentUnmap: released(i, position); break;
        case Action::kAlloc: allocated(i, position); break;
        case Action::kFreeCompleted: freed(i); break;
        case Action::kOom: unexplained(position); break;
        default: break;
      }
    }
    unexplained(trace.count());
    const AllocatorState end = model_.state();
    const AllocatorState dump = state_at_dump(file_.snapshot(), file_.device());
    out_.end_segments_differing = differing(end.ranges, dump.ranges);
    out_.end_blocks_differing = differing(end.blocks, dump.blocks);
    return std::move(out_);
  }

 private:
  struct Recorded {
    uint64_t address;
    uint64_t size;
    bool used;
  };

  AllocatorModelSettings settings(const AllocatorHistory& history, RoundingRule rounding) {
    out_.file = file_.path();
    out_.device = file_.device();
    out_.possible = true;
    out_.rounding = rounding;
    out_.segments_at_start = history.check().ranges_at_start;
    out_.blocks_at_start = history.check().blocks_at_start;
    out_.inferred_sizes = history.check().inferred_sizes;
    AllocatorModelSettings settings;
    settings.split = file_rule(file_, rounding);
    out_.max_split_size = settings.split.max_split_size;
    out_.expandable = settings.split.expandable;
    return settings;
  }

  void diverge(const SegmentCheck::Divergence& divergence) {
    if (out_.divergences++ == 0) out_.first_divergence = divergence;
  }

  // A segment the file reserved: the model's next request must make it.
  void reserved(uint64_t i) {
    ++out_.recorded_reserves;
    pending_.push_back({events_.addr[i], events_.size[i], false});
  }

  // A segment the file released (empty_cache, or before a retry): followed.
  void released(uint64_t i, uint64_t position) {
    ++out_.recorded_releases;
    made_.clear();
    const bool followed = events_.action[i] == Action::kSegmentFree
                              ? model_.release_segment(events_.addr[i], made_)
                              : model_.unmap_range(events_.addr[i], events_.size[i], made_);
    if (followed) {
      ++out_.followed_releases;
    } else {
      diverge({.parting = Parting::kRelease,
               .position = position,
               .size = events_.size[i],
               .file_address = events_.addr[i]});
    }
  }

  // Segments the file reserved since the last request that the model did not.
  void unexplained(uint64_t position) {
    for (const Recorded& r : pending_) {
      if (!r.used) {
        diverge({.parting = Parting::kFileReserves,
                 .position = position,
                 .size = r.size,
                 .file_address = r.address});
      }
    }
    pending_.clear();
  }

  // The model's segment events for a request against the file's.
  void compare_reserves(uint64_t i, uint64_t position) {
    for (const ModelSegmentEvent& event : made_) {
      if (!event.reserved) continue;
      ++out_.model_reserves;
      auto recorded = std::find_if(pending_.begin(), pending_.end(), [&](const Recorded& r) {
        return !r.used && r.address == event.address && r.size == event.size;
      });
      if (recorded != pending_.end()) {
        recorded->used = true;
        ++out_.matched_reserves;
      } else {
        diverge({.parting = Parting::kModelReserves,
                 .position = position,
                 .size = event.size,
                 .request = events_.size[i]});
      }
    }
    unexplained(position);
  }

  void allocated(uint64_t i, uint64_t position) {
    ++out_.allocs;
    made_.clear();
    // A new segment takes the address of a segment the file reserved for
    // this request with the same size.
    const auto address_of = [&](uint64_t size, uint64_t span) {
      for (const Recorded& r : pending_) {
        if (!r.used && r.size == size) return r.address;
      }
      return unrecorded_.next(span);
    };
    const uint64_t stream = events_.stream[i];
    const PoolId pool = allocator_walk::entry_pool(file_.snapshot(), i);
    std::optional<ModelBlockId> block =
        model_.malloc(events_.size[i], stream, pool, address_of, made_);
    compare_reserves(i, position);
    out_.peak_reserved_model = std::max(out_.peak_reserved_model, model_.reserved());
    if (!block) return;  // no capacity limit in the check: never
    if (model_.address_of(*block) == events_.addr[i]) {
      ++out_.allocs_at_recorded_address;
    } else {
      diverge({.parting = Parting::kAddress,
               .position = position,
               .size = events_.size[i],
               .file_address = events_.addr[i],
               .model_address = model_.address_of(*block)});
      // Follow the file where it can, so that one placement the model got
      // otherwise (from a state before the trace that was inferred, say)
      // does not part everything after it.
      if (made_.empty()) {
        model_.free(*block);
        block = model_.take_at(events_.addr[i], events_.size[i], stream, pool);
        if (block) {
          ++out_.followed_placements;
        } else {
          block = model_.malloc(events_.size[i], stream, pool, address_of, made_);
        }
      }
    }
    if (!block) return;
    live_.insert_or_assign(events_.addr[i], *block);  // a reused live address loses the old one
  }

  void freed(uint64_t i) {
    auto found = live_.find(events_.addr[i]);
    if (found == live_.end()) {
      ++out_.unknown_frees;
      return;
    }
    model_.free(found->second);
    live_.erase(found);
  }

  const FileAnalysis& file_;
  const EventColumns& events_;
  SegmentCheck out_;
  AllocatorModel model_;
  absl::flat_hash_map<uint64_t, ModelBlockId> live_;  // trace address -> the model's block
  std::vector<Recorded> pending_;  // segments the file reserved since the last request
  std::vector<ModelSegmentEvent> made_;
  UnrecordedAddresses unrecorded_;
};

}  // namespace

const AllocatorHistory* usable_history(const FileAnalysis& file, std::string& why_not) {
  const AllocatorHistory* history = file.allocator_history();
  if (history == nullptr) {
    why_not = "the file has no trace for this device";
    return nullptr;
  }
  if (!history->check().possible) {
    why_not = history->check().impossible_reason;
    return nullptr;
  }
  return history;
}

SegmentCheck check_recorded_segments(const FileAnalysis& file) {
  std::string why_not;
  const AllocatorHistory* history = usable_history(file, why_not);
  if (history == nullptr) {
    SegmentCheck out;
    out.file = file.path();
    out.device = file.device();
    out.entries = file.trace().count();
    out.impossible_reason = std::move(why_not);
    return out;
  }
  // The rounding the history found first; when the model parts from the
  // file under it, the other one too (torch_npu's allocator pads each
  // request by 32 bytes, which a dump does not always show), keeping the
  // closer.
  SegmentCheck found = Checker(file, *history, history->check().rounding).run();
  found.entries = file.trace().count();
  if (found.divergences == 0) return found;
  const RoundingRule other =
      history->check().rounding == RoundingRule::kCuda ? RoundingRule::kNpu : RoundingRule::kCuda;
  SegmentCheck second = Checker(file, *history, other).run();
  second.entries = found.entries;
  return second.divergences < found.divergences ? second : found;
}

StartFrom start_from(const SegmentCheck& check) {
  return check.segment_events() == 0 && check.segments_at_start > 0 ? StartFrom::kFreshSegments
                                                                    : StartFrom::kRecordedSegments;
}

namespace {

// The trace through the model under some settings within a capacity: the
// program's requests and frees, and the file's releases (see released());
// the allocator's other choices (segments, releases before a retry within
// the capacity) the model's.
class Simulation {
 public:
  // `start`: the recorded segments as they were at the first entry, or
  // (StartFrom::kFreshSegments) an empty allocator that serves the blocks
  // live then under these settings, in address order, before the trace runs.
  Simulation(const FileAnalysis& file, const AllocatorHistory& history,
             const WhatIfSettings& settings, uint64_t capacity, StartFrom start,
             uint64_t column_width)
      : file_(file),
        events_(file.snapshot().events),
        model_({.split = settings.split,
                .capacity = capacity,
                .gc_threshold = settings.gc_threshold}) {
    out_.settings = settings;
    column_width_ = column_width;
    const AllocatorState& at_start = history.start();
    if (start == StartFrom::kRecordedSegments) {
      for (const auto& [address, block] : model_.load(at_start)) live_[address] = block;
    } else {
      serve_live_at_start(at_start);
    }
    for (const auto& [address, block] : at_start.blocks) {
      const uint64_t rounded = pytorch::live_request_bytes(block.requested);
      requested_[address] = rounded;
      live_requested_ += rounded;
    }
    floor_ = live_requested_;
    observe();
  }

  // Reserved memory over the trace's wall clock and over its entries into
  // these as run() goes (the plot's simulated line), from the state at the
  // start.
  void draw(BoundedStepSeries& by_time, BoundedStepSeries& by_entry) {
    by_time_ = &by_time;
    by_entry_ = &by_entry;
    line_bytes_ = model_.reserved();
    by_time.add(0, line_bytes_);
    by_entry.add(0, line_bytes_);
  }

  WhatIfRun run(uint64_t* floor) {
    const DeviceTrace& trace = file_.trace();
    const int64_t t0 = file_.time().start_us();
    bool in_burst = false;
    for (uint64_t i = trace.begin; i < trace.end; ++i) {
      const Action action = events_.action[i];
      const bool release = action == Action::kSegmentFree || action == Action::kSegmentUnmap;
      if (release) released(i, in_burst);
      in_burst = release;
      if (action == Action::kSegmentAlloc || action == Action::kSegmentMap) {
        pending_.emplace_back(events_.addr[i], events_.size[i]);
      }
      if (action == Action::kAlloc) allocated(i);
      if (action == Action::kFreeCompleted) freed(i);
      if (action == Action::kOom) out_of_memory(i);
      if (column_width_ != 0) {
        const uint64_t column = (i - trace.begin) / column_width_;
        if (column >= out_.timeline.size()) out_.timeline.resize(column + 1, 0);
        out_.timeline[column] = std::max(out_.timeline[column], model_.reserved());
      }
      if (by_time_ != nullptr && model_.reserved() != line_bytes_) {
        line_bytes_ = model_.reserved();
        // As the recorded line: an entry without a time at the start.
        const int64_t time = events_.time_us[i];
        by_time_->add(time != 0 ? std::max<int64_t>(time - t0, 0) : 0, line_bytes_);
        by_entry_->add(static_cast<int64_t>(i - trace.begin), line_bytes_);
      }
    }
    if (by_time_ != nullptr) {
      by_time_->finish();
      by_entry_->finish();
    }
    if (floor != nullptr) *floor = floor_;
    return std::move(out_);
  }

 private:
  void observe() {
    if (model_.reserved() > out_.peak_reserved) {
      out_.peak_reserved = model_.reserved();
      out_.allocated_at_peak = model_.allocated();
    }
  }

  // Each block live at the first entry, served by an empty allocator under
  // the run's settings on its segment's stream and pool. The segments this
  // makes are the start, not the trace's cudaMalloc calls: not counted.
  void serve_live_at_start(const AllocatorState& at_start) {
    for (const auto& [address, block] : at_start.blocks) {
      const auto range = at_start.range_at(address);
      const bool known = range != at_start.ranges.end();
      made_.clear();
      const std::optional<ModelBlockId> served = model_.malloc(
          block.requested != 0 ? block.requested : block.size, known ? range->second.stream : 0,
          known ? range->second.pool : PoolId{},
          [this](uint64_t /*size*/, uint64_t span) { return addresses_.next(span); }, made_);
      if (!served) {
        // Not even what was live before the trace fits the capacity.
        if (out_.model_ooms++ == 0) out_.first_model_oom = 0;
        continue;
      }
      live_[address] = *served;
    }
    made_.clear();
  }

  // The segments the model just reserved and released, counted.
  void count() {
    for (const ModelSegmentEvent& event : made_) (event.reserved ? out_.reserves : out_.releases)++;
    observe();
  }

  // The file released a segment (torch.cuda.empty_cache(), or the allocator
  // before a retried cudaMalloc). Where the model holds that segment cached
  // whole (under the file's own settings, always: the check), it releases
  // it; a burst of releases it cannot follow is taken as empty_cache, which
  // releases what the model holds cached whole (under other settings a
  // retry's release may not have been needed: it costs the model cudaMalloc
  // calls later, never memory).
  void released(uint64_t i, bool in_burst) {
    made_.clear();
    const bool followed = events_.action[i] == Action::kSegmentFree
                              ? model_.release_segment(events_.addr[i], made_)
                              : model_.unmap_range(events_.addr[i], events_.size[i], made_);
    if (!followed && !in_burst) model_.empty_cache(made_);
    count();
  }

  std::optional<ModelBlockId> request(uint64_t i, uint64_t size) {
    made_.clear();
    // A new segment of the size the file reserved for this request takes
    // its address (the file's own settings then place as the file did);
    // others go where no recorded segment is.
    const auto address_of = [&](uint64_t bytes, uint64_t span) {
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->second == bytes) {
          const uint64_t address = it->first;
          pending_.erase(it);
          return address;
        }
      }
      return addresses_.next(span);
    };
    std::optional<ModelBlockId> block =
        model_.malloc(size, events_.stream[i], allocator_walk::entry_pool(file_.snapshot(), i),
                      address_of, made_);
    pending_.clear();
    count();
    return block;
  }

  // The program's request: counted live as the trace says (the floor),
  // served by the model if it can be.
  void allocated(uint64_t i) {
    const uint64_t address = events_.addr[i];
    const uint64_t rounded = pytorch::live_request_bytes(events_.size[i]);
    if (auto old = requested_.find(address); old != requested_.end()) {
      live_requested_ -= std::min(live_requested_, old->second);  // the file reused the address
    }
    requested_[address] = rounded;
    live_requested_ += rounded;
    floor_ = std::max(floor_, live_requested_);
    const std::optional<ModelBlockId> block = request(i, events_.size[i]);
    if (!block) {
      if (out_.model_ooms++ == 0) out_.first_model_oom = i - file_.trace().begin;
      live_.erase(address);
      return;
    }
    live_.insert_or_assign(address, *block);
  }

  void freed(uint64_t i) {
    const uint64_t address = events_.addr[i];
    if (auto size = requested_.find(address); size != requested_.end()) {
      live_requested_ -= std::min(live_requested_, size->second);
      requested_.erase(size);
    }
    auto found = live_.find(address);
    if (found == live_.end()) return;  // the model could not serve it
    model_.free(found->second);
    live_.erase(found);
  }

  // The file ran out of memory here: would the request have fit? Served and
  // given back at once (the program did not get it).
  void out_of_memory(uint64_t i) {
    ++out_.oom_requests;
    const bool first = !out_.reserved_at_oom;
    if (first) {
      out_.reserved_at_oom = model_.reserved();
      out_.live_at_oom = live_requested_;
    }
    const std::optional<ModelBlockId> block = request(i, events_.size[i]);
    if (first) {
      out_.first_oom_fit = block.has_value() && !out_.first_model_oom;
      out_.peak_reserved_to_oom = out_.peak_reserved;
    }
    if (block) {
      ++out_.oom_requests_fit;
      model_.free(*block);
    }
  }

  const FileAnalysis& file_;
  const EventColumns& events_;
  AllocatorModel model_;
  WhatIfRun out_;
  absl::flat_hash_map<uint64_t, ModelBlockId> live_;
  absl::flat_hash_map<uint64_t, uint64_t> requested_;  // trace address -> rounded request
  std::vector<ModelSegmentEvent> made_;
  UnrecordedAddresses addresses_;
  std::vector<std::pair<uint64_t, uint64_t>> pending_;  // segments the file reserved: address, size
  uint64_t live_requested_ = 0;
  uint64_t floor_ = 0;
  uint64_t column_width_ = 0;  // entries per timeline column; 0: no timeline
  BoundedStepSeries* by_time_ = nullptr;
  BoundedStepSeries* by_entry_ = nullptr;
  uint64_t line_bytes_ = 0;  // the lines' last point
};

}  // namespace

WhatIfRun simulate(const FileAnalysis& file, const AllocatorHistory& history,
                   const WhatIfSettings& settings, uint64_t capacity, StartFrom start,
                   const SimulationOptions& options, uint64_t* floor) {
  Simulation simulation(file, history, settings, capacity, start, options.column_width);
  if (options.by_time != nullptr && options.by_entry != nullptr) {
    simulation.draw(*options.by_time, *options.by_entry);
  }
  return simulation.run(floor);
}

uint64_t least_capacity(const FileAnalysis& file, const AllocatorHistory& history,
                        const WhatIfSettings& settings, StartFrom start, uint64_t low,
                        uint64_t high) {
  const auto fits = [&](uint64_t bytes) {
    return simulate(file, history, settings, bytes, start).fits();
  };
  while (high > low && high - low > std::max(uint64_t{2} << 20, high / 200)) {
    const uint64_t middle = low + (high - low) / 2;
    (fits(middle) ? high : low) = middle;
  }
  return round_capacity(high);
}

uint64_t round_capacity(uint64_t bytes) {
  const uint64_t step =
      std::max(uint64_t{2} << 20, std::bit_floor(std::max<uint64_t>(bytes, 1)) / 256);
  return (bytes + step - 1) / step * step;
}

namespace {

// Why `text` is no whole number of `key` at most `most` (`most_text` names
// it), or empty with `value` set: digits that no uint64 holds are past that
// bound too, not "no whole number".
std::string whole_problem(std::string_view key, std::string_view text, uint64_t most,
                          std::string_view most_text, uint64_t& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool digits = end == text.data() + text.size();
  if ((error == std::errc::result_out_of_range && digits) ||
      (error == std::errc() && digits && value > most)) {
    return fmt::format("{} must be at most {}, not {}", key, most_text, text);
  }
  if (error != std::errc() || !digits) return fmt::format("'{}' is no whole number", text);
  return {};
}

// Why `text` is no garbage_collection_threshold (a fraction strictly between
// 0 and 1, each bound named when passed), or empty with `threshold` set.
std::string threshold_problem(std::string_view text, double& threshold) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), threshold);
  if (error != std::errc() || end != text.data() + text.size()) {
    return fmt::format("garbage_collection_threshold is a number between 0 and 1, not '{}'", text);
  }
  if (!(threshold > 0)) {
    return fmt::format(
        "garbage_collection_threshold must be more than 0 (a fraction between 0 and 1), not {}",
        text);
  }
  if (!(threshold < 1)) {
    return fmt::format(
        "garbage_collection_threshold must be less than 1 (a fraction between 0 and 1), not {}",
        text);
  }
  return {};
}

}  // namespace

WhatIfSettings settings_of_conf(std::string_view conf, const SplitRule& own) {
  WhatIfSettings out{std::string(conf), own, 0};
  const auto refuse = [&](std::string_view why) {
    throw Error(ErrorCode::kBadParameter, fmt::format("allocator settings '{}': {}", conf, why));
  };
  // key:value pairs split at commas outside brackets.
  std::vector<std::string_view> pairs;
  size_t depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= conf.size(); ++i) {
    if (i < conf.size() && conf[i] == '[') ++depth;
    if (i < conf.size() && conf[i] == ']' && depth > 0) --depth;
    if (i == conf.size() || (conf[i] == ',' && depth == 0)) {
      if (i > start) pairs.push_back(conf.substr(start, i - start));
      start = i + 1;
    }
  }
  if (pairs.empty())
    refuse("no setting (write them as PYTORCH_CUDA_ALLOC_CONF does: key:value,...)");
  const auto whole = [&](std::string_view key, std::string_view text, uint64_t most,
                         std::string_view most_text) {
    uint64_t value = 0;
    if (std::string why = whole_problem(key, text, most, most_text, value); !why.empty()) {
      refuse(why);
    }
    return value;
  };
  for (std::string_view pair : pairs) {
    const size_t colon = pair.find(':');
    if (colon == std::string_view::npos) refuse(fmt::format("'{}' has no ':'", pair));
    const std::string_view key = pair.substr(0, colon);
    const std::string_view value = pair.substr(colon + 1);
    if (key == "expandable_segments") {
      if (value != "True" && value != "False") refuse("expandable_segments is True or False");
      out.split.expandable = value == "True";
    } else if (key == "max_split_size_mb") {
      const uint64_t mib = whole(key, value, uint64_t{1} << 40, "1099511627776 (1 EiB in MiB)");
      if (mib <= 20) refuse(fmt::format("max_split_size_mb must be more than 20, not {}", mib));
      out.split.max_split_size = mib << 20;
    } else if (key == "garbage_collection_threshold") {
      double threshold = 0;
      if (std::string why = threshold_problem(value, threshold); !why.empty()) refuse(why);
      out.gc_threshold = threshold;
    } else if (key == "roundup_power2_divisions") {
      if (!value.empty() && value.front() == '[') {
        refuse("roundup_power2_divisions per size ([256:1,...]) is not read here; give one number");
      }
      const uint64_t divisions = whole(key, value, uint64_t{1} << 63,
                                       "9223372036854775808 (2^63, the largest power of two)");
      if (divisions > 1 && !std::has_single_bit(divisions)) {
        refuse("roundup_power2_divisions must be a power of two");
      }
      out.split.power2_divisions.fill(divisions);
    } else {
      refuse(
          fmt::format("the model knows expandable_segments, max_split_size_mb, "
                      "garbage_collection_threshold and roundup_power2_divisions, not '{}'",
                      key));
    }
  }
  return out;
}

}  // namespace memsnap
