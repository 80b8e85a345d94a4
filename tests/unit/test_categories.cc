// Categories: the entry's own category, then the rules table in order.
#include <gtest/gtest.h>

#include "analysis/categories.h"
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
                 !rule.cpp_part.empty();
    EXPECT_EQ(fields, 1);
    EXPECT_FALSE(rule.evidence.empty());
  }
}

}  // namespace
}  // namespace memsnap
