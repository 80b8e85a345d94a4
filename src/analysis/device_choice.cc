#include "analysis/device_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "memsnap/error.h"

namespace memsnap {

std::vector<int> devices_with_oom(const Snapshot& snapshot) {
  std::vector<int> devices;
  for (const DeviceTrace& trace : snapshot.devices) {
    const auto* first = snapshot.events.action.data() + trace.begin;
    if (std::find(first, first + trace.count(), Action::kOom) != first + trace.count()) {
      devices.push_back(trace.device);
    }
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return devices;
}

std::string_view device_reason_text(DeviceReason reason) {
  switch (reason) {
    case DeviceReason::kRequested: return "chosen with --device";
    case DeviceReason::kOnlyDevice: return "the only device with data";
    case DeviceReason::kOutOfMemory: return "it ran out of memory";
    case DeviceReason::kMostEntries: return "no OOM; it has the most trace entries";
    case DeviceReason::kLargestReserved: return "no trace; it reserves the most memory";
    case DeviceReason::kNoData: return "the file holds no data on any device";
  }
  return "";
}

DeviceChoice choose_device(const Snapshot& snapshot, std::optional<int> requested) {
  DeviceChoice choice;
  choice.devices = snapshot.devices_in_use();
  choice.oom_devices = devices_with_oom(snapshot);
  const std::vector<int>& in_use = choice.devices;
  if (requested) {
    bool known = std::find(in_use.begin(), in_use.end(), *requested) != in_use.end() ||
                 snapshot.trace_of(*requested) != nullptr;
    if (!known) {
      throw Error(
          fmt::format("device {} is not in this snapshot (devices with data: {})", *requested,
                      in_use.empty() ? "none" : fmt::format("{}", fmt::join(in_use, ", "))));
    }
    choice.device = *requested;
    choice.reason = DeviceReason::kRequested;
    return choice;
  }
  if (in_use.empty()) return choice;  // device 0, kNoData
  if (!choice.oom_devices.empty()) {
    choice.device = choice.oom_devices.front();
    choice.reason = DeviceReason::kOutOfMemory;
  } else {
    // Most trace entries; ties go to the lower ordinal.
    uint64_t most = 0;
    for (const DeviceTrace& trace : snapshot.devices) {
      if (trace.count() > most ||
          (trace.count() == most && most > 0 && trace.device < choice.device)) {
        most = trace.count();
        choice.device = trace.device;
        choice.reason = DeviceReason::kMostEntries;
      }
    }
    if (most == 0) {
      std::map<int, uint64_t> reserved;
      for (const Segment& segment : snapshot.segments) {
        reserved[segment.device] += segment.total_size;  // wraps on hostile sizes
      }
      // Ascending ordinals: the first of the largest wins a tie.
      uint64_t largest = 0;
      choice.device = in_use.front();
      for (const auto& [device, bytes] : reserved) {
        if (bytes > largest) {
          largest = bytes;
          choice.device = device;
        }
      }
      choice.reason = DeviceReason::kLargestReserved;
    }
  }
  if (in_use.size() == 1 && in_use.front() == choice.device)
    choice.reason = DeviceReason::kOnlyDevice;
  return choice;
}

}  // namespace memsnap
