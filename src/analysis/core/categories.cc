#include "analysis/core/categories.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "analysis/core/optimizer_lifetime.h"
#include "analysis/core/source_key.h"
#include "memsnap/replay.h"

namespace memsnap {
namespace {

constexpr std::array<std::string_view, kCategoryCount> kNames = {
    "parameter",       "optimizer_state", "gradient",  "activation", "temporary", "input",
    "autograd_detail", "communication",   "workspace", "persistent", "unknown",
};

using C = Category;
constexpr bool kRaw = true;
// clang-format off
constexpr std::array kRules = {
    CategoryRule{C::kOptimizerState, "Optimizer.step", {}, {}, {}, false,
                 "allocated while an Optimizer.step#... annotation is active (the profiler marks every step)",
                 "optimizer-step-mark"},
    CategoryRule{C::kOptimizerState, {}, {}, "torch/optim/", {}, false,
                 "allocated by torch.optim (state tensors such as exp_avg, exp_avg_sq)",
                 "torch-optim-frame"},
    CategoryRule{C::kGradient, {}, {}, {}, "AccumulateGrad", false,
                 "allocated by the AccumulateGrad node, which writes .grad", "accumulate-grad"},
    CategoryRule{C::kGradient, "Optimizer.zero_grad", {}, {}, {}, false,
                 "allocated while Optimizer.zero_grad is active (set_to_none=False refills .grad)",
                 "zero-grad-mark"},
    CategoryRule{C::kCommunication, "nccl:", {}, {}, {}, false,
                 "allocated during a collective (record_function names such as nccl:all_reduce)",
                 "nccl-mark"},
    CategoryRule{C::kCommunication, {}, {}, "torch/distributed/", {}, false,
                 "allocated by torch.distributed (buckets, collectives)",
                 "torch-distributed-frame"},
    CategoryRule{C::kCommunication, {}, {}, {}, "c10d::", false,
                 "allocated by the c10d process group (NCCL buffers)", "c10d-frame"},
    CategoryRule{C::kWorkspace, {}, {}, {}, {}, kRaw,
                 "C++ code took the bytes from the allocator itself, not through a tensor factory or "
                 "storage: a library's or kernel's scratch (cuBLAS and cuBLASLt workspaces, cuDNN "
                 "plans' workspaces, CUB temporary storage, reduction buffers). An op's output, "
                 "cuDNN's and cuBLAS's included, is a tensor and never lands here",
                 "raw-allocator-bytes"},
    CategoryRule{C::kAutogradDetail, {}, {}, {}, "torch::autograd::generated::", false,
                 "allocated by a backward node other than AccumulateGrad: PyTorch's memory profiler "
                 "calls the outputs of backward functions (gradients of activations) "
                 "autograd_detail; the node's own temporaries land here too", "backward-node"},
    CategoryRule{C::kParameter, {}, "_apply", {}, {}, false,
                 "allocated by Module._apply (model.to(), .cuda(), .half()): parameters and buffers moving",
                 "module-apply"},
    CategoryRule{C::kParameter, {}, "load_state_dict", {}, {}, false,
                 "allocated while loading a state dict into the model", "load-state-dict"},
    CategoryRule{C::kParameter, {}, {}, "torch/nn/parameter.py", {}, false,
                 "allocated by torch.nn.Parameter", "nn-parameter"},
    CategoryRule{C::kParameter, {}, {}, "torch/nn/init.py", {}, false,
                 "allocated by parameter initialisation (torch.nn.init)", "nn-init"},
    CategoryRule{C::kInput, {}, {}, "torch/utils/data/", {}, false,
                 "allocated by the data loader (pinned batches, collate)", "data-loader"},
    CategoryRule{C::kActivation, {}, "forward", {}, {}, false,
                 "allocated inside a module's forward (outputs kept for backward, or short-lived)",
                 "forward"},
    CategoryRule{C::kActivation, {}, "_call_impl", {}, {}, false,
                 "allocated inside a module call", "module-call"},
    CategoryRule{C::kParameter, {}, "reset_parameters", {}, {}, false,
                 "allocated by a module's reset_parameters (its weights, made or remade)",
                 "reset-parameters"},
    CategoryRule{C::kParameter, {}, "__init__", {}, {}, false,
                 "allocated in a constructor (__init__) outside any forward: a module's "
                 "parameters and buffers made where the module is built",
                 "constructor"},
};
// Searched from the innermost frame out to the innermost Python frame, each
// frame against every rule (Categorizer::of_free_site).
constexpr std::array kFreeSiteRules = {
    CategoryRule{C::kGradient, {}, "zero_grad", {}, {}, false,
                 "freed by zero_grad() (Optimizer's or Module's): with set_to_none=True, the "
                 "default since PyTorch 2.0, it drops each parameter's .grad", "zero-grad-free"},
    CategoryRule{C::kActivation, {}, "_engine_run_backward", {}, {}, false,
                 "freed while autograd's engine runs the backward pass, which releases each "
                 "node's saved tensors (the forward's activations) once the node has run",
                 "backward-pass-free"},
    CategoryRule{C::kActivation, {}, {}, "torch/autograd/__init__.py", {}, false,
                 "freed inside torch.autograd.backward (older PyTorch calls the engine from here)",
                 "autograd-backward-free"},
    CategoryRule{C::kActivation, {}, {}, {}, "torch::autograd::Engine", false,
                 "freed by autograd's engine (a C++ stack without the Python frames above it)",
                 "autograd-engine-free"},
    CategoryRule{C::kTemporary, {}, {}, "torch/optim/", {}, false,
                 "freed inside a torch.optim step: its optimizers update their state in place, "
                 "so what a step frees are its own intermediates", "optimizer-step-free"},
};
// Then, anywhere in the stack: what the freeing code ran inside.
constexpr std::array kFreeContextRules = {
    CategoryRule{C::kActivation, {}, "forward", {}, {}, false,
                 "freed while a module's forward runs: a forward frees intermediates it made "
                 "itself (what it keeps for backward is freed in the backward pass), and the "
                 "allocation rules call what a forward allocates activation", "forward-free"},
    CategoryRule{C::kActivation, {}, "_call_impl", {}, {}, false,
                 "freed inside a module call (the same, for modules whose forward has another name)",
                 "module-call-free"},
};
// What no rule of frames says: an entry's own category, the user's rules,
// an allocation's life against the optimizer's steps (optimizer_lifetime.h),
// memory persisting from before the trace, and nothing at all.
enum class Derived : uint8_t {
  kEntryCategory,
  kUserRule,
  kFreedInItsStep,
  kOutlivesItsStep,
  kFreedInLaterStep,
  kBeforeTraceFreedInStep,
  kPersistentTraining,
  kPersistent,
  kNoRule,
  kNoFrames,
};
constexpr std::array kDerivedEvidence = {
    CategoryEvidence{"entry-category", C::kUnknown,
                     "the trace entry carries its own category"},
    CategoryEvidence{"user-rule", C::kUnknown, "a rule of --category-rules"},
    CategoryEvidence{"freed-in-its-step", C::kTemporary,
                     "allocated inside an optimizer step and freed before the step ended: the "
                     "step's own intermediates (torch's foreach and fused updates make one per "
                     "parameter group); PyTorch's memory profiler calls them TEMPORARY"},
    CategoryEvidence{"outlives-its-step", C::kOptimizerState,
                     "allocated inside an optimizer step and still live after it ended (or at "
                     "the trace's end): state the optimizer keeps, such as Adam's exp_avg and "
                     "exp_avg_sq or momentum buffers"},
    CategoryEvidence{"freed-in-later-step", C::kOptimizerState,
                     "live across an optimizer step's start and freed inside the step: state "
                     "the step replaces"},
    CategoryEvidence{"before-trace-freed-in-step", C::kOptimizerState,
                     "allocated before the trace and freed inside an optimizer step that began in "
                     "the trace, so it lived across the step's start: state the step replaces (an "
                     "optimizer that assigns new moments each step)"},
    CategoryEvidence{"persistent-training", C::kPersistent,
                     "live since before recording began, with no frames, never freed in the "
                     "trace, in a run whose trace has optimizer steps: likely the weights and "
                     "the optimizer's state (and gradients kept across steps)"},
    CategoryEvidence{"persistent", C::kPersistent,
                     "live since before recording began, with no frames, never freed in the "
                     "trace; the trace has no optimizer step: likely weights and buffers"},
    CategoryEvidence{"no-rule", C::kUnknown,
                     "no rule matched its frames, annotations or metadata (code outside any "
                     "module, optimizer, data loader or backward pass, such as a script's top level)"},
    CategoryEvidence{"no-frames", C::kUnknown, "the entry has no frames and nothing else names it"},
};
// clang-format on
static_assert(kRules.size() <= 64, "frame rule matches are a 64-bit mask");

// Frames that say how the stack was captured, then the allocator's own
// (matched in names without their argument lists): the frame past them is
// the code that asked for the bytes.
constexpr std::array kCaptureFrameParts = {
    std::string_view("unwind"),
    std::string_view("CapturedTraceback"),
    std::string_view("gather_with_cpp"),
};
constexpr std::array kAllocatorFrameParts = {
    std::string_view("CachingAllocator"),  // CUDACachingAllocator, HIPCachingAllocator, raw_alloc
    std::string_view("PluggableAllocator"),
    std::string_view("c10::cuda::"),
    std::string_view("c10::hip::"),
};
// Code that makes a tensor's storage: at::detail::empty_generic and every
// other factory (empty_strided, empty_cuda, ...), c10::StorageImpl,
// resize_bytes_cuda. The bytes a factory takes are a tensor, whichever op
// asked for it.
constexpr std::array kTensorMakerParts = {
    std::string_view("empty"),
    std::string_view("Storage"),
    std::string_view("resize"),
};

bool contains_any(std::string_view text, std::span<const std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [text](std::string_view part) {
    return text.find(part) != std::string_view::npos;
  });
}

// True when the allocator's caller is C++ code that is no tensor maker: the
// bytes are raw scratch (cuBLAS's getNewWorkspace, cuDNN's run_conv_plan,
// CUB's temporary storage). A stack that does not show the allocator and its
// caller (Python frames only, unsymbolised frames) never is.
bool takes_raw_bytes(const Snapshot& snapshot, std::span<const FrameId> frames) {
  bool past_allocator = false;
  for (FrameId id : frames) {
    const Frame& frame = snapshot.frames.get(id);
    if (!is_cpp_frame(snapshot.strings.get(frame.filename), frame.line)) return false;
    const std::string name = trim_cpp_signature(snapshot.strings.get(frame.name));
    if (contains_any(name, kCaptureFrameParts)) continue;
    if (contains_any(name, kAllocatorFrameParts)) {
      past_allocator = true;
      continue;
    }
    if (name.empty() || name == "??") return false;  // unsymbolised: nothing to go on
    return past_allocator && !contains_any(name, kTensorMakerParts);
  }
  return false;
}

bool matches_frame(const CategoryRule& rule, std::string_view name, std::string_view path,
                   bool cpp) {
  if (!rule.cpp_part.empty()) return cpp && name.find(rule.cpp_part) != std::string_view::npos;
  if (cpp) return false;
  if (!rule.frame_name.empty()) return name == rule.frame_name;
  if (!rule.path_part.empty()) return path.find(rule.path_part) != std::string_view::npos;
  return false;
}

}  // namespace

