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

}  // namespace memsnap::testing
