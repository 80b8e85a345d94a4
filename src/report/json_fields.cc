#include "report/json_fields.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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

ordered_json fragmentation_json(const FragmentationHistory& f,
                                std::optional<double> peak_free_time_s) {
  if (!f.known) return nullptr;
  return {{"exact", f.exact},
          {"reserved_peak", f.reserved_peak},
          {"free_at_reserved_peak", f.free_at_reserved_peak},
          {"largest_free_block_at_reserved_peak", f.largest_free_at_reserved_peak},
          {"peak_free", f.peak_free},
          {"peak_free_time_s", peak_free_time_s ? ordered_json(*peak_free_time_s) : nullptr},
          {"reserved_at_peak_free", f.reserved_at_peak_free},
          {"largest_free_block_at_peak_free", f.largest_free_at_peak_free}};
}

ordered_json baseline_json(const Baseline& b) {
  return {{"baseline_at_start", b.baseline_at_start},
          {"segments_active", b.segments_active},
          {"pre_existing_freed", b.pre_existing_freed},
          {"profiling_still_live", b.profiling_still_live}};
}

ordered_json text_or_null(const std::string& text) {
  return text.empty() ? ordered_json(nullptr) : ordered_json(text);
}

ordered_json number_or_null(std::optional<double> value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

double python_round(double value, int decimals) {
  if (!std::isfinite(value)) return value;
  // printf's %.*f rounds the exact binary value, ties to even, as CPython's
  // round() does through its correctly rounded dtoa; strtod reads it back the
  // way float() would.
  const int length = std::snprintf(nullptr, 0, "%.*f", decimals, value);
  if (length <= 0) return value;
  std::string text(static_cast<size_t>(length) + 1, '\0');
  std::snprintf(text.data(), text.size(), "%.*f", decimals, value);
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace memsnap
