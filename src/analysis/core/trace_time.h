// The trace's clock, one per FileAnalysis: its first and last timed entries,
// its duration, where a time after its start falls, and the clamp to its end.
// Every report that takes a time ("--time", an OOM's window, the page's
// moments) reads it here, so each says the same of a time past the end and
// of a trace without times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

class TraceTime {
 public:
  TraceTime() = default;
  TraceTime(const Snapshot& snapshot, const DeviceTrace& trace);

  // The first and last entries with a time_us (0: the trace has none).
  [[nodiscard]] int64_t start_us() const { return start_us_; }
  [[nodiscard]] int64_t end_us() const { return end_us_; }
  [[nodiscard]] bool timed() const { return start_us_ != 0; }
  // Seconds from the first timed entry to the last (0 without times).
  [[nodiscard]] double duration_s() const { return static_cast<double>(end_us_ - start_us_) / 1e6; }
  // A time after the start, no later than the end.
  [[nodiscard]] double clamped(double seconds) const { return std::min(seconds, duration_s()); }
  // Entries applied `seconds` after the start: those with time_us at most
  // start + seconds (entries without a time count as earlier).
  [[nodiscard]] uint64_t position_at(double seconds) const;
  // The same for ascending times, in one pass.
  [[nodiscard]] std::vector<uint64_t> positions_at(const std::vector<double>& ascending_s) const;
  // Seconds from the start to a model index's entry; nullopt when either has no time.
  [[nodiscard]] std::optional<double> seconds_at(uint64_t event) const;
  // Throws the input Error a report that needs a time gives on a trace
  // without times ("<file>: trace entries carry no time_us (PyTorch before
  // 2.2), so no time can be asked for; <what still works>").
  void require_times(const std::string& file, const std::string& instead) const;

 private:
  const Snapshot* snapshot_ = nullptr;
  DeviceTrace trace_;
  int64_t start_us_ = 0;
  int64_t end_us_ = 0;
};

}  // namespace memsnap
