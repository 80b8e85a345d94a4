#include "analysis/core/trace_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/core/steps.h"
#include "memsnap/error.h"
#include "memsnap/replay.h"

namespace memsnap {
namespace {

// Times are below 2^53 us (the decoder's bound), so a time past 2^53 us
// after the start is past every entry; clamping keeps the sum an int64.
constexpr double kBeyondEveryTimeUs = 9007199254740992.0;  // 2^53

int64_t limit_us(int64_t start_us, double seconds) {
  const double offset_us = std::clamp(seconds * 1e6, -kBeyondEveryTimeUs, kBeyondEveryTimeUs);
  return start_us + static_cast<int64_t>(std::llround(offset_us));
}

}  // namespace

TraceTime::TraceTime(const Snapshot& snapshot, const DeviceTrace& trace)
    : snapshot_(&snapshot),
      trace_(trace),
      start_us_(trace_start_us(snapshot, trace)),
      end_us_(trace_end_us(snapshot, trace)) {}

uint64_t TraceTime::position_at(double seconds) const {
  const int64_t limit = limit_us(start_us_, seconds);
  uint64_t i = trace_.begin;
  while (i < trace_.end && snapshot_->events.time_us[i] <= limit) ++i;
  return i - trace_.begin;
}

std::vector<uint64_t> TraceTime::positions_at(const std::vector<double>& ascending_s) const {
  std::vector<uint64_t> out;
  out.reserve(ascending_s.size());
  uint64_t i = trace_.begin;
  for (double seconds : ascending_s) {
    const int64_t limit = limit_us(start_us_, seconds);
    while (i < trace_.end && snapshot_->events.time_us[i] <= limit) ++i;
    out.push_back(i - trace_.begin);
  }
  return out;
}

std::optional<double> TraceTime::seconds_at(uint64_t event) const {
  if (start_us_ == 0 || event == kNoEvent || snapshot_->events.time_us[event] == 0) {
    return std::nullopt;
  }
  return static_cast<double>(snapshot_->events.time_us[event] - start_us_) / 1e6;
}

void TraceTime::require_times(const std::string& file, const std::string& instead) const {
  if (timed()) return;
  throw Error(ErrorCode::kNoTimestamps, fmt::format("{}: trace entries carry no time_us (PyTorch "
                                                    "before 2.2), so no time can be asked for; {}",
                                                    file, instead));
}

}  // namespace memsnap
