// The default device: the one rule every command follows without --device.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "analysis/core/device_choice.h"
#include "expect_error.h"
#include "memsnap/error.h"
#include "memsnap/model.h"

namespace memsnap {
namespace {

// A snapshot whose device d has counts[d] trace entries (allocs, or an oom
// as the last entry where oom[d]) and one segment of reserved[d] bytes.
Snapshot make(const std::vector<uint64_t>& counts, const std::vector<bool>& oom,
              const std::vector<uint64_t>& reserved) {
  Snapshot s;
  for (size_t d = 0; d < counts.size(); ++d) {
    const uint64_t begin = s.events.count();
    for (uint64_t i = 0; i < counts[d]; ++i) {
      const bool last = i + 1 == counts[d];
      s.events.action.push_back(last && oom[d] ? Action::kOom : Action::kAlloc);
    }
    s.devices.push_back(DeviceTrace{static_cast<int>(d), begin, s.events.count()});
  }
  for (size_t d = 0; d < reserved.size(); ++d) {
    if (reserved[d] == 0) continue;
    Segment segment;
    segment.device = static_cast<int>(d);
    segment.total_size = reserved[d];
    s.segments.push_back(segment);
  }
  return s;
}

TEST(DeviceChoice, TheDeviceThatRanOutOfMemoryComesFirst) {
  const Snapshot s = make({100, 5, 50}, {false, true, false}, {8, 80, 20});
  const DeviceChoice choice = choose_device(s, std::nullopt);
  EXPECT_EQ(choice.device, 1);
  EXPECT_EQ(choice.reason, DeviceReason::kOutOfMemory);
  EXPECT_EQ(choice.devices, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(choice.oom_devices, (std::vector<int>{1}));
  EXPECT_TRUE(choice.others());
}

TEST(DeviceChoice, WithoutAnOomTheMostTraceEntries) {
  const Snapshot s = make({3, 7, 7}, {false, false, false}, {90, 1, 1});
  const DeviceChoice choice = choose_device(s, std::nullopt);
  EXPECT_EQ(choice.device, 1);  // ties go to the lower ordinal
  EXPECT_EQ(choice.reason, DeviceReason::kMostEntries);
}

TEST(DeviceChoice, WithoutATraceTheLargestReserved) {
  const Snapshot s = make({0, 0, 0}, {false, false, false}, {5, 0, 9});
  const DeviceChoice choice = choose_device(s, std::nullopt);
  EXPECT_EQ(choice.device, 2);
  EXPECT_EQ(choice.reason, DeviceReason::kLargestReserved);
  EXPECT_EQ(choice.devices, (std::vector<int>{0, 2}));
}

TEST(DeviceChoice, OneDeviceIsTheOnlyOneAndNothingIsNoted) {
  const Snapshot s = make({4}, {false}, {10});
  const DeviceChoice choice = choose_device(s, std::nullopt);
  EXPECT_EQ(choice.device, 0);
  EXPECT_EQ(choice.reason, DeviceReason::kOnlyDevice);
  EXPECT_FALSE(choice.others());
  const DeviceChoice empty = choose_device(Snapshot{}, std::nullopt);
  EXPECT_EQ(empty.device, 0);
  EXPECT_EQ(empty.reason, DeviceReason::kNoData);
}

TEST(DeviceChoice, RequestedDeviceMustHaveData) {
  const Snapshot s = make({4, 2}, {false, true}, {10, 10});
  const DeviceChoice choice = choose_device(s, 0);
  EXPECT_EQ(choice.device, 0);
  EXPECT_EQ(choice.reason, DeviceReason::kRequested);
  // Said with the devices that have data.
  testing::expect_error_code_saying([&] { (void)choose_device(s, 5); }, ErrorCode::kUnknownDevice,
                                    "(devices with data: 0, 1)");
}

}  // namespace
}  // namespace memsnap
