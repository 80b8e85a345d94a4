#include "analysis/reports/stream_report.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>

#include "analysis/core/file_analysis.h"
#include "memsnap/replay.h"

namespace memsnap {
namespace {

// The traced allocations of each stream, live and at their highest, in the
// one replay loop (replay.h): a free counts against the stream its
// allocation was made on.
class StreamObserver {
 public:
  StreamObserver(const FileAnalysis& file, std::vector<StreamRow>& rows)
      : file_(file), rows_(rows) {}

  void on_alloc(uint64_t event, const LiveAllocation& added) {
    StreamRow& row = row_of(stream_of(event));
    ++row.alloc_count;
    row.alloc_bytes += added.size;
    row.end_live += static_cast<int64_t>(added.size);
    if (row.end_live > row.peak_live) {
      row.peak_live = row.end_live;
      row.peak_time_s = file_.seconds_at(event);
    }
  }
  void on_replace(uint64_t /*event*/, const LiveAllocation& replaced) {
    row_of(stream_of(replaced.event)).end_live -= static_cast<int64_t>(replaced.size);
  }
  void on_free(uint64_t /*event*/, const LiveAllocation& freed) {
    StreamRow& row = row_of(stream_of(freed.event));
    ++row.free_count;
    row.end_live -= static_cast<int64_t>(freed.size);
  }
  void on_other(uint64_t event) {
    if (file_.snapshot().events.action[event] == Action::kSegmentAlloc) {
      ++row_of(stream_of(event)).segment_allocs;
    }
  }

  StreamRow& row_of(uint64_t stream) {
    auto [found, added] = index_.try_emplace(stream, rows_.size());
    if (added) rows_.push_back(StreamRow{.stream = stream});
    return rows_[found->second];
  }

 private:
  [[nodiscard]] uint64_t stream_of(uint64_t event) const {
    return file_.snapshot().events.stream[event];
  }

  const FileAnalysis& file_;
  std::vector<StreamRow>& rows_;
  absl::flat_hash_map<uint64_t, size_t> index_;
};

}  // namespace

StreamReport stream_report(const FileAnalysis& file) {
  StreamReport report;
  report.file = file.path();
  report.device = file.device();
  report.trace_entries = file.trace().count();
  StreamObserver observer(file, report.rows);
  // The dump's segments first, so that a stream with segments and no trace
  // has its row.
  const SegmentReport dump = segments_at_dump(file.path(), file.snapshot(), file.device());
  for (const PoolStreamRow& group : dump.groups) {
    StreamRow& row = observer.row_of(group.stream);
    row.segments += group.segments;
    row.dump.reserved += group.bytes.reserved;
    row.dump.allocated += group.bytes.allocated;
    row.dump.awaiting_free += group.bytes.awaiting_free;
    row.dump.free += group.bytes.free;
    row.dump.requested += group.bytes.requested;
    row.dump.rounding += group.bytes.rounding;
    row.dump.largest_free = std::max(row.dump.largest_free, group.bytes.largest_free);
    row.dump.blocks += group.bytes.blocks;
  }
  Replay replay(file.snapshot());
  replay.run(file.trace().begin, file.trace().end, observer);
  std::sort(report.rows.begin(), report.rows.end(), [](const StreamRow& a, const StreamRow& b) {
    if (a.dump.reserved != b.dump.reserved) return a.dump.reserved > b.dump.reserved;
    if (a.peak_live != b.peak_live) return a.peak_live > b.peak_live;
    return a.stream < b.stream;
  });
  return report;
}

}  // namespace memsnap
