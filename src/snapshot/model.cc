#include "memsnap/model.h"

#include <algorithm>
#include <map>
#include <set>

#include <absl/hash/hash.h>
#include <absl/strings/string_view.h>

#include "memsnap/error.h"

namespace memsnap {

StringTable::StringTable() {
  strings_.emplace_back();
}

StringId StringTable::intern(std::string_view text) {
  if (text.empty()) return StringId{0};
  auto found = index_.find(text);
  if (found != index_.end()) return found->second;
  if (strings_.size() >= UINT32_MAX)
    throw Error(ErrorCode::kLimitExceeded, "too many distinct strings");
  StringId id{static_cast<uint32_t>(strings_.size())};
  strings_.emplace_back(text);
  index_.emplace(strings_.back(), id);
  return id;
}

FrameTable::FrameTable() {
  frames_.emplace_back();
}

FrameId FrameTable::intern(const Frame& frame) {
  Key key{frame.name.value, frame.filename.value, frame.line, frame.fx_original_trace.value};
  auto [it, inserted] = index_.try_emplace(key, FrameId{static_cast<uint32_t>(frames_.size())});
  if (inserted) {
    if (frames_.size() >= UINT32_MAX)
      throw Error(ErrorCode::kLimitExceeded, "too many distinct frames");
    frames_.push_back(frame);
  }
  return it->second;
}

StackTable::StackTable() : index_(0, Hash{this}, Eq{this}) {
  offsets_.push_back(0);
}

// The index's hash and equality point at the table, so a move rebuilds it.
StackTable::StackTable(StackTable&& other) noexcept : index_(0, Hash{this}, Eq{this}) {
  *this = std::move(other);
}

StackTable& StackTable::operator=(StackTable&& other) noexcept {
  frames_ = std::move(other.frames_);
  offsets_ = std::move(other.offsets_);
  index_ = absl::flat_hash_set<uint32_t, Hash, Eq>(other.index_.size(), Hash{this}, Eq{this});
  for (uint32_t id = 1; id < offsets_.size(); ++id) index_.insert(id);
  other.offsets_.assign(1, 0);
  other.frames_.clear();
  other.index_.clear();
  return *this;
}

size_t StackTable::Hash::operator()(std::span<const FrameId> frames) const {
  // Hash the ids as one block of bytes: much faster than element by element.
  return absl::Hash<absl::string_view>{}(absl::string_view(
      reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(FrameId)));
}

bool StackTable::Eq::same(std::span<const FrameId> a, std::span<const FrameId> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

StackId StackTable::intern(std::span<const FrameId> frames) {
  if (frames.empty()) return StackId{0};
  auto found = index_.find(frames);
  if (found != index_.end()) return StackId{*found};
  if (offsets_.size() >= UINT32_MAX)
    throw Error(ErrorCode::kLimitExceeded, "too many distinct stacks");
  // Id 0 is "no stack", so stack i lives at offsets_[i-1]..offsets_[i].
  auto id = static_cast<uint32_t>(offsets_.size());
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  offsets_.push_back(frames_.size());
  index_.insert(id);
  return StackId{id};
}

std::span<const FrameId> StackTable::get(StackId id) const {
  if (!id.valid()) return {};
  uint64_t begin = offsets_[id.value - 1];
  uint64_t end = offsets_[id.value];
  return std::span<const FrameId>(frames_).subspan(begin, end - begin);
}

std::string_view action_name(Action action) {
  switch (action) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kSegmentAlloc: return "segment_alloc";
    case Action::kSegmentFree: return "segment_free";
    case Action::kSegmentMap: return "segment_map";
    case Action::kSegmentUnmap: return "segment_unmap";
    case Action::kSnapshot: return "snapshot";
    case Action::kOom: return "oom";
    case Action::kOther: return "other";
  }
  return "other";
}

std::optional<Action> parse_action(std::string_view name) {
  for (int i = 0; i < kActionCount - 1; ++i) {
    auto action = static_cast<Action>(i);
    if (action_name(action) == name) return action;
  }
  return std::nullopt;
}

void EventColumns::reserve(size_t n) {
  action.reserve(n);
  addr.reserve(n);
  size.reserve(n);
  stream.reserve(n);
  time_us.reserve(n);
  stack.reserve(n);
}

std::vector<int> Snapshot::devices_in_use() const {
  std::set<int> in_use;
  for (const DeviceTrace& trace : devices) {
    if (trace.count() > 0) in_use.insert(trace.device);
  }
  for (const Segment& segment : segments) in_use.insert(segment.device);
  return {in_use.begin(), in_use.end()};
}

uint64_t Snapshot::count_of(const DeviceTrace& trace, Action action) const {
  const Action* first = events.action.data() + trace.begin;
  return static_cast<uint64_t>(std::count(first, first + trace.count(), action));
}

std::vector<int> Snapshot::devices_with_oom() const {
  std::vector<int> found;
  for (const DeviceTrace& trace : devices) {
    if (count_of(trace, Action::kOom) != 0) found.push_back(trace.device);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

int Snapshot::default_device() const {
  if (std::vector<int> oom = devices_with_oom(); !oom.empty()) return oom.front();
  // The most trace entries; ties go to the lower ordinal.
  int chosen = 0;
  uint64_t most = 0;
  for (const DeviceTrace& trace : devices) {
    if (trace.count() > most || (trace.count() == most && most > 0 && trace.device < chosen)) {
      most = trace.count();
      chosen = trace.device;
    }
  }
  if (most > 0) return chosen;
  // No trace: the largest reserved; ascending ordinals, so the first of the
  // largest wins a tie.
  std::map<int, uint64_t> reserved;
  for (const Segment& segment : segments) {
    reserved[segment.device] += segment.total_size;  // wraps on hostile sizes
  }
  uint64_t largest = 0;
  chosen = reserved.empty() ? 0 : reserved.begin()->first;
  for (const auto& [device, bytes] : reserved) {
    if (bytes > largest) {
      largest = bytes;
      chosen = device;
    }
  }
  return chosen;
}

const DeviceTrace* Snapshot::trace_of(int device) const {
  for (const DeviceTrace& trace : devices) {
    if (trace.device == device) return &trace;
  }
  return nullptr;
}

std::string_view Snapshot::action_label(uint64_t event_index) const {
  Action action = events.action[event_index];
  if (action == Action::kOther) {
    auto found = events.other_action.find(event_index);
    if (found != events.other_action.end()) return strings.get(found->second);
  }
  return action_name(action);
}

}  // namespace memsnap
