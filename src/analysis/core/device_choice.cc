#include "analysis/core/device_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "memsnap/error.h"

namespace memsnap {

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
  choice.oom_devices = snapshot.devices_with_oom();
  const std::vector<int>& in_use = choice.devices;
  if (requested) {
    bool known = std::find(in_use.begin(), in_use.end(), *requested) != in_use.end() ||
                 snapshot.trace_of(*requested) != nullptr;
    if (!known) {
      throw Error(
          ErrorCode::kUnknownDevice,
          fmt::format("device {} is not in this snapshot (devices with data: {})", *requested,
                      in_use.empty() ? "none" : fmt::format("{}", fmt::join(in_use, ", "))));
    }
    choice.device = *requested;
    choice.reason = DeviceReason::kRequested;
    return choice;
  }
  if (in_use.empty()) return choice;  // device 0, kNoData
  // The rule is the model's (Snapshot::default_device); the reason follows it.
  choice.device = snapshot.default_device();
  const bool any_trace = std::any_of(snapshot.devices.begin(), snapshot.devices.end(),
                                     [](const DeviceTrace& trace) { return trace.count() > 0; });
  choice.reason = !choice.oom_devices.empty() ? DeviceReason::kOutOfMemory
                  : any_trace                 ? DeviceReason::kMostEntries
                                              : DeviceReason::kLargestReserved;
  if (in_use.size() == 1 && in_use.front() == choice.device)
    choice.reason = DeviceReason::kOnlyDevice;
  return choice;
}

}  // namespace memsnap
