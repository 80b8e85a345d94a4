// Typed findings: what the analysis noticed, as a kind and its numbers.
// Only report/ turns them into words (report/findings.h), so every renderer
// (text, JSON, the CI formats of `check`) phrases them the same way and tests can
// check the numbers without parsing English.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "analysis/core/device_choice.h"
#include "analysis/core/steps.h"

namespace memsnap {

enum class Side : uint8_t { kA, kB };

namespace finding {

// ---- one file (parse) ----
struct NoHistory {                   // the device has segments but no trace entries
  bool sources_from_blocks = false;  // the segments' blocks name the live memory instead
};
struct TruncatedTrace {
  uint64_t unmatched_frees = 0;
  uint64_t frees = 0;
  uint64_t unmatched_bytes = 0;
  TraceCut cut = TraceCut::kRingBuffer;
  uint64_t entries = 0;
};
struct LargeBaseline {  // allocated before the trace started
  uint64_t bytes = 0;
  bool sources_from_blocks = false;
};
struct NegativeBaseline {  // the trace holds more live memory than the segments
  int64_t bytes = 0;
};
struct NoTimestamps {};
struct OutOfMemory {
  int device = 0;
  uint64_t requested = 0;
  std::optional<uint64_t> device_free;
};
// The oom entries past the first kOomFindings: one finding that counts them
// (a file with thousands of oom entries would otherwise warn thousands of
// times in every report that repeats parse's warnings).
inline constexpr size_t kOomFindings = 3;
struct MoreOutOfMemory {
  int device = 0;
  uint64_t more = 0;   // entries not warned of one by one
  uint64_t total = 0;  // oom entries on the device
};
struct MalformedEntries {
  uint64_t count = 0;
};
struct MalformedSegments {  // segments and blocks with implausible sizes or device
  uint64_t segments = 0;
  uint64_t blocks = 0;
};
struct MalformedAnnotations {
  uint64_t count = 0;
};
struct TruncatedStrings {  // strings beyond kMaxStringBytes, kept cut
  uint64_t count = 0;
};
struct BytesNotRead {  // after the pickle's STOP, or after the last gzip member
  uint64_t after_stop = 0;
  uint64_t after_compressed = 0;
};
struct UnusableTimes {  // time_us that is no timestamp: the entries count as untimed
  uint64_t count = 0;
};
struct MalformedField {  // a top-level field of the wrong type, left out
  std::string field;
  std::string found;
};
// An allocator setting memsnap reads whose value is of another type (the
// string 'yes' for expandable_segments): read as if absent.
struct UnreadSetting {
  std::string key;
  std::string value;  // as JSON text
};
struct FlatDeviceTraces {};  // entries right in device_traces: read as device 0's
struct TimesGoBackwards {    // trace entries earlier than the timed entry before them
  uint64_t count = 0;
};
struct StepsEndBeforeStart {  // ProfilerStep windows whose END precedes their START
  std::vector<int64_t> numbers;
};
// The file has data on other devices too and none was chosen with --device.
struct OtherDevices {
  std::optional<Side> side;  // compare: which file; parse: none
  int analysed = 0;
  DeviceReason reason = DeviceReason::kNoData;  // why that one (file_analysis.h)
  std::vector<int> devices;                     // all with data
  std::vector<int> oom_devices;                 // other devices whose trace has an oom entry
};

// ---- two files (compare) ----
struct CudaGraphsLikely {
  Side more = Side::kA;         // the side that allocates more often
  double ratio = 0;             // more / fewer
  std::optional<int64_t> step;  // nullopt: over the whole trace
  uint64_t more_count = 0, fewer_count = 0;
};
struct TopSourcesShare {
  int sources = 0;
  double share = 0;      // of the summed |per-source difference| at the peak
  bool at_dump = false;  // the live sets are the dump's blocks, not the peaks'
};
struct SideTruncated {
  Side side = Side::kA;
  uint64_t unmatched_frees = 0;
  uint64_t frees = 0;
  TraceCut cut = TraceCut::kRingBuffer;
};
struct BaselinesDiffer {
  int64_t a = 0, b = 0;
};
struct DifferentDevices {
  int a = 0, b = 0;
};
struct DifferentRanks {
  std::string a, b;  // as in the file names
};
// Private pools (CUDA graphs, MemPools) hold segments in one file only.
struct PrivatePoolsOneSide {
  Side side = Side::kA;  // the side that has them
  uint64_t segments = 0;
  uint64_t reserved = 0;
};
// One or both files carry no allocation trace: only their segments compare.
struct NoTrace {
  bool a = false, b = false;  // which side lacks one
};

}  // namespace finding

using Finding =
    std::variant<finding::NoHistory, finding::TruncatedTrace, finding::LargeBaseline,
                 finding::NegativeBaseline, finding::NoTimestamps, finding::OutOfMemory,
                 finding::MoreOutOfMemory, finding::MalformedEntries, finding::MalformedSegments,
                 finding::MalformedAnnotations, finding::UnusableTimes, finding::TruncatedStrings,
                 finding::BytesNotRead, finding::MalformedField, finding::UnreadSetting,
                 finding::FlatDeviceTraces, finding::TimesGoBackwards, finding::StepsEndBeforeStart,
                 finding::OtherDevices, finding::CudaGraphsLikely, finding::TopSourcesShare,
                 finding::SideTruncated, finding::BaselinesDiffer, finding::DifferentDevices,
                 finding::DifferentRanks, finding::PrivatePoolsOneSide, finding::NoTrace>;

}  // namespace memsnap
