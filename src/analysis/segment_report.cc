#include "analysis/segment_report.h"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <tuple>

namespace memsnap {

namespace {

void add(BlockBytes& total, const BlockBytes& part) {
  total.reserved += part.reserved;
  total.allocated += part.allocated;
  total.awaiting_free += part.awaiting_free;
  total.free += part.free;
  total.requested += part.requested;
  total.rounding += part.rounding;
  total.largest_free = std::max(total.largest_free, part.largest_free);
  total.blocks += part.blocks;
}

// Per slice of the segment: bytes allocated, awaiting free and free.
std::string fill_map(const Segment& segment, std::span<const Block> blocks) {
  if (segment.total_size == 0) return {};
  const uint64_t cells = kFillWidth;
  std::vector<double> allocated(cells, 0);
  std::vector<double> pending(cells, 0);
  std::vector<double> covered(cells, 0);
  const auto total = static_cast<double>(segment.total_size);
  const double cell = total / static_cast<double>(cells);
  for (const Block& block : blocks) {
    if (block.address < segment.address) continue;
    double from = static_cast<double>(block.address - segment.address);
    double to = std::min(total, from + static_cast<double>(block.size));
    for (auto c = static_cast<uint64_t>(from / cell); c < cells; ++c) {
      double lo = std::max(from, static_cast<double>(c) * cell);
      double hi = std::min(to, static_cast<double>(c + 1) * cell);
      if (hi <= lo) break;
      covered[c] += hi - lo;
      if (block.state == BlockState::kActiveAllocated) allocated[c] += hi - lo;
      if (block.state == BlockState::kActivePendingFree) pending[c] += hi - lo;
    }
  }
  std::string out;
  for (uint64_t c = 0; c < cells; ++c) {
    const double share = allocated[c] / cell;
    if (covered[c] < cell * 1e-9) {
      out += ' ';
    } else if (share >= 1 - 1e-9) {
      out += '#';
    } else if (pending[c] >= cell / 2) {
      out += '~';
    } else if (allocated[c] <= 0) {
      out += '.';
    } else {
      out += static_cast<char>('0' + std::clamp(static_cast<int>(share * 10), 1, 9));
    }
  }
  return out;
}

}  // namespace

std::string pool_label(PoolId pool) {
  return pool.is_default() ? std::string("default pool")
                           : fmt::format("pool ({}, {})", pool.first, pool.second);
}

SegmentReport segments_at_dump(const std::string& file, const Snapshot& snapshot, int device) {
  SegmentReport report;
  report.file = file;
  report.device = device;
  std::map<std::tuple<int64_t, int64_t, uint64_t>, PoolStreamRow> groups;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    SegmentRow row;
    row.address = segment.address;
    row.stream = segment.stream;
    row.pool = PoolId{segment.pool_id_first, segment.pool_id_second};
    row.kind = std::string(snapshot.strings.get(segment.segment_type));
    row.expandable = segment.is_expandable;
    BlockBytes& bytes = row.bytes;
    bytes.reserved = segment.total_size;
    std::span<const Block> blocks = snapshot.blocks_of(segment);
    if (blocks.empty()) {
      // No blocks listed: the segment's own totals, no free-block sizes.
      report.blocks_known = false;
      const uint64_t active = std::max(segment.active_size, segment.allocated_size);
      bytes.allocated = segment.allocated_size;
      bytes.awaiting_free = active - segment.allocated_size;
      bytes.free = segment.total_size > active ? segment.total_size - active : 0;
    }
    for (const Block& block : blocks) {
      ++bytes.blocks;
      switch (block.state) {
        case BlockState::kActiveAllocated:
          bytes.allocated += block.size;
          if (block.requested_size > 0 && block.requested_size <= block.size) {
            bytes.requested += block.requested_size;
            bytes.rounding += block.size - block.requested_size;
          }
          break;
        case BlockState::kActivePendingFree: bytes.awaiting_free += block.size; break;
        case BlockState::kInactive:
          bytes.free += block.size;
          bytes.largest_free = std::max(bytes.largest_free, block.size);
          break;
        case BlockState::kUnknown: break;
      }
    }
    row.fill = fill_map(segment, blocks);
    PoolStreamRow& group = groups[{row.pool.first, row.pool.second, row.stream}];
    group.pool = row.pool;
    group.stream = row.stream;
    ++group.segments;
    add(group.bytes, bytes);
    add(report.totals, bytes);
    report.segments.push_back(std::move(row));
  }
  for (auto& [key, group] : groups) report.groups.push_back(group);
  std::sort(report.segments.begin(), report.segments.end(),
            [](const SegmentRow& a, const SegmentRow& b) {
              if (a.bytes.reserved != b.bytes.reserved) return a.bytes.reserved > b.bytes.reserved;
              return a.address < b.address;
            });
  return report;
}

}  // namespace memsnap