std::string_view category_name(Category category) {
  return kNames[static_cast<size_t>(category)];
}

std::optional<Category> parse_category(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (lower == kNames[i]) return static_cast<Category>(i);
  }
  return std::nullopt;
}

// Evidence ids: the rules of kRules, kFreeSiteRules, kFreeContextRules in
// that order, then kDerivedEvidence.
constexpr EvidenceId kFreeSiteBase = kRules.size();
constexpr EvidenceId kFreeContextBase = kFreeSiteBase + kFreeSiteRules.size();
constexpr EvidenceId kDerivedBase = kFreeContextBase + kFreeContextRules.size();
constexpr EvidenceId derived(Derived which) {
  return static_cast<EvidenceId>(kDerivedBase + static_cast<EvidenceId>(which));
}

std::span<const CategoryEvidence> category_evidence() {
  static const std::vector<CategoryEvidence> all = [] {
    std::vector<CategoryEvidence> out;
    for (std::span<const CategoryRule> table :
         {std::span<const CategoryRule>(kRules), std::span<const CategoryRule>(kFreeSiteRules),
          std::span<const CategoryRule>(kFreeContextRules)}) {
      for (const CategoryRule& rule : table) out.push_back({rule.id, rule.category, rule.evidence});
    }
    out.insert(out.end(), kDerivedEvidence.begin(), kDerivedEvidence.end());
    return out;
  }();
  return all;
}

