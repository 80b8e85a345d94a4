// Source attribution: the reference rule on Python frames, and memsnap's rule
// that C++ frames never win while a Python frame remains.
#include <gtest/gtest.h>

#include "analysis/source_key.h"
#include "model_builder.h"

namespace memsnap {
namespace {

TEST(SourceKey, SkipsInternalFramesAndKeepsDepth) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"_call_impl", "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 1501},
               {"forward", "/home/me/model.py", 42},
               {"train", "/home/me/train.py", 7},
               {"<module>", "/home/me/train.py", 99}});
  SourceKeys depth1(b.model, 1);
  EXPECT_EQ(depth1.key(stack), "forward@model.py:42");
  SourceKeys depth2(b.model, 2);
  EXPECT_EQ(depth2.key(stack), "forward@model.py:42 -> train@train.py:7");
}

TEST(SourceKey, FallsBackToFirstFramesWhenAllAreInternal) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"empty", "/x/torch/functional.py", 10}, {"inner", "/x/torch/amp/a.py", 3}});
  SourceKeys keys(b.model, 1);
  EXPECT_EQ(keys.key(stack), "empty@functional.py:10");
}

TEST(SourceKey, CppFramesNeverWinOverPython) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"torch::unwind::unwind()", "??", 0},
               {"torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0},
               {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "", 0},
               {"at::native::empty_cuda", "/pytorch/aten/src/ATen/native/cuda/EmptyTensor.cpp", 0},
               {"_PyEval_EvalFrameDefault", "??", 0},
               {"forward", "/home/me/model.py", 42}});
  SourceKeys keys(b.model, 1);
  EXPECT_EQ(keys.key(stack), "forward@model.py:42");
}

TEST(SourceKey, CppOnlyStackSkipsCaptureMachinery) {
  testing::ModelBuilder b;
  StackId stack = b.stack({{"torch::unwind::unwind()", "??", 0},
                           {"c10::cuda::CUDACachingAllocator::malloc", "??", 0},
                           {"at::native::empty_cuda", "EmptyTensor.cpp", 0},
                           {"at::native::cat_out_cuda", "Shape.cu", 0}});
  SourceKeys keys(b.model, 1);
  EXPECT_EQ(keys.key(stack), "at::native::cat_out_cuda@Shape.cu:0");
  StackId machinery_only = b.stack({{"torch::unwind::unwind()", "??", 0}});
  EXPECT_EQ(keys.key(machinery_only), "torch::unwind::unwind()@??:0");
}

TEST(SourceKey, BackwardThreadStackNamesTheAutogradNode) {
  testing::ModelBuilder b;
  StackId stack = b.stack(
      {{"torch::unwind::unwind()", "??", 0},
       {"at::detail::empty_cuda(c10::ArrayRef<long>)", "??", 0},
       {"at::(anonymous namespace)::wrapper_CUDA_div_Tensor(at::Tensor const&)", "RegisterCUDA.cpp",
        0},
       {"torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor>&&)", "??", 0},
       {"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
        "??", 0}});
  SourceKeys keys(b.model, 2);
  EXPECT_EQ(
      keys.key(stack),
      "torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor>&&)@??:0 -> "
      "at::(anonymous namespace)::wrapper_CUDA_div_Tensor(at::Tensor const&)@RegisterCUDA.cpp:0");
}

TEST(SourceKey, NoFrames) {
  testing::ModelBuilder b;
  SourceKeys keys(b.model, 1);
  EXPECT_EQ(keys.key(StackId{}), "<no frames>");
}

// key() hands out references; they must survive later calls that add to
// the cache (a hash map would rehash under them: found under ASan).
TEST(SourceKey, KeysStayValidWhileTheCacheGrows) {
  testing::ModelBuilder b;
  std::vector<StackId> stacks;
  for (int i = 0; i < 2000; ++i) {
    stacks.push_back(b.stack({{"f" + std::to_string(i), "/home/me/model.py", i + 1}}));
  }
  SourceKeys keys(b.model, 1);
  std::vector<const std::string*> held;
  for (StackId stack : stacks) held.push_back(&keys.key(stack));
  for (size_t i = 0; i < stacks.size(); ++i) {
    EXPECT_EQ(*held[i], "f" + std::to_string(i) + "@model.py:" + std::to_string(i + 1));
  }
  // Stacks interned after the keys were made are keyed too.
  StackId later = b.stack({{"late", "/home/me/late.py", 5}});
  EXPECT_EQ(keys.key(later), "late@late.py:5");
  EXPECT_EQ(*held[0], "f0@model.py:1");
}

}  // namespace
}  // namespace memsnap
