// Series over a trace's time kept to a bounded size: the bucket a position
// falls in, and step functions whose per-bucket maximum stays exact. Shared
// by the page's lines (timeline), the allocator's free memory over time
// (segment_report) and the simulated reserved line (allocator_simulation).
#pragma once

#include <cstdint>
#include <vector>

namespace memsnap {

// The bucket of `position` among `count` buckets of `width` (what bucketize
// uses; the stacked view must agree with it to the bucket).
uint64_t bucket_of(double position, double width, uint64_t count);

// A step function over the trace's time: bytes[k] holds from t_us[k] (µs
// after the first entry) until the next point.
struct StepSeries {
  std::vector<int64_t> t_us;
  std::vector<uint64_t> bytes;
};
// Free and reserved memory over time keep at most this many buckets: per
// bucket the point where it was highest and the value it ended with, so a
// chart's per-bucket max is exact at this resolution or coarser (a trace of
// 10M entries has ~1M segment changes: 37 MiB of page when kept whole).
constexpr uint64_t kFreeSeriesBuckets = 8192;

// Builds such a series from points given in time order (a time earlier than
// the one before counts as that one).
class BoundedStepSeries {
 public:
  BoundedStepSeries(double duration_us, StepSeries& out);
  void add(int64_t t_us, uint64_t bytes);
  void finish();  // writes the open bucket

 private:
  StepSeries& out_;
  double width_;
  uint64_t bucket_ = 0;
  int64_t max_t_ = 0;
  int64_t last_t_ = 0;
  uint64_t max_bytes_ = 0;
  uint64_t last_bytes_ = 0;
  bool open_ = false;
};

}  // namespace memsnap