std::optional<EvidenceId> evidence_named(std::string_view id) {
  const std::span<const CategoryEvidence> all = category_evidence();
  const auto found =
      std::find_if(all.begin(), all.end(), [id](const CategoryEvidence& e) { return e.id == id; });
  if (found == all.end()) return std::nullopt;
  return static_cast<EvidenceId>(found - all.begin());
}

bool made_in_optimizer_step(Categorized categorized) {
  if (categorized.evidence < kRules.size())
    return kRules[categorized.evidence].category == Category::kOptimizerState;
  return categorized.evidence == derived(Derived::kFreedInItsStep) ||
         categorized.evidence == derived(Derived::kOutlivesItsStep);
}

std::span<const CategoryRule> category_rules() {
  return kRules;
}

std::span<const CategoryRule> free_site_rules() {
  return kFreeSiteRules;
}

std::span<const CategoryRule> free_context_rules() {
  return kFreeContextRules;
}

template <typename Match>
std::vector<Categorizer::Intervals> Categorizer::intervals_of(const Snapshot& snapshot,
                                                              Match matches) {
  std::vector<Intervals> by_device;
  for (const Annotation& note : snapshot.annotations) {
    if (note.time_us <= 0 || !matches(snapshot.strings.get(note.name))) continue;
    auto found = std::find_if(by_device.begin(), by_device.end(),
                              [&note](const Intervals& i) { return i.device == note.device; });
    if (found == by_device.end()) {
      by_device.push_back(Intervals{note.device, {}, {}});
      found = by_device.end() - 1;
    }
    if (note.stage == Stage::kStart) found->starts.push_back(note.time_us);
    if (note.stage == Stage::kEnd) found->ends.push_back(note.time_us);
  }
  for (Intervals& intervals : by_device) {
    std::sort(intervals.starts.begin(), intervals.starts.end());
    std::sort(intervals.ends.begin(), intervals.ends.end());
  }
  return by_device;
}

