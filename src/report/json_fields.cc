#include "report/json_fields.h"

namespace memsnap {

using nlohmann::ordered_json;

ordered_json segments_json(const SegmentTotals& s) {
  return ordered_json{{"count", s.count},
                      {"total_size", s.total_size},
                      {"allocated_size", s.allocated_size},
                      {"active_size", s.active_size},
                      {"awaiting_free_size", s.awaiting_free_size},
                      {"inactive_size", s.inactive_size},
                      {"fragmentation", s.fragmentation},
                      {"expandable_count", s.expandable_count},
                      {"private_pool_count", s.private_pool_count},
                      {"block_count", s.block_count}};
}

ordered_json compare_segments_json(const SegmentTotals& s) {
  ordered_json out{{"count", s.count},
                   {"total", s.total_size},
                   {"allocated", s.allocated_size},
                   {"active", s.active_size},
                   {"awaiting_free", s.awaiting_free_size},
                   {"inactive", s.inactive_size}};
  const ordered_json own = segments_json(s);  // a local: items() does not extend a temporary
  for (const auto& [key, value] : own.items()) out[key] = value;
  return out;
}

ordered_json reserved_json(const ReservedHistory& r) {
  return {{"at_start", r.at_start},
          {"peak", r.peak},
          {"at_dump", r.at_dump},
          {"segment_events", r.segment_events}};
}

ordered_json baseline_json(const Baseline& b) {
  return {{"baseline_at_start", b.baseline_at_start},
          {"segments_active", b.segments_active},
          {"pre_existing_freed", b.pre_existing_freed},
          {"profiling_still_live", b.profiling_still_live}};
}

}  // namespace memsnap
