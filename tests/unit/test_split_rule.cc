// The allocator's rounding and split rules, as the replay applies them to
// blocks the dump does not show: PyTorch's round_size and should_split, with
// the settings allocator_settings records.
#include <gtest/gtest.h>

#include <limits>

#include <nlohmann/json.hpp>

#include "analysis/core/allocator_state.h"
#include "analysis/core/pytorch_allocator_policy.h"
#include "snapshot/allocator_settings.h"

namespace memsnap {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The rule from settings as a file holds them: JSON text through the decoder
// (text that is not JSON decodes as no settings).
SplitRule split_rule_from_json(const char* text) {
  return split_rule_from_settings(
      decode_allocator_settings(nlohmann::ordered_json::parse(text, nullptr, false)));
}

TEST(SplitRule, DefaultRoundsTo512BytesAndSplitsByPool) {
  const SplitRule rule;
  EXPECT_EQ(pytorch::carved_block_size(1, 0, rule), 512u);
  EXPECT_EQ(pytorch::carved_block_size(513, 0, rule), 1024u);
  // Small pool: the rest is split off when at least 512 bytes remain.
  EXPECT_EQ(pytorch::carved_block_size(1000, 2 * kMiB, rule), 1024u);
  EXPECT_EQ(pytorch::carved_block_size(1000, 1024 + 511, rule), 1024u + 511);
  // Large pool: only when more than 1 MiB remains.
  EXPECT_EQ(pytorch::carved_block_size(4 * kMiB, 5 * kMiB, rule), 5 * kMiB);
  EXPECT_EQ(pytorch::carved_block_size(4 * kMiB, 5 * kMiB + 512, rule), 4 * kMiB);
}

TEST(SplitRule, MaxSplitSizeKeepsLargeBlocksWhole) {
  const SplitRule rule = split_rule_from_json(R"({"max_split_size": 33554432})");
  EXPECT_EQ(rule.max_split_size, 32 * kMiB);
  EXPECT_EQ(pytorch::carved_block_size(40 * kMiB, 200 * kMiB, rule),
            200 * kMiB);  // >= 32 MiB: whole
  EXPECT_EQ(pytorch::carved_block_size(20 * kMiB, 200 * kMiB, rule), 20 * kMiB);  // below it: split
  EXPECT_EQ(split_rule_from_json(R"({"max_split_size": -1})").max_split_size, UINT64_MAX);
  // Expandable segments split like the small pool whatever max_split_size says.
  SplitRule expandable = rule;
  expandable.expandable = true;
  EXPECT_EQ(pytorch::carved_block_size(40 * kMiB, 200 * kMiB, expandable), 40 * kMiB);
}

TEST(SplitRule, PowerOfTwoDivisions) {
  // PyTorch's documentation: with 4 divisions a 1200 MiB request rounds to 1280 MiB.
  const SplitRule four = split_rule_from_json(R"({"roundup_power2_divisions": 4})");
  EXPECT_EQ(pytorch::carved_block_size(1200 * kMiB, 0, four), 1280 * kMiB);
  EXPECT_EQ(pytorch::carved_block_size(1024 * kMiB, 0, four), 1024 * kMiB);  // a power of two stays
  EXPECT_EQ(pytorch::carved_block_size(1000, 0, four),
            1024u);  // not above 4 x 512 bytes: 512-byte rule
  // The dict of PyTorch 2.1+, keyed by each interval's start in MiB.
  const SplitRule per_interval = split_rule_from_json(
      R"({"roundup_power2_divisions": {"1": 0, "2": 8, "1024": 2, "bad": 4, "3": 4}})");
  EXPECT_EQ(per_interval.power2_divisions[0], 0u);
  EXPECT_EQ(per_interval.power2_divisions[1], 8u);
  EXPECT_EQ(per_interval.power2_divisions[10], 2u);
  EXPECT_EQ(pytorch::carved_block_size(3 * kMiB - 5, 0, per_interval),
            3 * kMiB);  // 2-4 MiB in 8ths
  EXPECT_EQ(pytorch::carved_block_size(1500 * kMiB, 0, per_interval),
            1536 * kMiB);  // 1-2 GiB in halves
  EXPECT_EQ(pytorch::carved_block_size(kMiB + 1, 0, per_interval),
            kMiB + 512);  // interval "1": off
}

TEST(SplitRule, UnreadableSettingsKeepTheDefaults) {
  for (const char* settings : {"", "[1, 2]", "not json", R"({"max_split_size": "big"})",
                               R"({"roundup_power2_divisions": -3})"}) {
    const SplitRule rule = split_rule_from_json(settings);
    EXPECT_EQ(rule.max_split_size, UINT64_MAX) << settings;
    for (uint64_t d : rule.power2_divisions) EXPECT_EQ(d, 0u) << settings;
  }
}

// The decoder takes the settings as the pickle gives them: integers signed,
// as pickle::to_plain_json makes them (unlike JSON text read back).
TEST(SplitRule, SettingsFromThePickleAreSignedIntegers) {
  nlohmann::ordered_json dict;
  dict["max_split_size"] = int64_t{32} << 20;
  dict["expandable_segments"] = true;
  dict["garbage_collection_threshold"] = 0.6;
  dict["roundup_power2_divisions"] = {{"1", int64_t{4}}, {"2", int64_t{8}}, {"3", int64_t{2}}};
  const AllocatorSettings settings = decode_allocator_settings(dict);
  EXPECT_EQ(settings.max_split_size, uint64_t{32} << 20);
  EXPECT_EQ(settings.expandable_segments, true);
  EXPECT_EQ(settings.garbage_collection_threshold, 0.6);
  ASSERT_EQ(settings.roundup_power2_divisions_by_mib.size(), 2u);  // "3" is not a power of two
  const SplitRule rule = split_rule_from_settings(settings);
  EXPECT_EQ(rule.max_split_size, uint64_t{32} << 20);
  EXPECT_EQ(rule.power2_divisions[0], 4u);
  EXPECT_EQ(rule.power2_divisions[1], 8u);
  EXPECT_EQ(allocator_settings_json(settings), dict);

  dict["max_split_size"] = int64_t{-1};
  dict["roundup_power2_divisions"] = int64_t{4};
  const SplitRule unlimited = split_rule_from_settings(decode_allocator_settings(dict));
  EXPECT_EQ(unlimited.max_split_size, UINT64_MAX);
  for (uint64_t d : unlimited.power2_divisions) EXPECT_EQ(d, 4u);
  EXPECT_TRUE(allocator_settings_json(AllocatorSettings{}).is_null());
}

// Issue 56, finding 9: a setting of another type is read as absent and said
// (expandable_segments 'yes' was off without a word); a threshold of inf
// arrives as the string to_plain_json writes for it and is read as inf.
TEST(AllocatorSettings, ValuesOfAnotherTypeAreNamed) {
  nlohmann::ordered_json dict;
  dict["expandable_segments"] = "yes";
  dict["garbage_collection_threshold"] = "inf";
  dict["max_split_size"] = 1.5;
  dict["roundup_power2_divisions"] = nullptr;  // None: unset, not another type
  const AllocatorSettings settings = decode_allocator_settings(dict);
  EXPECT_FALSE(settings.expandable_segments.has_value());
  EXPECT_EQ(settings.garbage_collection_threshold, std::numeric_limits<double>::infinity());
  const std::vector<std::pair<std::string, std::string>> unread = {
      {"expandable_segments", "\"yes\""}, {"max_split_size", "1.5"}};
  EXPECT_EQ(settings.unread, unread);
}

// least_split_remainder is should_split's threshold, in each pool and setting.
TEST(PytorchPolicy, LeastSplitRemainderIsShouldSplitsThreshold) {
  SplitRule expandable;
  expandable.expandable = true;
  SplitRule capped;
  capped.max_split_size = 64 * kMiB;
  for (const SplitRule& rule : {SplitRule{}, expandable, capped}) {
    for (const bool small : {true, false}) {
      const uint64_t rounded = small ? 4096 : 8 * kMiB;
      const uint64_t least = pytorch::least_split_remainder(small, rule);
      EXPECT_TRUE(pytorch::should_split(small, rounded, least, rule));
      EXPECT_FALSE(pytorch::should_split(small, rounded, least - 1, rule));
    }
  }
  // An oversize request in the large pool is never split.
  EXPECT_FALSE(pytorch::should_split(false, 64 * kMiB, 100 * kMiB, capped));
}

TEST(PytorchPolicy, CachedBlockLimitsForOversizeRequests) {
  SplitRule capped;
  capped.max_split_size = 64 * kMiB;
  EXPECT_TRUE(pytorch::may_take_cached(8 * kMiB, 40 * kMiB, capped));
  EXPECT_FALSE(pytorch::may_take_cached(8 * kMiB, 64 * kMiB, capped));  // oversize for a small one
  EXPECT_TRUE(pytorch::may_take_cached(64 * kMiB, 84 * kMiB - 512, capped));
  EXPECT_FALSE(pytorch::may_take_cached(64 * kMiB, 84 * kMiB, capped));       // 20 MiB larger
  EXPECT_TRUE(pytorch::may_take_cached(8 * kMiB, 1024 * kMiB, SplitRule{}));  // unlimited
}

TEST(PytorchPolicy, SegmentsAndPages) {
  EXPECT_EQ(pytorch::allocation_size(512), 2 * kMiB);
  EXPECT_EQ(pytorch::allocation_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(pytorch::allocation_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(pytorch::allocation_size(10 * kMiB + 512), 12 * kMiB);
  EXPECT_EQ(pytorch::segment_type_of(2 * kMiB), "small");
  EXPECT_EQ(pytorch::segment_type_of(20 * kMiB), "large");
  EXPECT_EQ(pytorch::expandable_page_size(true), 2 * kMiB);
  EXPECT_EQ(pytorch::expandable_page_size(false), 20 * kMiB);
}

// Live requests count nothing for a request of 0 bytes and round_size's
// block otherwise (whatif's floor), never the power-of-two rounding.
TEST(PytorchPolicy, LiveRequestBytes) {
  EXPECT_EQ(pytorch::live_request_bytes(0), 0U);
  EXPECT_EQ(pytorch::round_size(0, SplitRule{}), 512U);
  for (const uint64_t requested : {uint64_t{1}, uint64_t{512}, uint64_t{513}, 3 * kMiB - 5,
                                   std::numeric_limits<uint64_t>::max()}) {
    EXPECT_EQ(pytorch::live_request_bytes(requested), pytorch::round_size(requested, SplitRule{}));
  }
  EXPECT_EQ(pytorch::live_request_bytes(std::numeric_limits<uint64_t>::max()), uint64_t{1} << 62);
}

}  // namespace
}  // namespace memsnap