Categorizer::Categorizer(const Snapshot& snapshot, std::span<const CategoryRuleSpec> user_rules)
    : snapshot_(snapshot), by_rule_(kRules.size()) {
  for (size_t k = 0; k < kRules.size(); ++k) {
    if (kRules[k].annotation.empty()) continue;
    by_rule_[k] = intervals_of(snapshot, [&k](std::string_view name) {
      return name.find(kRules[k].annotation) != std::string_view::npos;
    });
  }
  for (const CategoryRuleSpec& spec : user_rules) {
    UserRule rule{parse_category(spec.category).value_or(Category::kUnknown),
                  static_cast<uint8_t>(spec.where),
                  Pattern(spec.pattern, "--category-rules"),
                  {}};
    if (spec.where == CategoryRuleSpec::Where::kAnnotation) {
      rule.intervals = intervals_of(
          snapshot, [&rule](std::string_view name) { return rule.pattern.search(name); });
    }
    user_rules_.push_back(std::move(rule));
  }
  for (const DeviceTrace& trace : snapshot.devices) {
    if (trace.end > trace.begin) traces_.push_back(trace);
  }
}

// The device whose trace holds `event`: a search among the non-empty traces,
// which lie in file order (a file may list devices by the hundred thousand).
int Categorizer::device_of(uint64_t event) const {
  const auto after =
      std::upper_bound(traces_.begin(), traces_.end(), event,
                       [](uint64_t at, const DeviceTrace& trace) { return at < trace.begin; });
  if (after == traces_.begin()) return 0;
  const DeviceTrace& trace = *(after - 1);
  return event < trace.end ? trace.device : 0;
}

