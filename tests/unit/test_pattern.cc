#include "util/pattern.h"

#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

TEST(Pattern, SearchesAnywhereAndTakesTheFirstGroup) {
  const Pattern keep("train\\.py:\\d+$", "--keep");
  EXPECT_TRUE(keep.search("step@/home/me/train.py:42"));
  EXPECT_FALSE(keep.search("step@/home/me/train.py:42 "));
  const Pattern rank("rank(\\d+)", "--rank-from");
  EXPECT_EQ(rank.capture_groups(), 1);
  EXPECT_EQ(rank.first_group("node3_rank12.pickle"), "12");
  EXPECT_EQ(rank.first_group("node3.pickle"), std::nullopt);
  const Pattern optional_group("x(\\d+)?", "--rank-from");
  EXPECT_EQ(optional_group.first_group("x"), std::nullopt);  // the group took no part
  const Pattern no_group("rank", "--rank-from");
  EXPECT_EQ(no_group.first_group("rank3"), std::nullopt);
}

TEST(Pattern, IgnoresCaseWhenAsked) {
  EXPECT_TRUE(Pattern("rank", "x", /*ignore_case=*/true).search("RANK3"));
  EXPECT_FALSE(Pattern("rank", "x").search("RANK3"));
}

TEST(Pattern, MatchesBytesThatAreNotUtf8) {
  // Frame names are the file's bytes: a pattern still searches past invalid
  // UTF-8, and a UTF-8 literal matches its own bytes.
  EXPECT_TRUE(Pattern("a.b", "x")
                  .search(std::string("a\xff"
                                      "b")));
  EXPECT_TRUE(Pattern("gr\xc3\xbc\xc3\x9f", "x").search("hallo gr\xc3\xbc\xc3\x9f"));
}

TEST(Pattern, RefusesWhatIsNoRegexOrTooLongWithAUsageError) {
  // bad_parameter (exit 2 at the edge), naming where the pattern came from.
  testing::expect_error_code_saying([] { (void)Pattern("a(", "--skip"); }, ErrorCode::kBadParameter,
                                    "--skip 'a('");
  testing::expect_error_code_saying([] { (void)Pattern("(?=x)", "rules.txt:3:"); },
                                    ErrorCode::kBadParameter, "rules.txt:3: '(?=x)'");
  testing::expect_error_code([] { (void)Pattern(std::string(100000, 'a'), "--skip"); },
                             ErrorCode::kBadParameter);
  EXPECT_NO_THROW((void)Pattern(std::string(Pattern::kMaxLength, 'a'), "--skip"));
}

TEST(Pattern, LinearOnSubjectsThatMadeStdRegexHangOrOverflow) {
  // '^(a+)+$' over 40 characters ran for minutes under std::regex; 'a.*b' over
  // 200k characters overflowed its stack (a hang is caught by the test's
  // timeout).
  EXPECT_FALSE(Pattern("^(a+)+$", "--skip").search(std::string(40, 'a') + "!"));
  EXPECT_FALSE(Pattern("a.*b", "--keep").search(std::string(size_t{4} << 20, 'a')));
  EXPECT_TRUE(Pattern("a.*b", "--keep").search(std::string(size_t{4} << 20, 'a') + "b"));
}

}  // namespace
}  // namespace memsnap
