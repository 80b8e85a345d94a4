// What kind of memory an allocation is: PyTorch's memory-profiler categories
// (torch.profiler._memory_profiler.Category) plus memsnap's communication,
// workspace and unknown.
//
// An entry that carries its own `category` keeps it. Otherwise the first rule
// of kCategoryRules that matches names it: rules look at the allocation's
// frames (Python frame names and paths, C++ frame names) and at the
// record_function annotations active on its device when it was allocated.
// The rules are data, so the README's table is this table.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

enum class Category : uint8_t {
  kParameter,
  kOptimizerState,
  kGradient,
  kActivation,
  kTemporary,
  kInput,
  kAutogradDetail,
  kCommunication,
  kWorkspace,
  kUnknown,
};
inline constexpr size_t kCategoryCount = 10;

std::string_view category_name(Category category);
// PyTorch's spelling ("optimizer_state", "OPTIMIZER_STATE", ...).
std::optional<Category> parse_category(std::string_view name);

// One rule: exactly one of the match fields is set.
struct CategoryRule {
  Category category;
  std::string_view annotation;  // substring of an annotation active at the allocation
  std::string_view frame_name;  // a Python frame with exactly this name
  std::string_view path_part;   // a Python frame whose path (either separator) contains this
  std::string_view cpp_part;    // a C++ frame whose name contains this
  std::string_view evidence;    // why the rule holds, for the README
};

// In order: the first match wins.
std::span<const CategoryRule> category_rules();

class Categorizer {
 public:
  explicit Categorizer(const Snapshot& snapshot);
  // The category of the allocation made by trace entry `event`.
  Category of(uint64_t event, StackId stack);
  // From the frames alone (blocks of the segments, which have no event).
  Category of_stack(StackId stack);

 private:
  // Bit k set: frame rule k matches one of the stack's frames.
  uint64_t frame_rule_matches(StackId stack);
  [[nodiscard]] bool annotation_active(size_t rule, int device, int64_t time_us) const;

  const Snapshot& snapshot_;
  std::vector<uint64_t> matches_by_stack_;
  std::vector<bool> computed_;
  // Per annotation rule and device: sorted START and END times of the
  // matching annotations (active at t: more STARTs than ENDs at or before t).
  struct Intervals {
    int device = 0;
    std::vector<int64_t> starts;
    std::vector<int64_t> ends;
  };
  std::vector<std::vector<Intervals>> by_rule_;
};

}  // namespace memsnap