uint64_t Categorizer::frame_rule_matches(StackId stack) {
  if (stack.value >= matches_by_stack_.size()) {
    matches_by_stack_.resize(stack.value + 1, 0);
    computed_.resize(stack.value + 1, false);
  }
  if (computed_[stack.value]) return matches_by_stack_[stack.value];
  uint64_t mask = 0;
  std::span<const FrameId> frames = snapshot_.stacks.get(stack);
  if (takes_raw_bytes(snapshot_, frames)) {
    for (size_t k = 0; k < kRules.size(); ++k) {
      if (kRules[k].raw_bytes) mask |= uint64_t{1} << k;
    }
  }
  for (FrameId id : frames) {
    const Frame& frame = snapshot_.frames.get(id);
    std::string_view name = snapshot_.strings.get(frame.name);
    std::string path(snapshot_.strings.get(frame.filename));
    std::replace(path.begin(), path.end(), '\\', '/');
    const bool cpp = is_cpp_frame(path, frame.line);
    for (size_t k = 0; k < kRules.size(); ++k) {
      if (matches_frame(kRules[k], name, path, cpp)) mask |= uint64_t{1} << k;
    }
  }
  matches_by_stack_[stack.value] = mask;
  computed_[stack.value] = true;
  return mask;
}

bool Categorizer::active(const std::vector<Intervals>& by_device, int device, int64_t time_us) {
  for (const Intervals& intervals : by_device) {
    if (intervals.device != device) continue;
    auto started = std::upper_bound(intervals.starts.begin(), intervals.starts.end(), time_us) -
                   intervals.starts.begin();
    auto ended = std::upper_bound(intervals.ends.begin(), intervals.ends.end(), time_us) -
                 intervals.ends.begin();
    return started > ended;
  }
  return false;
}

Categorizer::Categorizer(Categorizer&&) noexcept = default;
Categorizer::~Categorizer() = default;

const OptimizerLifetimes& Categorizer::lifetimes() {
  if (!lifetimes_) lifetimes_ = std::make_unique<OptimizerLifetimes>(snapshot_);
  return *lifetimes_;
}

Categorized Categorizer::classify(uint64_t event, StackId stack) {
  const EventColumns& events = snapshot_.events;
  if (auto own = events.category.find(event); own != events.category.end()) {
    // Once per distinct text: entries may share one long string.
    const auto [at, added] = own_category_.try_emplace(own->second);
    if (added) at->second = parse_category(snapshot_.strings.get(own->second));
    if (at->second) return {*at->second, derived(Derived::kEntryCategory)};
  }
  const int64_t time_us = event < events.count() ? events.time_us[event] : 0;
  const int device = device_of(event);
  if (auto chosen = user_category(event, stack, device, time_us))
    return {*chosen, derived(Derived::kUserRule)};
  const uint64_t frames = frame_rule_matches(stack);
  for (size_t k = 0; k < kRules.size(); ++k) {
    const bool matched = kRules[k].annotation.empty()
                             ? (frames & (uint64_t{1} << k)) != 0
                             : time_us > 0 && active(by_rule_[k], device, time_us);
    if (!matched) continue;
    if (kRules[k].category == Category::kOptimizerState && event != kNoEvent) {
      // Made in an optimizer step: its life says whether the step kept it.
      switch (lifetimes().of_allocation(event)) {
        case StepLifetime::kFreedInItsStep:
          return {Category::kTemporary, derived(Derived::kFreedInItsStep)};
        case StepLifetime::kOutlivesItsStep:
          return {Category::kOptimizerState, derived(Derived::kOutlivesItsStep)};
        case StepLifetime::kFreedInLaterStep:
        case StepLifetime::kNone: break;
      }
    }
    return {kRules[k].category, static_cast<EvidenceId>(k)};
  }
  if (event != kNoEvent && lifetimes().of_allocation(event) == StepLifetime::kFreedInLaterStep) {
    return {Category::kOptimizerState, derived(Derived::kFreedInLaterStep)};
  }
  return {Category::kUnknown, derived(stack.valid() ? Derived::kNoRule : Derived::kNoFrames)};
}

