// PyTorch's caching allocator policy, each rule once: the constants, how a
// request is rounded, which pool it uses, how large a new segment is, which
// cached block a request may take and when a block is split. Everything in
// memsnap that reasons about the allocator (the history's walks and the
// state before the trace, the allocator model of `whatif`, the check of the
// model against the file) asks here; a new setting of PyTorch's allocator
// is one edit in this header and its .cc.
//
// Each function is named after the PyTorch function it mirrors in
// c10/cuda/CUDACachingAllocator.cpp (torch_npu's variant where it differs:
// torch_npu/csrc/core/npu/NPUCachingAllocator.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memsnap/model.h"

namespace memsnap {

// How a request is rounded to a block size: PyTorch's CUDA caching allocator
// (up to a multiple of 512 bytes), or torch_npu's (32 bytes more, then the
// same). The history tries CUDA first and keeps whichever replays better.
enum class RoundingRule : uint8_t { kCuda, kNpu };
std::string_view rounding_rule_name(RoundingRule rule);

// roundup_power2_divisions: one setting per power-of-two interval from 1 MiB
// (1 MiB, 2 MiB, ... 32 GiB and up).
constexpr size_t kPower2Intervals = 16;

// The settings of PYTORCH_CUDA_ALLOC_CONF that decide how a request becomes a
// block (CUDAAllocatorConfig), as the policy functions below read them.
struct SplitRule {
  RoundingRule rounding = RoundingRule::kCuda;
  bool expandable = false;  // expandable segments: every pool splits like the small one
  // max_split_size: blocks for requests of at least this are never split
  // (-1 in the file, i.e. unlimited, is UINT64_MAX here).
  uint64_t max_split_size = UINT64_MAX;
  // roundup_power2_divisions per power-of-two interval from 1 MiB: a request
  // rounds up to the next of that many equal divisions (0 or 1: to 512 bytes).
  std::array<uint64_t, kPower2Intervals> power2_divisions{};
};
// max_split_size and roundup_power2_divisions from allocator_settings (the
// dict of PyTorch 2.1+, keyed by each interval's start in MiB, or one number
// for every interval); other fields and unreadable values keep the defaults.
SplitRule split_rule_from_settings(const AllocatorSettings& settings);

namespace pytorch {

// CUDACachingAllocator.cpp's constants.
inline constexpr uint64_t kMinBlockSize = 512;               // every block is a multiple of this
inline constexpr uint64_t kSmallSize = uint64_t{1} << 20;    // largest small-pool request
inline constexpr uint64_t kSmallBuffer = uint64_t{2} << 20;  // small-pool segments and pages
inline constexpr uint64_t kLargeBuffer = uint64_t{20}
                                         << 20;  // large segments under kMinLargeAlloc; large pages
inline constexpr uint64_t kMinLargeAlloc = uint64_t{10}
                                           << 20;           // from here, a segment fits the request
inline constexpr uint64_t kRoundLarge = uint64_t{2} << 20;  // ... rounded up to this

// round_size: the block size a request of `requested` bytes rounds to
// (512-byte multiples, or roundup_power2_divisions; torch_npu adds 32 bytes
// first). Requests beyond 2^62 bytes are taken as 2^62, so that no rounding
// here or after wraps.
uint64_t round_size(uint64_t requested, const SplitRule& rule);

// get_pool: a rounded size up to kSmallSize goes to the small pool.
constexpr bool is_small_pool(uint64_t rounded) {
  return rounded <= kSmallSize;
}

// get_allocation_size: the segment cudaMalloc reserves for a request of
// `rounded` bytes that no cached block serves.
uint64_t allocation_size(uint64_t rounded);

// An expandable segment's page: what segment_map maps at a time.
constexpr uint64_t expandable_page_size(bool small_pool) {
  return small_pool ? kSmallBuffer : kLargeBuffer;
}

// The pool a segment of `size` bytes reserved by cudaMalloc came from, as
// the dump's segment_type says: small-pool segments are kSmallBuffer, large
// ones never are (get_allocation_size).
std::string_view segment_type_of(uint64_t size);

// get_free_block's limits on the smallest cached block that fits: no
// oversize block (max_split_size or more) for a smaller request, and none
// kLargeBuffer or more larger than an oversize request.
constexpr bool may_take_cached(uint64_t rounded, uint64_t cached, const SplitRule& rule) {
  if (rounded < rule.max_split_size && cached >= rule.max_split_size) return false;
  return rounded < rule.max_split_size || cached < rounded + kLargeBuffer;
}

// should_split: whether a block keeps `rounded` bytes and the `remaining`
// ones become a free block of their own. The small pool and expandable
// segments split off any remainder of kMinBlockSize or more; the large pool
// one of more than kSmallSize, and never for an oversize request.
constexpr bool should_split(bool small_pool, uint64_t rounded, uint64_t remaining,
                            const SplitRule& rule) {
  if (small_pool || rule.expandable) return remaining >= kMinBlockSize;
  return rounded < rule.max_split_size && remaining > kSmallSize;
}
// The least remainder should_split splits off for a request it may split
// at all (rounded under max_split_size in the large pool).
constexpr uint64_t least_split_remainder(bool small_pool, const SplitRule& rule) {
  return small_pool || rule.expandable ? kMinBlockSize : kSmallSize + 1;
}

// The block malloc carves for a request of `requested` bytes from a free
// block of `free_size` bytes: round_size, then the whole free block unless
// should_split splits the rest off. A free size under the rounded one
// (0: none known) gives the rounded size.
uint64_t carved_block_size(uint64_t requested, uint64_t free_size, const SplitRule& rule);

// A request's bytes as memsnap counts them live (whatif's floor, the live
// requests at an OOM): rounded to kMinBlockSize under the default rule,
// and 0 for a request of 0 bytes, which takes no block.
uint64_t live_request_bytes(uint64_t requested);

}  // namespace pytorch
}  // namespace memsnap
