// Memory from before the trace known only by its free: which frames the
// file's frees carry, and what that lets a free say of the memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/core/categories.h"
#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "analysis/reports/event_list.h"
#include "model_builder.h"

namespace memsnap {
namespace {

using testing::ModelBuilder;

constexpr const char* kOptimizer = "/env/site-packages/torch/optim/optimizer.py";
constexpr const char* kTrain = "/home/me/train.py";

struct Files {
  StackId alloc_site;  // where the traced allocation was made
  StackId free_site;   // the code that freed it
  StackId zero_grad;   // Optimizer.zero_grad inside the user's step
};

// One traced alloc/free pair, freed where `pair_free` says, then a free of a
// block allocated before the trace, by zero_grad.
Files build(ModelBuilder& b, bool pair_frees_at_alloc_site) {
  b.device();
  Files f;
  f.alloc_site = b.stack({{"forward", "/home/me/model.py", 12}, {"step", kTrain, 40}});
  f.free_site = b.stack({{"step", kTrain, 41}});
  f.zero_grad = b.stack({{"zero_grad", kOptimizer, 975}, {"step", kTrain, 105}});
  b.alloc(0x1000, 512, 10, f.alloc_site);
  b.free(0x1000, 512, 20, pair_frees_at_alloc_site ? f.alloc_site : f.free_site);
  b.free(0x9000, 4096, 30, f.zero_grad);  // allocated before the trace
  return f;
}

FreeFrames free_frames_of(const Snapshot& model) {
  return analyze_trace(model, model.devices[0], {}).counts.free_frames.kind();
}

TEST(FreeSites, MatchedPairsSayWhoseFramesTheFreesCarry) {
  ModelBuilder all;
  build(all, /*pair_frees_at_alloc_site=*/false);
  EXPECT_EQ(free_frames_of(all.model), FreeFrames::kFree);

  ModelBuilder alloc;
  build(alloc, /*pair_frees_at_alloc_site=*/true);
  EXPECT_EQ(free_frames_of(alloc.model), FreeFrames::kAllocation);

  // No pair with frames at both ends: nothing to tell by.
  ModelBuilder bare;
  bare.device();
  bare.alloc(0x1000, 512, 10);
  bare.free(0x1000, 512, 20, bare.stack({{"step", kTrain, 41}}));
  EXPECT_EQ(free_frames_of(bare.model), FreeFrames::kUnknown);
  const FreeFrameEvidence none;
  EXPECT_EQ(none.kind(), FreeFrames::kUnknown);
  EXPECT_EQ(free_frames_name(FreeFrames::kFree), "free");
}

std::vector<SourceUsage> baseline_rows(const Snapshot& model, GroupBy group) {
  SourceKeyOptions options;
  options.group = group;
  SourceIndex sources(model, options);
  const BaselinePieces pieces = baseline_pieces(model, model.devices[0], free_frames_of(model));
  return baseline_sources(model, pieces, sources).rows(sources);
}

TEST(FreeSites, AFreesFramesNeverNameAnAllocationSiteUnderContextAll) {
  ModelBuilder b;
  build(b, false);
  const std::vector<SourceUsage> rows = baseline_rows(b.model, GroupBy::kSource);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(
      rows[0].source,
      "freed at zero_grad@optimizer.py:975 -> step@train.py:105 (allocated before the trace)");
  EXPECT_EQ(rows[0].kind, KeyKind::kFreeSite);
  EXPECT_EQ(rows[0].bytes, 4096u);
  // Its category comes from the free-site rules (zero_grad drops .grad),
  // never from the allocation rules (torch/optim/ would say optimizer_state).
  const std::vector<SourceUsage> categories = baseline_rows(b.model, GroupBy::kCategory);
  ASSERT_EQ(categories.size(), 1u);
  EXPECT_EQ(categories[0].source, "gradient");
  EXPECT_EQ(categories[0].kind, KeyKind::kOther);
  // Annotations and metadata are the free's, not the allocation's.
  EXPECT_EQ(baseline_rows(b.model, GroupBy::kAnnotation)[0].source, kBeforeTraceGroup);
}

TEST(FreeSites, UnderContextAllocAFreeNamesItsAllocation) {
  ModelBuilder b;
  build(b, true);
  const std::vector<SourceUsage> rows = baseline_rows(b.model, GroupBy::kSource);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].source, "step@train.py:105");
  EXPECT_EQ(rows[0].kind, KeyKind::kAllocationSite);
}

TEST(FreeSites, FreeSiteCategoryRules) {
  ModelBuilder b;
  b.device();
  Categorizer categories(b.model);
  const auto of = [&](std::initializer_list<ModelBuilder::FrameSpec> frames) {
    return category_name(categories.of_free_site(kNoEvent, b.stack(frames)));
  };
  EXPECT_EQ(of({{"zero_grad", "/env/torch/nn/modules/module.py", 2600}, {"step", kTrain, 3}}),
            "gradient");
  EXPECT_EQ(of({{"_engine_run_backward", "/env/torch/autograd/graph.py", 825},
                {"backward", "/env/torch/_tensor.py", 626},
                {"step", kTrain, 9}}),
            "activation");
  EXPECT_EQ(of({{"_multi_tensor_adam", "/env/torch/optim/adam.py", 500}, {"step", kTrain, 9}}),
            "temporary");
  // Only the innermost Python frame is the freeing code: a user's optimizer
  // run by torch.optim's step wrapper frees its own state, not torch's
  // intermediates.
  EXPECT_EQ(of({{"step", "/home/me/my_adamw.py", 73}, {"wrapper", kOptimizer, 533}}), "unknown");
  // Inside a module's forward (anywhere in the stack): the forward's own
  // intermediates.
  EXPECT_EQ(of({{"rotate", "/home/me/model.py", 114},
                {"forward", "/home/me/model.py", 203},
                {"_call_impl", "/env/torch/nn/modules/module.py", 1784}}),
            "activation");
  EXPECT_EQ(of({{"main", kTrain, 1}}), "unknown");
}

TEST(FreeSites, EntriesOfAFreeAreNamedByTheirAllocation) {
  ModelBuilder b;
  build(b, false);
  SourceKeyOptions options;
  SourceIndex sources(b.model, options);
  Categorizer categories(b.model);
  std::vector<std::string> names;
  name_entries(b.model, b.model.devices[0], free_frames_of(b.model), sources, categories,
               [&](uint64_t /*event*/, uint32_t source, Category /*category*/) {
                 names.push_back(sources.name(source));
               });
  const std::vector<std::string> want = {
      "forward@model.py:12",  // alloc
      "forward@model.py:12",  // its free_requested: the allocation's name
      "forward@model.py:12",  // its free_completed
      "freed at zero_grad@optimizer.py:975 -> step@train.py:105 (allocated before the trace)",
      "freed at zero_grad@optimizer.py:975 -> step@train.py:105 (allocated before the trace)",
  };
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace memsnap
