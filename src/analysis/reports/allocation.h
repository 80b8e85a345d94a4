// One allocation of a trace, in full (memsnap serve's hover and click), and
// the allocations whose stack or address matches a search. An allocation is
// named by its alloc entry's index in the device's trace, as `memsnap events`
// numbers entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core/categories.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"

namespace memsnap {

struct AllocationFrame {
  std::string_view name;
  std::string_view filename;
  int64_t line = 0;
  bool users = false;  // the user's code, as source keys decide it
};

// What ended an allocation: its free_completed, or an alloc at its address
// while it was live (the replay's replace).
struct AllocationEnd {
  uint64_t entry = 0;  // within the device's trace
  bool replaced = false;
  std::optional<double> time_s;
  std::vector<AllocationFrame> frames;  // the ending entry's own stack, innermost first
};

struct AllocationDetail {
  uint64_t entry = 0;  // its alloc entry, within the device's trace
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  std::optional<double> time_s;  // seconds from the trace's first timed entry
  std::string source;            // its source key, as every report names it
  Category category = Category::kUnknown;
  std::vector<AllocationFrame> frames;  // innermost first, as PyTorch records them
  std::optional<AllocationEnd> end;     // none: live at the end of the trace
};

// Throws a usage Error when `entry` is no alloc entry of the trace.
AllocationDetail allocation_at(const FileAnalysis& file, uint64_t entry,
                               const SourceKeyOptions& keys);

// The trace's allocation at `address` live after `position` entries (the
// last alloc there, not freed since): its alloc entry, or nullopt (a block
// from before the trace, or none).
std::optional<uint64_t> allocation_at_address(const FileAnalysis& file, uint64_t address,
                                              uint64_t position);

// The allocations a search finds: a hex address (0x...) inside the
// allocation, or text in one of its frames' name or file name.
constexpr size_t kMaxSearchText = 200;

// Whether an alloc entry matches a search (the frames' text is matched once
// per distinct frame and stack, when the matcher is made).
class AllocationMatcher {
 public:
  // Throws a usage Error for an empty or too long query.
  AllocationMatcher(const Snapshot& snapshot, std::string_view query);
  [[nodiscard]] bool by_address() const { return address_.has_value(); }
  // `event`: an alloc entry's model index.
  [[nodiscard]] bool matches(uint64_t event) const;

 private:
  const EventColumns* events_;
  std::optional<uint64_t> address_;
  std::vector<bool> stack_holds_;  // by stack id; 0: no stack
};

struct FoundAllocation {
  uint64_t entry = 0;  // its alloc entry, within the device's trace
  uint64_t size = 0;
  std::optional<double> time_s;
  std::string source;
};
struct SearchResult {
  std::string query;
  bool by_address = false;
  uint64_t count = 0;                 // allocations found
  uint64_t bytes = 0;                 // their sizes, summed
  std::vector<FoundAllocation> rows;  // the first `limit` of them, by entry
};

// The trace's allocations of one source (as every report names sources)
// live after `position` entries, largest first: a drill-down row opened.
struct LiveOfSource {
  uint64_t position = 0;
  std::string source;
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::vector<FoundAllocation> rows;  // the first `limit`, largest first
};
LiveOfSource live_of_source(const FileAnalysis& file, uint64_t position, std::string_view source,
                            size_t limit, const SourceKeyOptions& keys);

// Throws a usage Error for an empty or too long query.
SearchResult search_allocations(const FileAnalysis& file, std::string_view query, size_t limit,
                                const SourceKeyOptions& keys);

}  // namespace memsnap
