// Attribution of an allocation to a source line: the "source key" of a stack.
//
// Two rules. memsnap's default (v2) names the user's code: the first Python
// frame outside PyTorch, Triton, the Python runtime, torch.compile's
// generated code and the helper packages (kHelperPackages: einops and the
// like), `<module>` and notebook cells included; with --root, the first such
// frame under the user's folder, before the others. With none, the autograd
// node of a backward-pass allocation, then the first Python library frame,
// then the first C++ frame that is not capture or allocator machinery. The
// reference rule (--keys reference) is the reference scripts' own, reproduced
// exactly for people comparing against their output.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "memsnap/model.h"
#include "util/pattern.h"

namespace memsnap {

enum class KeyRule : uint8_t {
  kUserCode,   // v2, the default
  kReference,  // the reference scripts' rule
};

// What rows of the source tables stand for. Every group is derived from the
// frames the rule chose, so the rule (--keys, --skip, --keep) applies to all.
enum class GroupBy : uint8_t {
  kSource,          // name@file:line of --frame-depth frames (the default)
  kFile,            // the file of the chosen frame: model.py
  kFunction,        // name@file, all lines of a function together
  kStack,           // every chosen frame, whatever --frame-depth says
  kCategory,        // what kind of memory (analysis/categories.h), not a frame at all
  kUserMetadata,    // the entry's user_metadata (torch.cuda.memory._set_memory_metadata)
  kCompileContext,  // the entry's compile_context (torch.compile)
  kAnnotation,      // the innermost record_function annotation open at the allocation
  kPool,            // the memory pool: default, or a CUDA graph's / MemPool's private pool
};

// What a row of a source table is called in a header: "source", "file",
// "category", ...
std::string_view group_label(GroupBy group);

// The group a name stands for ("source", "file", ..., "pool": the names of
// --group-by and of the Python API's group_by); nullopt for any other.
std::optional<GroupBy> parse_group_by(std::string_view name);

// Groups that are a choice among the key rule's frames (file, function,
// stack), as opposed to the key itself or a property of the entry.
bool group_picks_frames(GroupBy group);

// A user's category rule (--category-rules FILE), before compiling.
struct CategoryRuleSpec {
  enum class Where : uint8_t { kFrame, kCpp, kAnnotation, kMetadata };
  std::string category;  // one of the category names
  Where where = Where::kFrame;
  std::string pattern;  // a regex in RE2 syntax (util/pattern.h)
  int line = 0;         // in the file, for messages
};

struct SourceKeyOptions {
  int depth = 1;  // frames per key, joined with " -> "
  KeyRule rule = KeyRule::kUserCode;
  GroupBy group = GroupBy::kSource;
  // Regexes (RE2 syntax, util/pattern.h) searched in "name@path:line" of each Python frame
  // (path as recorded, any separator). --skip marks matching frames as
  // library code (the user's own wrappers); --keep marks them as the user's
  // (a library the user wants to see); keep wins. v2 only.
  std::vector<std::string> skip;
  std::vector<std::string> keep;
  // --root: folders of the user's own code. The key is the first frame of
  // your code under one of them (site-packages and the other library code
  // inside excepted); your code elsewhere only when none is. A relative
  // folder matches wherever the recording machine kept it. v2 only.
  std::vector<std::string> roots;
  // --category-rules: checked before the built-in table, in file order.
  std::vector<CategoryRuleSpec> category_rules;
};

// How a front end names the options that check_key_options() talks about;
// the defaults name none (the analysis' own words).
struct KeyOptionNames {
  std::string_view group_by = "a grouping";
  std::string_view user_keys = "the user key rule";
  std::string_view skip = "skip pattern";
  std::string_view keep = "keep pattern";
};
// Refuses options no analysis can use, as a bad_parameter Error naming them with
// `names`: a grouping that picks frames under the reference key rule, and a
// skip or keep pattern that is no regular expression. Front ends call it as
// they read the options; SourceKeys refuses the same in its own words.
void check_key_options(const SourceKeyOptions& options, const KeyOptionNames& names = {});

// Reads --category-rules text: one rule per line, `CATEGORY WHERE REGEX`
// (WHERE: frame, cpp, annotation or metadata; '#' starts a comment). Throws
// Error (usage) naming the line of a malformed rule.
std::vector<CategoryRuleSpec> parse_category_rules(std::string_view text, std::string_view file);

// Frame classes, by filename and name.
bool is_cpp_frame(std::string_view filename, int64_t line);
bool is_capture_machinery(std::string_view name);
// The reference's internal frames (its path parts and names).
bool is_reference_internal_frame(std::string_view name, std::string_view filename);
// v2's library code: PyTorch, Triton, the Python standard library,
// torch.compile's generated code, the helper packages, and the reference's
// other internal paths; `/` or `\`.
bool is_library_file(std::string_view filename);
// The standard library by what it is: a file in the interpreter's own lib
// folder (`lib/python3.X/...` on POSIX, `Lib\copy.py` or `lib\json\...` on
// Windows, any case, any installer), never under site-packages or
// dist-packages.
bool is_standard_library_file(std::string_view filename);

// A package whose frames never name an allocation (see kHelperPackages).
struct HelperPackage {
  std::string_view path_part;  // a folder ("einops/") or file of the path, after a '/'
  std::string_view evidence;   // why, for docs/semantics.md
};
std::span<const HelperPackage> helper_packages();
bool is_helper_package_file(std::string_view filename);
// Whether a frame's file lies under a --root folder (see SourceKeyOptions).
bool is_under_root(std::string_view filename, std::string_view root);
// "BmmBackward0" from any spelling of an autograd node's frame
// ("torch::autograd::generated::BmmBackward0::apply(...)",
// "BmmBackward0_apply_functional(...)", "torch::autograd::AccumulateGrad::apply");
// empty when the frame is none.
std::string_view autograd_node_name(std::string_view frame_name);
// A C++ name without its argument list, template arguments and return type:
// "void at::native::gpu_reduce_kernel<float, 4>(at::TensorIterator&)" ->
// "at::native::gpu_reduce_kernel".
std::string trim_cpp_signature(std::string_view name);

// The model line an FX `fx_original_trace` names: its innermost `File "...",
// line N, in name` entry outside library code, as "name@basename:line";
// empty when it names none.
std::string fx_origin(std::string_view original_trace);

// Source keys of one snapshot's stacks, computed once per distinct stack.
class SourceKeys {
 public:
  // Throws Error (usage) for a --skip/--keep pattern that is no regex.
  SourceKeys(const Snapshot& snapshot, const SourceKeyOptions& options);
  // The reference stays valid as long as this object: the cache is a deque,
  // which never moves its elements as it grows.
  const std::string& key(StackId stack);
  // What a free's stack says of the code that freed the block: its key, led
  // by the innermost Python library frame when the key is the user's line
  // below it ("zero_grad@optimizer.py:975 -> train_step@train.py:105": what
  // the user called, and the library code inside it that let the block go).
  // With --group-by file, function or stack, the key alone.
  std::string freeing_code(StackId stack);
  // Whether a frame is the user's code, as the keys decide it (library,
  // C++ and capture frames are not; --keep and --skip have their say).
  bool is_users(FrameId frame) { return classify(frame) >= kOutsideRoot; }

 private:
  // kOutsideRoot: the user's code, but under none of the --root folders.
  enum FrameClass : uint8_t { kUnknown, kCpp, kMachinery, kLibrary, kOutsideRoot, kUser };
  FrameClass classify(FrameId id);
  std::string compute(StackId stack);
  std::string compute_reference(StackId stack) const;
  [[nodiscard]] std::string render(FrameId id) const;
  // The group name of the frames a rule chose (innermost first).
  [[nodiscard]] std::string group(std::span<const FrameId> chosen) const;

  const Snapshot& snapshot_;
  SourceKeyOptions options_;
  std::vector<Pattern> skip_;
  std::vector<Pattern> keep_;
  std::vector<FrameClass> frame_class_;                    // by frame id, computed on first use
  absl::flat_hash_map<uint32_t, std::string> fx_origins_;  // frame id -> the line FX names
  std::deque<std::string> cache_;                          // by stack id
  std::vector<bool> computed_;
};

inline constexpr std::string_view kNoFrames = "<no frames>";

}  // namespace memsnap
