// Which device a report is about, and why: the one rule every command
// follows when --device is not given.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

// Why a report reads the device it reads. Without --device every command
// follows the same rule (choose_device): the device with an oom entry, else
// the one with the most trace entries, else the one that reserved the most.
enum class DeviceReason : uint8_t {
  kRequested,        // --device
  kOnlyDevice,       // the file has data on one device only
  kOutOfMemory,      // the first device whose trace has an oom entry
  kMostEntries,      // no OOM: the device with the most trace entries
  kLargestReserved,  // no trace: the device whose segments reserve the most
  kNoData,           // nothing on any device: device 0
};
std::string_view device_reason_text(DeviceReason reason);

struct DeviceChoice {
  int device = 0;
  DeviceReason reason = DeviceReason::kNoData;
  std::vector<int> devices;      // every device with data (trace entries or segments), ascending
  std::vector<int> oom_devices;  // devices whose trace has an oom entry, ascending
  // The file has data on a device the report does not show.
  [[nodiscard]] bool others() const {
    return devices.size() > 1 || (devices.size() == 1 && devices.front() != device);
  }
};

// Resolves --device against the snapshot, or applies the default rule; throws
// a clear Error listing the devices in use when the ordinal is absent.
DeviceChoice choose_device(const Snapshot& snapshot, std::optional<int> requested);

}  // namespace memsnap
