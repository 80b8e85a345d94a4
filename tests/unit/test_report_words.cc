// Small pieces of wording that reports and printed command lines rely on.
#include <gtest/gtest.h>

#include "analysis/core/findings.h"
#include "pickle/value.h"
#include "report/findings.h"
#include "report/format.h"
#include "report/source_tables.h"

namespace memsnap {
namespace {

TEST(Words, CountDiffIsSignedAndSeparated) {
  EXPECT_EQ(count_diff(6526, 7591), "+1,065");
  EXPECT_EQ(count_diff(5226, 1889), "-3,337");
  EXPECT_EQ(count_diff(7, 7), "0");
  EXPECT_EQ(count_diff(0, UINT64_MAX), "+18,446,744,073,709,551,615");  // no signed overflow
}

TEST(Words, ShellQuoteMakesPastableWords) {
  EXPECT_EQ(shell_quote("runs/rank_0.pickle"), "runs/rank_0.pickle");
  EXPECT_EQ(shell_quote("my run.pickle"), "'my run.pickle'");
  EXPECT_EQ(shell_quote("it's.pickle"), "'it'\\''s.pickle'");
  EXPECT_EQ(shell_quote("$(rm -rf).pickle"), "'$(rm -rf).pickle'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(Words, KindsTakeTheRightArticle) {
  EXPECT_EQ(pickle::kind_with_article(pickle::Kind::kObject), "an object");
  EXPECT_EQ(pickle::kind_with_article(pickle::Kind::kList), "a list");
}

TEST(Words, OtherDevicesSaysWhichAndWhy) {
  Finding f = finding::OtherDevices{std::nullopt, 0, DeviceReason::kMostEntries, {0, 1, 2}, {1}};
  EXPECT_EQ(phrase(f),
            "this report is device 0 (no OOM; it has the most trace entries); the file also has "
            "data on devices 1, 2 (choose one with --device N); out of memory on device 1: see "
            "--device 1");
  Finding side = finding::OtherDevices{Side::kB, 1, DeviceReason::kOutOfMemory, {0, 1}, {}};
  EXPECT_EQ(phrase(side),
            "B: this report is device 1 (it ran out of memory); the file also has data on device "
            "0 (choose one with --device N)");
}

TEST(Words, DeviceChoiceNoteNamesTheFile) {
  DeviceChoice choice{1, DeviceReason::kOutOfMemory, {0, 1, 2}, {1}};
  EXPECT_EQ(device_choice_note("run.pickle", choice),
            "run.pickle: this report is device 1 (it ran out of memory); the file also has data "
            "on devices 0, 2 (choose one with --device N)");
}

}  // namespace
}  // namespace memsnap