uint64_t Categorizer::user_frame_rule_matches(StackId stack) {
  if (user_rules_.empty()) return 0;
  if (stack.value >= user_matches_by_stack_.size()) {
    user_matches_by_stack_.resize(stack.value + 1, 0);
    user_computed_.resize(stack.value + 1, false);
  }
  if (user_computed_[stack.value]) return user_matches_by_stack_[stack.value];
  uint64_t mask = 0;
  for (FrameId id : snapshot_.stacks.get(stack)) {
    const Frame& frame = snapshot_.frames.get(id);
    std::string_view name = snapshot_.strings.get(frame.name);
    std::string_view path = snapshot_.strings.get(frame.filename);
    const bool cpp = is_cpp_frame(path, frame.line);
    const std::string subject =
        cpp ? std::string(name) : fmt::format("{}@{}:{}", name, path, frame.line);
    for (size_t k = 0; k < user_rules_.size(); ++k) {
      const auto where = static_cast<CategoryRuleSpec::Where>(user_rules_[k].where);
      const bool applies =
          cpp ? where == CategoryRuleSpec::Where::kCpp : where == CategoryRuleSpec::Where::kFrame;
      if (applies && user_rules_[k].pattern.search(subject)) mask |= uint64_t{1} << k;
    }
  }
  user_matches_by_stack_[stack.value] = mask;
  user_computed_[stack.value] = true;
  return mask;
}

// Bit k set: metadata rule k matches the text. Each rule runs once per
// distinct text, however many entries share it.
uint64_t Categorizer::metadata_rule_matches(StringId text) {
  const auto [at, added] = metadata_matches_.try_emplace(text, 0);
  if (!added) return at->second;
  const std::string_view subject = snapshot_.strings.get(text);
  for (size_t k = 0; k < user_rules_.size(); ++k) {
    if (static_cast<CategoryRuleSpec::Where>(user_rules_[k].where) ==
            CategoryRuleSpec::Where::kMetadata &&
        user_rules_[k].pattern.search(subject)) {
      at->second |= uint64_t{1} << k;
    }
  }
  return at->second;
}

std::optional<Category> Categorizer::user_category(uint64_t event, StackId stack, int device,
                                                   int64_t time_us) {
  if (user_rules_.empty()) return std::nullopt;
  const uint64_t frames = user_frame_rule_matches(stack);
  for (size_t k = 0; k < user_rules_.size(); ++k) {
    const UserRule& rule = user_rules_[k];
    switch (static_cast<CategoryRuleSpec::Where>(rule.where)) {
      case CategoryRuleSpec::Where::kFrame:
      case CategoryRuleSpec::Where::kCpp:
        if ((frames & (uint64_t{1} << k)) != 0) return rule.category;
        break;
      case CategoryRuleSpec::Where::kAnnotation:
        if (time_us > 0 && active(rule.intervals, device, time_us)) return rule.category;
        break;
      case CategoryRuleSpec::Where::kMetadata:
        if (event == kNoEvent) break;
        if (auto found = snapshot_.events.user_metadata.find(event);
            found != snapshot_.events.user_metadata.end() &&
            (metadata_rule_matches(found->second) & (uint64_t{1} << k)) != 0) {
          return rule.category;
        }
        break;
    }
  }
  return std::nullopt;
}

