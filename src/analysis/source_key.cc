#include "analysis/source_key.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>

#include "memsnap/error.h"

namespace memsnap {
namespace {

constexpr std::array kInternalPathParts = {
    std::string_view("/torch/"),
    std::string_view("/torch_"),
    std::string_view("torch/nn/modules/module.py"),
    std::string_view("torch/autograd/"),
    std::string_view("torch/amp/"),
    std::string_view("torch/cuda/"),
    std::string_view("torch/distributed/"),
    std::string_view("/cuda/"),
    std::string_view("/hydra/"),
    std::string_view("/python3."),
    std::string_view("/importlib/"),
    std::string_view("/runpy.py"),
};

constexpr std::array kInternalNames = {
    std::string_view("<module>"),   std::string_view("<lambda>"),
    std::string_view("_call_impl"), std::string_view("_wrapped_call_impl"),
    std::string_view("inner"),
};

// C++ frames that only say how the stack was captured or how the allocator
// works; they never explain who allocated.
constexpr std::array kMachineryParts = {
    std::string_view("unwind"),
    std::string_view("CapturedTraceback"),
    std::string_view("gather_with_cpp"),
    std::string_view("CachingAllocator"),
    std::string_view("at::_ops"),
    std::string_view("c10::impl"),
    std::string_view("_PyEval_"),
    std::string_view("PyObject_"),
    std::string_view("_PyObject_"),
    std::string_view("PyEval_"),
    std::string_view("_PyFunction_"),
    std::string_view("PyVectorcall"),
    std::string_view("_start"),
    std::string_view("__libc_start"),
    std::string_view("c10::cuda::"),
    std::string_view("c10::Dispatcher"),
    std::string_view("c10::BoxedKernel"),
    std::string_view("c10::KernelFunction"),
    std::string_view("torch::autograd::THPVariable_"),
    std::string_view("cfunction_"),
    std::string_view("method_vectorcall"),
    std::string_view("_Py"),
    std::string_view("at::detail::"),
    std::string_view("at::empty"),
    std::string_view("at::native::empty"),
    std::string_view("create_out("),
    std::string_view("set_output_raw_strided"),
    std::string_view("TensorIteratorBase::"),
    std::string_view("torch::autograd::Engine::"),
    std::string_view("torch::autograd::Node::"),
    std::string_view("thread_init"),
    std::string_view("execute_native_thread_routine"),
    std::string_view("pthread_"),
    std::string_view("clone"),
};

// Backward-thread allocations have no Python frame; the autograd node that ran
// (e.g. MeanBackward0) is the best name for them.
constexpr std::string_view kAutogradNode = "torch::autograd::generated::";

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string_view basename(std::string_view path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool is_internal_frame(std::string_view name, std::string_view filename) {
  for (std::string_view part : kInternalPathParts) {
    if (filename.find(part) != std::string_view::npos) return true;
  }
  for (std::string_view internal : kInternalNames) {
    if (name == internal) return true;
  }
  return false;
}

bool is_cpp_frame(std::string_view filename, int64_t line) {
  if (filename.empty() || filename == "??") return true;
  if (ends_with(filename, ".py")) return false;
  if (filename.front() == '<') return false;  // <string>, <frozen runpy>, <eval_with_key>
  for (std::string_view suffix :
       {".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".so"}) {
    if (ends_with(filename, suffix)) return true;
  }
  return line == 0;
}

bool is_capture_machinery(std::string_view name) {
  for (std::string_view part : kMachineryParts) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

SourceKeys::SourceKeys(const Snapshot& snapshot, int depth)
    : snapshot_(snapshot),
      depth_(depth < 1 ? 1 : depth),
      cache_(snapshot.stacks.size() + 1),
      computed_(snapshot.stacks.size() + 1, false) {}

const std::string& SourceKeys::key(StackId stack) {
  if (stack.value >= snapshot_.stacks.size() + 1)
    throw Error("stack id out of range of this snapshot");
  if (stack.value >= cache_.size()) {
    cache_.resize(stack.value + 1);
    computed_.resize(stack.value + 1, false);
  }
  if (!computed_[stack.value]) {
    cache_[stack.value] = compute(stack);
    computed_[stack.value] = true;
  }
  return cache_[stack.value];
}

std::string SourceKeys::render(FrameId id) const {
  const Frame& frame = snapshot_.frames.get(id);
  return fmt::format("{}@{}:{}", snapshot_.strings.get(frame.name),
                     basename(snapshot_.strings.get(frame.filename)), frame.line);
}

// The reference rule (skip internal frames, keep the first `depth`, fall back
// to the first frames) applied to Python frames only; C++ frames count only on
// a stack with no Python frame at all, and then not the capture machinery.
std::string SourceKeys::compute(StackId stack) const {
  std::span<const FrameId> frames = snapshot_.stacks.get(stack);
  if (frames.empty()) return std::string(kNoFrames);
  std::vector<FrameId> python;
  std::vector<FrameId> user;
  std::vector<FrameId> cpp_meaningful;
  for (FrameId id : frames) {
    const Frame& frame = snapshot_.frames.get(id);
    std::string_view name = snapshot_.strings.get(frame.name);
    std::string_view filename = snapshot_.strings.get(frame.filename);
    if (is_cpp_frame(filename, frame.line)) {
      if (!is_capture_machinery(name)) cpp_meaningful.push_back(id);
      continue;
    }
    python.push_back(id);
    if (!is_internal_frame(name, filename)) user.push_back(id);
  }
  // An autograd node explains a C++-only stack better than the op it called.
  auto node = std::find_if(cpp_meaningful.begin(), cpp_meaningful.end(), [this](FrameId id) {
    return snapshot_.strings.get(snapshot_.frames.get(id).name).find(kAutogradNode) !=
           std::string_view::npos;
  });
  if (node != cpp_meaningful.end()) std::rotate(cpp_meaningful.begin(), node, node + 1);
  const std::vector<FrameId>* chosen = &user;
  std::vector<FrameId> all(frames.begin(), frames.end());
  if (chosen->empty()) chosen = &python;
  if (chosen->empty()) chosen = &cpp_meaningful;
  if (chosen->empty()) chosen = &all;
  std::string key;
  size_t take = std::min<size_t>(chosen->size(), static_cast<size_t>(depth_));
  for (size_t i = 0; i < take; ++i) {
    if (i != 0) key += " -> ";
    key += render((*chosen)[i]);
  }
  return key;
}

}  // namespace memsnap
