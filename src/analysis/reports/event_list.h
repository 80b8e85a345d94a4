// `memsnap events`: one device's trace entries, every Kth, as plain rows.
//
// A listing holds a few bytes per row (its source and category); the rest of
// a row is read from the snapshot's columns when it is rendered, so that a
// trace of millions of entries lists in little more memory than its parse.
// The stacks and frames the rows use are numbered for the listing (from 0,
// in order of first use), for renderers that write each stack once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <absl/functional/function_ref.h>

#include "analysis/core/categories.h"
#include "analysis/core/free_frames.h"
#include "analysis/core/source_key.h"
#include "memsnap/model.h"

namespace memsnap {

struct EventRow {
  uint64_t index = 0;  // within the device's trace
  std::string_view action;
  std::optional<uint64_t> addr;  // absent when the entry had no addr
  uint64_t size = 0;
  uint64_t stream = 0;
  std::optional<int64_t> time_us;  // absent when the entry had none
  double time_s = 0;               // from the first timed entry; meaningful with time_us
  StackId stack;                   // the model's
  uint32_t listed_stack = 0;       // the listing's number of `stack`
  uint32_t source = 0;             // index in EventListing::sources
  Category category = Category::kUnknown;
};

class EventListing {
 public:
  GroupBy group = GroupBy::kSource;    // what the source rows stand for
  const Snapshot* snapshot = nullptr;  // the rows' columns, frames and stacks
  int device = 0;
  uint64_t event_count = 0;
  uint64_t stride = 1;
  std::vector<std::string> sources;  // source names by id

  // Every stride-th entry, and always the last.
  [[nodiscard]] uint64_t row_count() const { return categories_.size(); }
  [[nodiscard]] EventRow row(uint64_t k) const;

  // The stacks the rows use (the listing's stack n is the model's stacks[n]),
  // and the frames those stacks use (the listing's frame n is frames[n]).
  [[nodiscard]] std::span<const StackId> stacks() const { return stacks_; }
  [[nodiscard]] std::span<const FrameId> frames() const { return frames_; }
  // The listing's number of a frame of one of those stacks.
  [[nodiscard]] uint32_t listed_frame(FrameId frame) const {
    return frame_number_[frame.value] - 1;
  }

 private:
  friend EventListing list_events(const Snapshot&, std::optional<int>, uint64_t,
                                  const SourceKeyOptions&);
  [[nodiscard]] uint64_t index_of(uint64_t k) const;
  [[nodiscard]] uint64_t index_of_row(uint64_t k, uint64_t rows) const;

  uint64_t first_ = 0;                // the device's first entry in the columns
  int64_t origin_us_ = 0;             // time_us of its first timed entry
  std::vector<uint32_t> sources_;     // per row
  std::vector<Category> categories_;  // per row
  std::vector<StackId> stacks_;
  std::vector<FrameId> frames_;
  std::vector<uint32_t> stack_number_;  // model stack id -> listing number + 1 (0: unused)
  std::vector<uint32_t> frame_number_;  // model frame id -> listing number + 1 (0: unused)
};

EventListing list_events(const Snapshot& snapshot, std::optional<int> device, uint64_t stride,
                         const SourceKeyOptions& key_options);

class SourceIndex;
// How the reports name each entry of one device's trace, in one replay: an
// alloc, a segment entry and the rest by their own frames; a free by the
// allocation it frees (the alloc a free_completed matches, the live one at a
// free_requested's address), never by the freeing code's frames; a free of
// memory allocated before the trace as SourceIndex::of_free and
// Categorizer::of_free_site, unless the file's frees carry their
// allocation's frames (`free_frames`). Calls `visit` for every entry, in order.
void name_entries(
    const Snapshot& snapshot, const DeviceTrace& trace, FreeFrames free_frames,
    SourceIndex& sources, Categorizer& categories,
    absl::FunctionRef<void(uint64_t event, uint32_t source, Category category)> visit);

}  // namespace memsnap
