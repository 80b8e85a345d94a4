// Hand-made snapshot models for unit tests of the analysis.
#pragma once

#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "memsnap/model.h"

namespace memsnap::testing {

class ModelBuilder {
 public:
  using FrameSpec = std::tuple<std::string, std::string, int64_t>;
  // Frames innermost first: {name, filename, line}.
  StackId stack(std::initializer_list<FrameSpec> frames) {
    return stack(std::vector<FrameSpec>(frames));
  }
  StackId stack(const std::vector<FrameSpec>& frames) {
    std::vector<FrameId> ids;
    for (const auto& [name, filename, line] : frames) {
      ids.push_back(model.frames.intern(
          Frame{model.strings.intern(name), model.strings.intern(filename), line}));
    }
    return model.stacks.intern(ids);
  }

  // Starts the trace of the next device ordinal.
  void device() {
    uint64_t at = model.events.count();
    model.devices.push_back(DeviceTrace{static_cast<int>(model.devices.size()), at, at});
  }

  void event(Action action, uint64_t addr, uint64_t size, int64_t time_us = 0, StackId stack = {}) {
    if (model.devices.empty()) device();
    EventColumns& e = model.events;
    e.action.push_back(action);
    e.addr.push_back(addr);
    e.size.push_back(size);
    e.stream.push_back(0);
    e.time_us.push_back(time_us);
    e.stack.push_back(stack);
    model.devices.back().end = e.count();
  }
  void alloc(uint64_t addr, uint64_t size, int64_t time_us = 0, StackId stack = {}) {
    event(Action::kAlloc, addr, size, time_us, stack);
  }
  // `stack`: the frames the free entries carry (with context="all", the
  // freeing code's).
  void free(uint64_t addr, uint64_t size, int64_t time_us = 0, StackId stack = {}) {
    event(Action::kFreeRequested, addr, size, time_us, stack);
    event(Action::kFreeCompleted, addr, size, time_us, stack);
  }
  void segment(int device, uint64_t total, uint64_t active) {
    Segment s;
    s.device = device;
    s.total_size = total;
    s.allocated_size = active;
    s.active_size = active;
    model.segments.push_back(s);
  }
  void annotation(const std::string& name, Stage stage, int64_t time_us, int device = 0) {
    model.annotations.push_back(Annotation{model.strings.intern(name), stage, device, time_us});
  }

  Snapshot model;
};

struct DumpBlock {
  uint64_t address;
  uint64_t size;
  uint64_t requested;
  BlockState state;
};

constexpr uint64_t kSmallSegment = uint64_t{2} << 20;  // the small pool's segments: 2 MiB

// A segment of the dump with its blocks (free ones included, as PyTorch lists them).
inline void dump_segment(Snapshot& model, uint64_t address, uint64_t total,
                         const std::vector<DumpBlock>& blocks, bool expandable = false,
                         int device = 0) {
  Segment segment;
  segment.device = device;
  segment.address = address;
  segment.total_size = total;
  segment.segment_type = model.strings.intern(total == kSmallSegment ? "small" : "large");
  segment.is_expandable = expandable;
  segment.first_block = static_cast<uint32_t>(model.blocks.size());
  for (const DumpBlock& b : blocks) {
    model.blocks.push_back(Block{b.address, b.size, b.requested, b.state, {}});
    if (b.state != BlockState::kInactive) segment.active_size += b.size;
    if (b.state == BlockState::kActiveAllocated) segment.allocated_size += b.size;
  }
  segment.block_count = static_cast<uint32_t>(blocks.size());
  model.segments.push_back(segment);
}

}  // namespace memsnap::testing
