#include "analysis/core/pytorch_allocator_policy.h"

#include <algorithm>
#include <bit>

namespace memsnap {

std::string_view rounding_rule_name(RoundingRule rule) {
  return rule == RoundingRule::kNpu ? "npu" : "cuda";
}

SplitRule split_rule_from_settings(const AllocatorSettings& settings) {
  SplitRule rule;
  if (settings.max_split_size) rule.max_split_size = *settings.max_split_size;
  if (settings.roundup_power2_divisions) {
    rule.power2_divisions.fill(*settings.roundup_power2_divisions);  // one value for every size
  }
  for (const auto& [mib, divisions] : settings.roundup_power2_divisions_by_mib) {
    const auto interval = static_cast<size_t>(std::bit_width(mib) - 1);
    if (interval < kPower2Intervals) rule.power2_divisions[interval] = divisions;
  }
  return rule;
}

namespace pytorch {
namespace {

// roundup_power2_next_division: the next of `divisions` equal steps between
// the powers of two around size (divisions counted down to a power of two).
uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const uint64_t floor = std::bit_floor(size);
  const uint64_t step = floor >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  const uint64_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

uint64_t round_up(uint64_t value, uint64_t step) {
  return (value + step - 1) / step * step;
}

}  // namespace

uint64_t round_size(uint64_t requested, const SplitRule& rule) {
  constexpr uint64_t kNpuPadding = 32;              // torch_npu's round_size adds this first
  constexpr uint64_t kLargestRequest = 1ULL << 62;  // keeps the rounding below in range
  uint64_t size = std::min(requested, kLargestRequest);
  if (rule.rounding == RoundingRule::kNpu) size += kNpuPadding;
  if (size < kMinBlockSize) return kMinBlockSize;
  constexpr unsigned kFirstInterval = 20;  // log2(1 MiB)
  const auto log_size = static_cast<unsigned>(std::bit_width(size) - 1);
  const size_t interval = std::min<size_t>(
      log_size > kFirstInterval ? log_size - kFirstInterval : 0, kPower2Intervals - 1);
  const uint64_t divisions = rule.power2_divisions[interval];
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    return roundup_power2_next_division(size, divisions);
  }
  return round_up(size, kMinBlockSize);
}

uint64_t allocation_size(uint64_t rounded) {
  if (is_small_pool(rounded)) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

std::string_view segment_type_of(uint64_t size) {
  return size == kSmallBuffer ? "small" : "large";
}

uint64_t carved_block_size(uint64_t requested, uint64_t free_size, const SplitRule& rule) {
  const uint64_t rounded = round_size(requested, rule);
  if (rounded >= free_size) return rounded;
  return should_split(is_small_pool(rounded), rounded, free_size - rounded, rule) ? rounded
                                                                                  : free_size;
}

uint64_t live_request_bytes(uint64_t requested) {
  return requested == 0 ? 0 : round_size(requested, SplitRule{});
}

}  // namespace pytorch
}  // namespace memsnap
