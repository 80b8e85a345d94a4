// `memsnap streams`: memory by CUDA stream. The caching allocator keeps a
// pool per stream: a block freed on one stream is reused by another only
// after it went back to the device, so memory spread over many streams is
// memory the others cannot use. Per stream, what the allocator held at the
// dump and what the trace allocated on it, with the highest its traced
// allocations reached together. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/reports/segment_report.h"

namespace memsnap {

class FileAnalysis;

struct StreamRow {
  uint64_t stream = 0;  // cudaStream_t bit pattern; 0 is the default stream
  // At the dump: the segments the allocator kept for the stream.
  uint64_t segments = 0;
  BlockBytes dump;
  // Over the trace: allocations made on the stream and frees of them.
  uint64_t alloc_count = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_count = 0;
  uint64_t segment_allocs = 0;  // segment_alloc entries: the allocator asked CUDA for memory
  // The highest sum of the stream's live traced allocations (memory from
  // before the trace is not counted) and when it was first reached.
  int64_t peak_live = 0;
  std::optional<double> peak_time_s;
  int64_t end_live = 0;  // at the trace's end
};

struct StreamReport {
  std::string file;
  int device = 0;
  uint64_t trace_entries = 0;
  // Rows by reserved bytes at the dump, then by the trace's peak, then by stream.
  std::vector<StreamRow> rows;
};

StreamReport stream_report(const FileAnalysis& file);

}  // namespace memsnap
