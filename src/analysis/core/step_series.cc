#include "analysis/core/step_series.h"

#include <algorithm>

namespace memsnap {

uint64_t bucket_of(double position, double width, uint64_t count) {
  // Clamped in floating point first: a position far past the extent (a
  // hostile trace's out-of-order time) must not overflow the conversion.
  double slot = std::max(0.0, position / width);
  const auto last = static_cast<double>(count - 1);
  return slot >= last ? count - 1 : static_cast<uint64_t>(slot);
}

BoundedStepSeries::BoundedStepSeries(double duration_us, StepSeries& out)
    : out_(out), width_(std::max(duration_us / static_cast<double>(kFreeSeriesBuckets), 1.0)) {}

void BoundedStepSeries::add(int64_t t_us, uint64_t bytes) {
  if (open_) t_us = std::max(t_us, last_t_);
  const uint64_t b = bucket_of(static_cast<double>(t_us), width_, kFreeSeriesBuckets);
  if (open_ && b != bucket_) finish();
  if (!open_) {
    open_ = true;
    bucket_ = b;
    max_t_ = t_us;
    max_bytes_ = bytes;
  } else if (bytes > max_bytes_) {
    max_t_ = t_us;
    max_bytes_ = bytes;
  }
  last_t_ = t_us;
  last_bytes_ = bytes;
}

void BoundedStepSeries::finish() {
  if (!open_) return;
  out_.t_us.push_back(max_t_);
  out_.bytes.push_back(max_bytes_);
  if (last_t_ != max_t_ || last_bytes_ != max_bytes_) {
    out_.t_us.push_back(last_t_);
    out_.bytes.push_back(last_bytes_);
  }
  open_ = false;
}

}  // namespace memsnap
