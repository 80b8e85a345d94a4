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

// Issue 40, finding 18: text that shows a line in another order than it
// reads (U+202E), breaks it for some viewers (U+2028) or hides words (tag
// characters) is escaped in text and in XML as the C0 and C1 controls are;
// other UTF-8 stays.
TEST(Words, SpoofingCharactersAreShown) {
  const std::string evil =
      "train\u202Eyp.exe\u2066x\u2069 \u2028next \u200F\U000E0041\U000E007F caf\u00e9 \u4e2d";
  const std::string shown =
      "train\\u202eyp.exe\\u2066x\\u2069 \\u2028next \\u200f\\U000e0041\\U000e007f caf\u00e9 "
      "\u4e2d";
  EXPECT_EQ(printable(evil), shown);
  EXPECT_EQ(xml_safe(evil), shown);
  EXPECT_EQ(printable("\x1b[31m\u0085"), "\\x1b[31m\\u0085");
  EXPECT_EQ(xml_safe("a\xff"
                     "\xef\xbf\xbe"
                     "b"),  // a stray byte, U+FFFE
            "a\xef\xbf\xbd"
            "\xef\xbf\xbd"
            "b");
  EXPECT_EQ(printable("a\xff"
                      "b"),
            "a\xff"
            "b");  // printable() leaves bytes no sequence holds
}

}  // namespace
}  // namespace memsnap