Categorized Categorizer::classify_stack(StackId stack) {
  if (auto chosen = user_category(kNoEvent, stack, 0, 0))
    return {*chosen, derived(Derived::kUserRule)};
  const uint64_t frames = frame_rule_matches(stack);
  for (size_t k = 0; k < kRules.size(); ++k) {
    if (kRules[k].annotation.empty() && (frames & (uint64_t{1} << k)) != 0) {
      return {kRules[k].category, static_cast<EvidenceId>(k)};
    }
  }
  return {Category::kUnknown, derived(stack.valid() ? Derived::kNoRule : Derived::kNoFrames)};
}

Categorized Categorizer::classify_held_block(StackId stack) {
  if (stack.valid()) return classify_stack(stack);
  return {Category::kPersistent,
          derived(lifetimes().any_step() ? Derived::kPersistentTraining : Derived::kPersistent)};
}

Categorized Categorizer::classify_free_site(uint64_t free_event, StackId free_stack) {
  if (free_stack.value >= free_site_by_stack_.size())
    free_site_by_stack_.resize(free_stack.value + 1, 0);
  EvidenceId& known = free_site_by_stack_[free_stack.value];
  if (known == 0) known = static_cast<EvidenceId>(free_site_evidence(free_stack) + 1);
  const EvidenceId site = static_cast<EvidenceId>(known - 1);
  const Category category = category_evidence()[site].category;
  // What the freeing code's frames guess (a torch.optim step frees its own
  // intermediates) gives way to what the time says: freed in a step that
  // began after the trace did, the memory lived across the step's start.
  if ((category == Category::kUnknown || category == Category::kTemporary) &&
      lifetimes().freed_across_step_start(free_event)) {
    return {Category::kOptimizerState, derived(Derived::kBeforeTraceFreedInStep)};
  }
  return {category, site};
}

EvidenceId Categorizer::free_site_evidence(StackId free_stack) const {
  // Only the code that let the block go decides: the C++ frames inside the
  // innermost Python frame, and that frame. Outer frames are what called it
  // (a user's optimizer subclass runs inside torch.optim's step wrapper, yet
  // what its own line frees is its state).
  for (FrameId id : snapshot_.stacks.get(free_stack)) {
    const Frame& frame = snapshot_.frames.get(id);
    std::string_view name = snapshot_.strings.get(frame.name);
    std::string path(snapshot_.strings.get(frame.filename));
    std::replace(path.begin(), path.end(), '\\', '/');
    const bool cpp = is_cpp_frame(path, frame.line);
    auto rule =
        std::find_if(kFreeSiteRules.begin(), kFreeSiteRules.end(),
                     [&](const CategoryRule& r) { return matches_frame(r, name, path, cpp); });
    if (rule != kFreeSiteRules.end())
      return static_cast<EvidenceId>(kFreeSiteBase + (rule - kFreeSiteRules.begin()));
    if (!cpp) break;
  }
  for (FrameId id : snapshot_.stacks.get(free_stack)) {
    const Frame& frame = snapshot_.frames.get(id);
    const bool cpp = is_cpp_frame(snapshot_.strings.get(frame.filename), frame.line);
    std::string_view name = snapshot_.strings.get(frame.name);
    auto rule =
        std::find_if(kFreeContextRules.begin(), kFreeContextRules.end(),
                     [&](const CategoryRule& r) { return matches_frame(r, name, {}, cpp); });
    if (rule != kFreeContextRules.end())
      return static_cast<EvidenceId>(kFreeContextBase + (rule - kFreeContextRules.begin()));
  }
  return derived(free_stack.valid() ? Derived::kNoRule : Derived::kNoFrames);
}

}  // namespace memsnap
