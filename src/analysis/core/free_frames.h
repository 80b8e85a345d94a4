// Whose stack a trace's frees carry.
//
// `_record_memory_history(context="all")`, PyTorch's default, records on
// free_requested and free_completed the stack of the code that freed the
// block; `context="alloc"` records the block's allocation stack there instead
// (CUDACachingAllocator: `context ? context : block->context_when_allocated`).
// The file does not say which it was, but its matched alloc/free pairs do:
// with "alloc" every pair has the same frames at both ends, with "all" the
// frees are made elsewhere (on the real fixtures, at most a third of the
// pairs agree: temporaries freed on the line that made them). So the frames of
// a free without its alloc name where the memory was allocated only when every
// matched pair agrees.
#pragma once

#include <cstdint>
#include <string_view>

#include "memsnap/model.h"
#include "memsnap/replay.h"

namespace memsnap {

enum class FreeFrames : uint8_t {
  kUnknown,     // no matched pair has frames at both ends: taken as the free's own
  kAllocation,  // context="alloc": a free carries its allocation's frames
  kFree,        // context="all": a free carries the stack of the code that freed it
};

// "allocation", "free", "unknown" (parse --json's `free_frames.kind`).
constexpr std::string_view free_frames_name(FreeFrames kind) {
  switch (kind) {
    case FreeFrames::kAllocation: return "allocation";
    case FreeFrames::kFree: return "free";
    case FreeFrames::kUnknown: break;
  }
  return "unknown";
}

struct FreeFrameEvidence {
  uint64_t pairs = 0;     // matched alloc/free_completed pairs with frames at both ends
  uint64_t agreeing = 0;  // of them, with the same frames at both ends

  [[nodiscard]] FreeFrames kind() const {
    if (pairs == 0) return FreeFrames::kUnknown;
    return agreeing == pairs ? FreeFrames::kAllocation : FreeFrames::kFree;
  }
  // Whether a free's frames may stand for its allocation's.
  [[nodiscard]] bool frees_name_allocations() const { return kind() == FreeFrames::kAllocation; }

  // A replay observer (memsnap/replay.h): counts each matched free. Stacks
  // are interned by content, so equal frames are equal ids.
  void tally(const EventColumns& events, uint64_t free_event, const LiveAllocation& freed) {
    const StackId at_free = events.stack[free_event];
    if (!at_free.valid() || !freed.stack.valid()) return;
    ++pairs;
    if (at_free == freed.stack) ++agreeing;
  }
};

}  // namespace memsnap
