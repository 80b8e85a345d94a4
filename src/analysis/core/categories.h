// What kind of memory an allocation is: PyTorch's memory-profiler categories
// (torch.profiler._memory_profiler.Category) plus memsnap's communication,
// workspace and unknown.
//
// An entry that carries its own `category` keeps it. Otherwise the first rule
// of kCategoryRules that matches names it: rules look at the allocation's
// frames (Python frame names and paths, C++ frame names, and which C++ code
// called the allocator: a tensor factory, or code taking raw scratch bytes)
// and at the record_function annotations active on its device when it was
// allocated. The rules are data, so the table in docs/semantics.md is this table.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "memsnap/model.h"
#include "util/pattern.h"

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
  // memsnap's: live since before recording, with no frames and no free in
  // the trace. Nothing in the file says more than that it persists: in a
  // training run weights, gradients kept across steps and optimizer state.
  kPersistent,
  kUnknown,
};
inline constexpr size_t kCategoryCount = 11;

std::string_view category_name(Category category);
// PyTorch's spelling ("optimizer_state", "OPTIMIZER_STATE", ...).
std::optional<Category> parse_category(std::string_view name);

// One rule: exactly one of the match fields is set.
struct CategoryRule {
  Category category = Category::kUnknown;
  std::string_view annotation;  // substring of an annotation active at the allocation
  std::string_view frame_name;  // a Python frame with exactly this name
  std::string_view path_part;   // a Python frame whose path (either separator) contains this
  std::string_view cpp_part;    // a C++ frame whose name contains this
  // The allocator's caller (the first C++ frame past stack capture and the
  // allocator) is no tensor factory or storage: it took raw bytes.
  bool raw_bytes = false;
  std::string_view evidence;  // why the rule holds, for docs/semantics.md
  std::string_view id;        // short name shown beside a category row (JSON `evidence[].rule`)
};

// Why an allocation got its category: a rule of the tables below, or what
// its lifetime or its place in the file says. Every category a report shows
// carries the ids of its evidence, and the legend under a table explains
// them (category_evidence()[id].text).
struct CategoryEvidence {
  std::string_view id;
  Category category = Category::kUnknown;
  std::string_view text;
};
using EvidenceId = uint16_t;
// Every rule of the three tables (in table order), then the evidence that is
// no rule of frames: an entry's own category, a rule of the user's, an
// allocation's lifetime against the optimizer's steps, memory persisting
// from before the trace, and none.
std::span<const CategoryEvidence> category_evidence();
// The evidence named `id`, or nullopt.
std::optional<EvidenceId> evidence_named(std::string_view id);

struct Categorized {
  Category category = Category::kUnknown;
  EvidenceId evidence = 0;
};
// Whether the evidence places the allocation inside an optimizer step (a
// step's temporaries are `temporary`, yet they say where the code was).
bool made_in_optimizer_step(Categorized categorized);

// In order: the first match wins.
std::span<const CategoryRule> category_rules();

// Rules for memory allocated before the trace and known only by the free of
// its block, whose frames are the freeing code's (analysis/free_frames.h):
// what the code that lets a block go says of what the block held. Frame
// rules only (an annotation open at the free says nothing of the
// allocation), on the innermost Python frame and the C++ frames inside it;
// the first match wins; none: unknown. The allocation rules
// never apply to a free's frames.
std::span<const CategoryRule> free_site_rules();
// Then, when none matched: rules on any frame of the free's stack (the code
// the freeing code ran inside), the first match wins.
std::span<const CategoryRule> free_context_rules();

struct CategoryRuleSpec;   // analysis/core/source_key.h: a user's rule
class OptimizerLifetimes;  // analysis/core/optimizer_lifetime.h

class Categorizer {
 public:
  // user_rules (--category-rules) come before the built-in table.
  explicit Categorizer(const Snapshot& snapshot, std::span<const CategoryRuleSpec> user_rules = {});
  Categorizer(Categorizer&&) noexcept;
  ~Categorizer();

  // The category of the allocation made by trace entry `event`: its own,
  // the user's rules, the table; then its lifetime decides between
  // optimizer state and a step's temporary (optimizer_lifetime.h).
  Categorized classify(uint64_t event, StackId stack);
  Category of(uint64_t event, StackId stack) { return classify(event, stack).category; }
  // From the frames alone (blocks of the segments, which have no event).
  Categorized classify_stack(StackId stack);
  Category of_stack(StackId stack) { return classify_stack(stack).category; }
  // A block of the dump held since before the trace (the trace has entries
  // and never allocated it): its frames, else kPersistent.
  Categorized classify_held_block(StackId stack);
  // Memory from before the trace freed by trace entry `free_event`, from the
  // frames of the code that freed it (free_site_rules; --category-rules,
  // which describe allocations, do not apply) and from when: freed inside an
  // optimizer step that began in the trace, it lived across the step's start.
  Categorized classify_free_site(uint64_t free_event, StackId free_stack);
  Category of_free_site(uint64_t free_event, StackId free_stack) {
    return classify_free_site(free_event, free_stack).category;
  }

 private:
  // Bit k set: frame rule k matches one of the stack's frames.
  uint64_t frame_rule_matches(StackId stack);
  uint64_t user_frame_rule_matches(StackId stack);
  uint64_t metadata_rule_matches(StringId text);
  // The free-site and free-context rules on a free's frames.
  [[nodiscard]] EvidenceId free_site_evidence(StackId free_stack) const;
  [[nodiscard]] int device_of(uint64_t event) const;
  struct Intervals;
  [[nodiscard]] static bool active(const std::vector<Intervals>& by_device, int device,
                                   int64_t time_us);
  [[nodiscard]] std::optional<Category> user_category(uint64_t event, StackId stack, int device,
                                                      int64_t time_us);

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
  // Adds the START/END times of every annotation whose name `matches`.
  template <typename Match>
  static std::vector<Intervals> intervals_of(const Snapshot& snapshot, Match matches);
  std::vector<std::vector<Intervals>> by_rule_;

  struct UserRule {
    Category category;
    uint8_t where;  // CategoryRuleSpec::Where
    Pattern pattern;
    std::vector<Intervals> intervals;  // annotation rules
  };
  std::vector<UserRule> user_rules_;
  // by stack id: evidence id + 1 of the free-site rules (0: not yet computed)
  std::vector<EvidenceId> free_site_by_stack_;
  // The trace's allocations against the optimizer's steps, found on first need.
  const OptimizerLifetimes& lifetimes();
  std::unique_ptr<OptimizerLifetimes> lifetimes_;
  std::vector<uint64_t> user_matches_by_stack_;
  std::vector<bool> user_computed_;
  absl::flat_hash_map<StringId, uint64_t> metadata_matches_;             // by metadata text
  absl::flat_hash_map<StringId, std::optional<Category>> own_category_;  // an entry's category text
  std::vector<DeviceTrace> traces_;  // the non-empty ones, in file order
};

}  // namespace memsnap
