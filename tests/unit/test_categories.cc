// Categories: the entry's own category, then the rules table in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "analysis/core/categories.h"
#include "analysis/core/sources.h"
#include "model_builder.h"

namespace memsnap {
namespace {

TEST(Categories, RulesByFramesAnnotationsAndTheEntrysOwn) {
  testing::ModelBuilder b;
  b.device();
  StackId optim = b.stack({{"_multi_tensor_adam", "/x/site-packages/torch/optim/adam.py", 400},
                           {"train", "/home/me/train.py", 9}});
  StackId grad =
      b.stack({{"torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)", "??", 0}});
  StackId backward = b.stack(
      {{"torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)", "??", 0}});
  StackId to_device = b.stack(
      {{"_apply", "C:\\x\\torch\\nn\\modules\\module.py", 900}, {"main", "/home/me/train.py", 3}});
  StackId forward = b.stack({{"forward", "/home/me/model.py", 42}});
  StackId nothing = b.stack({{"helper", "/home/me/util.py", 5}});
  b.alloc(0x10, 64, 100, optim);
  b.alloc(0x20, 64, 110, grad);
  b.alloc(0x30, 64, 120, backward);
  b.alloc(0x40, 64, 130, to_device);
  b.alloc(0x50, 64, 140, forward);
  b.alloc(0x60, 64, 150, nothing);
  b.alloc(0x70, 64, 210, nothing);  // inside Optimizer.step
  b.alloc(0x80, 64, 160, forward);  // carries its own category
  b.model.events.category.emplace(7, b.model.strings.intern("INPUT"));
  b.annotation("Optimizer.step#AdamW.step", Stage::kStart, 200);
  b.annotation("Optimizer.step#AdamW.step", Stage::kEnd, 300);

  Categorizer categories(b.model);
  const auto of = [&](uint64_t event) {
    return category_name(categories.of(event, b.model.events.stack[event]));
  };
  EXPECT_EQ(of(0), "optimizer_state");
  EXPECT_EQ(of(1), "gradient");
  EXPECT_EQ(of(2), "autograd_detail");
  EXPECT_EQ(of(3), "parameter");
  EXPECT_EQ(of(4), "activation");
  EXPECT_EQ(of(5), "unknown");
  EXPECT_EQ(of(6), "optimizer_state");
  EXPECT_EQ(of(7), "input");
  EXPECT_EQ(category_name(categories.of_stack(forward)), "activation");
}

// Frames as recent PyTorch records them with stacks="all", innermost first:
// how the stack was captured, then the allocator.
using Frames = std::vector<testing::ModelBuilder::FrameSpec>;
const Frames kCaptureAndAllocator = {
    {"torch::unwind::unwind()", "??", 0},
    {"torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0},
    {"torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp", 0},
    {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
     "unsigned long, CUstream_st*)",
     "CUDACachingAllocator.cpp", 0},
    {"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", "",
     0},
};
// A tensor factory: the bytes become a tensor's storage.
const Frames kFactory = {
    {"at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, "
     "c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
     "", 0},
    {"at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, "
     "c10::ScalarType, std::optional<c10::MemoryFormat>)",
     "??", 0},
    {"at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, "
     "std::optional<c10::MemoryFormat>)",
     "??", 0},
};
const Frames kForward = {
    {"forward", "/home/me/model.py", 42},
    {"_call_impl", "/x/site-packages/torch/nn/modules/module.py", 1501},
};

Frames concat(std::initializer_list<Frames> parts) {
  Frames all;
  for (const Frames& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// Workspace is what a library takes as scratch; an op's output is a tensor,
// whichever library computed it (cuDNN's and cuBLAS's included).
TEST(Categories, WorkspaceIsRawScratchNeverAnOpsOutput) {
  testing::ModelBuilder b;
  b.device();
  const std::vector<std::pair<std::string, StackId>> cases = {
      // Outputs and copies made through a tensor factory.
      {"activation",
       b.stack(concat({kCaptureAndAllocator,
                       kFactory,
                       {{"at::native::cudnn_convolution(at::Tensor const&, at::Tensor const&, "
                         "c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, long, "
                         "bool, bool, bool)",
                         "??", 0},
                        {"at::(anonymous namespace)::wrapper_CUDA__cudnn_convolution(...)",
                         "RegisterCUDA.cpp", 0}},
                       kForward}))},
      {"activation",
       b.stack(concat({kCaptureAndAllocator,
                       kFactory,
                       {{"at::native::empty_like(at::Tensor const&, ...)", "??", 0},
                        {"at::native::cudnn_batch_norm(at::Tensor const&, at::Tensor const&, "
                         "std::optional<at::Tensor> const&, bool, double, double)",
                         "??", 0}},
                       kForward}))},
      {"activation",
       b.stack(concat(
           {kCaptureAndAllocator,
            kFactory,
            {{"at::native::clone(at::Tensor const&, ...)", "??", 0},
             {"at::native::prepare_batch_matrix_for_cublas(at::Tensor const&, bool&, "
              "long&, bool, long, long)",
              "", 0},
             {"at::native::(anonymous namespace)::baddbmm_out_cuda_impl(...)", "Blas.cpp", 0}},
            kForward}))},
      // A convolution's input gradient: the backward node's output.
      {"autograd_detail",
       b.stack(concat({kCaptureAndAllocator,
                       kFactory,
                       {{"at::native::cudnn_convolution_backward_input(char const*, "
                         "c10::ArrayRef<long>, at::TensorArg const&, at::TensorArg const&)",
                         "", 0},
                        {"torch::autograd::generated::ConvolutionBackward0::apply(std::vector<at::"
                         "Tensor>&&)",
                         "??", 0}}}))},
      // Storage made or grown for a tensor.
      {"activation",
       b.stack(concat({kCaptureAndAllocator,
                       {{"c10::StorageImpl::StorageImpl(c10::StorageImpl::use_byte_size_t, "
                         "c10::SymInt const&, c10::Allocator*, bool)",
                         "", 0}},
                       kForward}))},
      {"activation",
       b.stack(concat({kCaptureAndAllocator,
                       {{"at::native::resize_bytes_cuda(c10::StorageImpl*, unsigned long)", "", 0}},
                       kForward}))},
      // The allocator's caller cannot be read, or the allocator is not in the
      // stack: nothing says the bytes are scratch.
      {"activation", b.stack(concat({kCaptureAndAllocator, {{"??", "??", 0}}, kForward}))},
      {"activation",
       b.stack(
           concat({{{"void at::cuda::blas::gemm_and_bias<float>(bool, bool)", "", 0}}, kForward}))},
      // Python frames only: they never show who called the allocator.
      {"activation", b.stack(kForward)},

      // Scratch taken straight from the allocator.
      {"workspace",
       b.stack(concat(
           {kCaptureAndAllocator,
            {{"at::cuda::getNewWorkspace()", "", 0},
             {"at::cuda::getCurrentCUDABlasHandle()", "??", 0},
             {"void at::cuda::blas::gemm_internal_cublas<float>(char, char, long, long, long, "
              "at::OpMathType<float>::type, float const*, long, float const*, long, "
              "at::OpMathType<float>::type, float*, long)",
              "", 0}},
            kForward}))},
      {"workspace",  // getNewWorkspace inlined into the handle pool
       b.stack(concat(
           {kCaptureAndAllocator, {{"at::cuda::getCurrentCUDABlasHandle()", "??", 0}}, kForward}))},
      {"workspace",  // cuBLASLt
       b.stack(
           concat({kCaptureAndAllocator,
                   {{"void at::cuda::blas::gemm_and_bias<float>(bool, bool, long, long, long, "
                     "at::OpMathType<float>::type, float const*, long, float const*, long, "
                     "float const*, float*, long, at::cuda::blas::GEMMAndBiasActivationEpilogue)",
                     "", 0}},
                   kForward}))},
      {"workspace",  // cuDNN v8 API
       b.stack(concat({kCaptureAndAllocator,
                       {{"at::native::run_conv_plan(cudnnContext*, at::Tensor const&, at::Tensor "
                         "const&, at::Tensor const&, cudnn_frontend::ExecutionPlan const&, "
                         "cudnnBackendDescriptorType_t)",
                         "", 0},
                        {"at::native::run_single_conv(...)", "", 0}},
                       kForward}))},
      {"workspace",  // cuDNN v7 API, through raw_alloc
       b.stack(concat({kCaptureAndAllocator,
                       {{"c10::cuda::CUDACachingAllocator::raw_alloc(unsigned long)", "", 0},
                        {"at::native::(anonymous namespace)::Workspace::Workspace(unsigned long)",
                         "Conv_v7.cpp", 0}},
                       kForward}))},
      {"workspace",  // CUB's temporary storage
       b.stack(concat({kCaptureAndAllocator,
                       {{"void at::cuda::cub::inclusive_scan<long const*, long*, std::plus<long>, "
                         "1073741824>(long const*, long*, std::plus<long>, long)",
                         "", 0}},
                       kForward}))},
      {"workspace",  // a reduction's buffer inside a backward node
       b.stack(concat({kCaptureAndAllocator,
                       {{"void at::native::gpu_reduce_kernel<float, float, 4, "
                         "at::native::MeanOps<float, float, float, float> >(at::TensorIterator&, "
                         "at::native::MeanOps<float, float, float, float> const&, float)",
                         "", 0},
                        {"torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor>"
                         "&&)",
                         "??", 0}}}))},
  };
  for (size_t i = 0; i < cases.size(); ++i) b.alloc(0x1000 * (i + 1), 512, 0, cases[i].second);
  Categorizer categories(b.model);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(category_name(categories.of(i, cases[i].second)), cases[i].first);
    // Blocks of the segments (no event) follow the same rules.
    EXPECT_EQ(category_name(categories.of_stack(cases[i].second)), cases[i].first);
  }
}

TEST(Categories, NamesRoundTrip) {
  for (size_t i = 0; i < kCategoryCount; ++i) {
    auto category = static_cast<Category>(i);
    EXPECT_EQ(parse_category(category_name(category)), category);
  }
  EXPECT_EQ(parse_category("OPTIMIZER_STATE"), Category::kOptimizerState);
  EXPECT_FALSE(parse_category("weights").has_value());
  // Every rule matches on exactly one thing and says why.
  for (const CategoryRule& rule : category_rules()) {
    int fields = !rule.annotation.empty() + !rule.frame_name.empty() + !rule.path_part.empty() +
                 !rule.cpp_part.empty() + rule.raw_bytes;
    EXPECT_EQ(fields, 1);
    EXPECT_FALSE(rule.evidence.empty());
  }
}

}  // namespace
}  // namespace memsnap

namespace memsnap {
namespace {

using Frames2 = std::vector<testing::ModelBuilder::FrameSpec>;
const Frames2 kAdamForeach = {{"_multi_tensor_adam", "/x/site-packages/torch/optim/adam.py", 791},
                              {"step", "/x/site-packages/torch/optim/adam.py", 230},
                              {"wrapper", "/x/site-packages/torch/optim/optimizer.py", 487},
                              {"train", "/home/me/train.py", 40}};
const Frames2 kModelForward = {{"forward", "/home/me/model.py", 12},
                               {"train", "/home/me/train.py", 38}};

std::string_view evidence_id(const Categorized& c) {
  return category_evidence()[c.evidence].id;
}

// Without annotations, a step is the run of entries inside torch/optim:
// what it allocates and frees before the next allocation outside it is a
// temporary; what it keeps is optimizer state.
TEST(Categories, OptimizerStepTemporariesAndStateFromFrames) {
  testing::ModelBuilder b;
  b.device();
  const StackId forward = b.stack(kModelForward);
  const StackId adam = b.stack(kAdamForeach);
  const StackId freed_by_adam = b.stack({{"_multi_tensor_adam", "/x/torch/optim/adam.py", 800},
                                         {"wrapper", "/x/torch/optim/optimizer.py", 487}});
  b.alloc(0x100, 64, 10, forward);  // 0
  b.alloc(0x200, 64, 20, adam);     // 1: freed in the step
  b.alloc(0x300, 64, 21, adam);     // 2: kept (exp_avg)
  b.free(0x200, 64, 22, freed_by_adam);
  b.alloc(0x400, 64, 30, forward);  // 5: the next forward ends the step
  b.alloc(0x500, 64, 40, adam);     // 6: next step, freed only after it ended
  b.alloc(0x600, 64, 50, forward);  // 7
  b.free(0x500, 64, 51, b.stack(kModelForward));

  Categorizer categories(b.model);
  const auto of = [&](uint64_t event) {
    return categories.classify(event, b.model.events.stack[event]);
  };
  EXPECT_EQ(of(1).category, Category::kTemporary);
  EXPECT_EQ(evidence_id(of(1)), "freed-in-its-step");
  EXPECT_EQ(of(2).category, Category::kOptimizerState);
  EXPECT_EQ(evidence_id(of(2)), "outlives-its-step");
  EXPECT_EQ(of(6).category, Category::kOptimizerState);
  EXPECT_EQ(of(0).category, Category::kActivation);
  EXPECT_EQ(evidence_id(of(0)), "forward");
  // A stack alone (a block of the dump) has no lifetime: the frame rule.
  EXPECT_EQ(evidence_id(categories.classify_stack(adam)), "torch-optim-frame");
}

// With Optimizer.step#... marks, the step is the time between START and END.
TEST(Categories, OptimizerStepTemporariesFromAnnotations) {
  testing::ModelBuilder b;
  b.device();
  const StackId helper = b.stack({{"update", "/home/me/my_optim.py", 7}});
  b.alloc(0x10, 64, 110, helper);  // 0: inside the mark, freed inside
  b.alloc(0x20, 64, 120, helper);  // 1: inside, freed after the END
  b.free(0x10, 64, 130, helper);
  b.free(0x20, 64, 400, helper);
  b.annotation("Optimizer.step#MyOpt.step", Stage::kStart, 100);
  b.annotation("Optimizer.step#MyOpt.step", Stage::kEnd, 300);
  Categorizer categories(b.model);
  EXPECT_EQ(categories.of(0, helper), Category::kTemporary);
  EXPECT_EQ(categories.of(1, helper), Category::kOptimizerState);
}

// Parameters made where a module is built, and what a forward inside a
// constructor makes is still an activation.
TEST(Categories, ParametersMadeInConstructors) {
  testing::ModelBuilder b;
  b.device();
  const StackId init = b.stack({{"__init__", "/home/me/embedding.py", 19},
                                {"__init__", "/home/me/model.py", 30},
                                {"<module>", "/home/me/train.py", 5}});
  const StackId reset = b.stack(
      {{"reset_parameters", "/home/me/linear.py", 44}, {"<module>", "/home/me/train.py", 6}});
  const StackId forward_in_init =
      b.stack({{"forward", "/home/me/model.py", 50}, {"__init__", "/home/me/model.py", 33}});
  b.alloc(0x10, 64, 1, init);
  b.alloc(0x20, 64, 2, reset);
  b.alloc(0x30, 64, 3, forward_in_init);
  Categorizer categories(b.model);
  EXPECT_EQ(evidence_id(categories.classify(0, init)), "constructor");
  EXPECT_EQ(categories.of(0, init), Category::kParameter);
  EXPECT_EQ(categories.of(1, reset), Category::kParameter);
  EXPECT_EQ(categories.of(2, forward_in_init), Category::kActivation);
}

// Memory from before the trace: a user's optimizer (run by torch's step
// wrapper) freeing its old moments inside a step that began in the trace
// frees optimizer state; a frameless block held from before the trace is
// persistent, never unknown.
TEST(Categories, BeforeTraceMemoryFromItsLifetime) {
  testing::ModelBuilder b;
  b.device();
  const StackId forward = b.stack(kModelForward);
  const StackId user_step = b.stack({{"step", "/home/me/optimizer.py", 73},
                                     {"_use_grad", "/x/torch/optim/optimizer.py", 79},
                                     {"wrapper", "/x/torch/optim/optimizer.py", 487},
                                     {"train", "/home/me/train.py", 41}});
  b.alloc(0x100, 64, 10, forward);                 // 0
  b.alloc(0x200, 64, 20, user_step);               // 1: the new moment
  b.free(0x900, 4096, 21, user_step);              // 2, 3: the old one, from before the trace
  b.free(0x800, 4096, 5, b.stack(kModelForward));  // 4, 5: no step
  Categorizer categories(b.model);
  const Categorized freed = categories.classify_free_site(3, user_step);
  EXPECT_EQ(freed.category, Category::kOptimizerState);
  EXPECT_EQ(evidence_id(freed), "before-trace-freed-in-step");
  EXPECT_EQ(categories.of(1, user_step), Category::kOptimizerState);
  EXPECT_EQ(categories.of_free_site(5, b.model.events.stack[5]), Category::kActivation);
  const Categorized held = categories.classify_held_block(StackId{});
  EXPECT_EQ(held.category, Category::kPersistent);
  EXPECT_EQ(evidence_id(held), "persistent-training");
  EXPECT_EQ(categories.classify_held_block(forward).category, Category::kActivation);
}

// A trace that starts inside a step cannot say the memory it frees there
// lived across the step's start: the free site's own rule holds.
TEST(Categories, StepOpenAtTheTraceStartProvesNothing) {
  testing::ModelBuilder b;
  b.device();
  const StackId adam = b.stack(kAdamForeach);
  b.free(0x900, 4096, 1, adam);  // 0, 1
  b.alloc(0x100, 64, 2, adam);
  Categorizer categories(b.model);
  EXPECT_EQ(categories.of_free_site(1, adam), Category::kTemporary);
  const Categorized held = categories.classify_held_block(StackId{});
  EXPECT_EQ(held.category, Category::kPersistent);
}

// A category reached by several pieces of evidence is one row whose
// evidence splits its bytes and counts exactly.
TEST(Categories, ARowsEvidenceAddsUpToTheRow) {
  testing::ModelBuilder b;
  b.device();
  const StackId adam = b.stack(kAdamForeach);
  const StackId init = b.stack({{"__init__", "/home/me/model.py", 3}});
  const StackId apply = b.stack({{"_apply", "/x/torch/nn/modules/module.py", 900}});
  b.alloc(0x10, 100, 1, init);
  b.alloc(0x20, 50, 2, apply);
  b.alloc(0x30, 64, 3, adam);  // kept: optimizer state
  b.alloc(0x40, 32, 4, adam);  // freed in its step: temporary
  b.free(0x40, 32, 5, adam);
  SourceKeyOptions by_category;
  by_category.group = GroupBy::kCategory;
  SourceIndex categories(b.model, by_category);
  const std::vector<uint64_t> at = {4, b.model.events.count()};
  const auto rows = live_by_source(b.model, b.model.devices[0], categories, at);
  const auto find = [](const std::vector<SourceUsage>& table, std::string_view name) {
    return std::find_if(table.begin(), table.end(),
                        [name](const SourceUsage& row) { return row.source == name; });
  };
  const auto parameter = find(rows[1], "parameter");
  ASSERT_NE(parameter, rows[1].end());
  EXPECT_EQ(parameter->bytes, 150u);
  ASSERT_EQ(parameter->evidence.size(), 2u);
  EXPECT_EQ(category_evidence()[parameter->evidence[0].evidence].id, "constructor");
  EXPECT_EQ(parameter->evidence[0].bytes + parameter->evidence[1].bytes, parameter->bytes);
  EXPECT_EQ(parameter->evidence[0].count + parameter->evidence[1].count, parameter->count);
  // At the step's peak the temporary is live, and named so.
  const auto temporary = find(rows[0], "temporary");
  ASSERT_NE(temporary, rows[0].end());
  EXPECT_EQ(temporary->bytes, 32u);
  EXPECT_EQ(find(rows[1], "temporary"), rows[1].end());
  EXPECT_EQ(find(rows[1], "optimizer_state")->bytes, 64u);
}

TEST(Categories, EveryEvidenceHasAUniqueIdAndAText) {
  std::vector<std::string_view> ids;
  for (const CategoryEvidence& e : category_evidence()) {
    EXPECT_FALSE(e.id.empty());
    EXPECT_FALSE(e.text.empty()) << e.id;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), e.id), 0) << e.id;
    ids.push_back(e.id);
    EXPECT_EQ(evidence_named(e.id), static_cast<EvidenceId>(ids.size() - 1));
  }
  EXPECT_FALSE(evidence_named("no-such-rule").has_value());
}

}  // namespace
}  // namespace memsnap
