// `memsnap events`: one device's trace entries, every Kth, as plain rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/source_key.h"
#include "memsnap/model.h"

namespace memsnap {

struct EventRow {
  uint64_t index = 0;  // within the device's trace
  std::string action;
  std::optional<uint64_t> addr;  // absent when the entry had no addr
  uint64_t size = 0;
  uint64_t stream = 0;
  std::optional<int64_t> time_us;  // absent when the entry had none
  double time_s = 0;               // from the first timed entry; meaningful with time_us
  StackId stack;
  std::string source;
  std::string category;  // analysis/categories.h
};

struct EventListing {
  GroupBy group = GroupBy::kSource;    // what the source rows stand for
  const Snapshot* snapshot = nullptr;  // for the frames of each row's stack
  int device = 0;
  uint64_t event_count = 0;
  uint64_t stride = 1;
  std::vector<EventRow> rows;  // every stride-th entry, and always the last
};

EventListing list_events(const Snapshot& snapshot, std::optional<int> device, uint64_t stride,
                         const SourceKeyOptions& key_options);

}  // namespace memsnap
