// Unit tests of the names `memsnap ranks` gives files whose names hold no
// rank number (analysis/ranks: distinguishing_names): short, taken from the
// path, and never the same for two different files, on chosen and on random
// paths.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "analysis/reports/ranks.h"
#include "analysis/reports/run_summary.h"

namespace memsnap {
namespace {

using Names = std::vector<std::string>;

// Every name reads from its path: a part of it, or a head and a tail of it
// around "...".
bool taken_from(const std::string& name, const std::string& path) {
  const size_t dots = name.find("...");
  if (path.find(name) != std::string::npos) return true;
  if (dots == std::string::npos) return false;
  const std::string head = name.substr(0, dots);
  const std::string tail = name.substr(dots + 3);
  const size_t at = path.find(head);
  return at != std::string::npos && path.find(tail, at + head.size()) != std::string::npos;
}

void expect_names_hold(const Names& paths, const Names& names) {
  ASSERT_EQ(names.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_FALSE(names[i].empty()) << paths[i];
    EXPECT_TRUE(taken_from(names[i], paths[i])) << names[i] << " of " << paths[i];
    for (size_t j = 0; j < i; ++j) {
      EXPECT_EQ(names[i] == names[j], paths[i] == paths[j]) << paths[i] << " and " << paths[j];
    }
  }
}

TEST(RankNames, DropTheFoldersAndWordsAllShare) {
  const std::string deep = "/home/someone/experiments/2024-05-01/llama-70b-finetune/snapshots/";
  const Names paths = {deep + "node-alpha/memory_snapshot.pickle",
                       deep + "node-beta/memory_snapshot.pickle",
                       deep + "node-gamma/memory_snapshot.pickle"};
  const Names names = distinguishing_names(paths);
  EXPECT_EQ(names, (Names{"alpha", "beta", "gamma"}));
  expect_names_hold(paths, names);
}

TEST(RankNames, SharedWordsAtTheEndOfFileNames) {
  const Names paths = {"runs/baseline_memory.pickle.gz", "runs/larger_batch_memory.pickle.gz"};
  EXPECT_EQ(distinguishing_names(paths), (Names{"baseline", "larger_batch"}));
}

TEST(RankNames, WordsAreNotCutInside) {
  // "foo" is shared, but not a whole word of both names.
  const Names paths = {"out/foo.pickle", "out/foo2.pickle"};
  EXPECT_EQ(distinguishing_names(paths), (Names{"foo", "foo2"}));
}

TEST(RankNames, AFolderOnlyOnePathHasStays) {
  const Names paths = {"x/a.pickle", "x/y/a.pickle"};
  const Names names = distinguishing_names(paths);
  EXPECT_EQ(names, (Names{"a", "y/a"}));
  expect_names_hold(paths, names);
}

TEST(RankNames, OneFileIsItsFileName) {
  EXPECT_EQ(distinguishing_names({"/a/very/long/folder/final.pickle"}), (Names{"final.pickle"}));
  EXPECT_EQ(distinguishing_names({"final.pickle"}), (Names{"final.pickle"}));
  EXPECT_TRUE(distinguishing_names({}).empty());
}

TEST(RankNames, TheSamePathTwiceIsOneName) {
  const Names paths = {"d/run.pickle", "d/run.pickle"};
  EXPECT_EQ(distinguishing_names(paths), (Names{"run.pickle", "run.pickle"}));
}

TEST(RankNames, LongNamesAreCutInTheMiddleWhereThatKeepsThemApart) {
  const std::string a(120, 'a');
  const std::string b(120, 'b');
  const Names apart = distinguishing_names({"d/" + a + ".pickle", "d/" + b + ".pickle"});
  ASSERT_EQ(apart.size(), 2u);
  EXPECT_LE(apart[0].size(), kMaxFileName);
  EXPECT_NE(apart[0], apart[1]);
  EXPECT_NE(apart[0].find("..."), std::string::npos);

  // Differing only in the middle: cutting it would make them one name, so
  // they stay whole.
  const Names paths = {"d/" + a + "1" + a + ".pickle", "d/" + a + "2" + a + ".pickle"};
  const Names whole = distinguishing_names(paths);
  EXPECT_NE(whole[0], whole[1]);
  expect_names_hold(paths, whole);
}

TEST(RankNames, ACutNameNeverReadsLikeAnotherFilesName) {
  const std::string a(60, 'a');
  const std::string b(60, 'b');
  const std::string cut = a.substr(0, 18) + "..." + b.substr(0, 19);  // what a_b would be cut to
  const Names paths = {"d/" + a + "_" + b, "d/" + cut};
  const Names names = distinguishing_names(paths);
  EXPECT_NE(names[0], names[1]);
  expect_names_hold(paths, names);
}

TEST(RankNames, CutsFallBetweenCharacters) {
  std::string word;
  for (int i = 0; i < 30; ++i) word += "\xC3\xA9";  // é, two bytes each
  const Names names = distinguishing_names({"d/" + word + "x.pickle", "d/y" + word + ".pickle"});
  for (const std::string& name : names) {
    EXPECT_LE(name.size(), kMaxFileName);
    const size_t dots = name.find("...");
    ASSERT_NE(dots, std::string::npos);
    // Neither side of "..." starts or ends inside a two-byte character.
    EXPECT_NE(static_cast<unsigned char>(name[dots - 1]), 0xC3);
    EXPECT_NE(static_cast<unsigned char>(name[dots + 3]) & 0xC0, 0x80);
  }
}

TEST(RankNames, OddPaths) {
  const Names paths = {"", "/", "-", "//", "./a", "a", "a/", "_", "x_"};
  const Names names = distinguishing_names(paths);
  ASSERT_EQ(names.size(), paths.size());
  // Paths that name the same file ("a", "./a", "a/") may share a name; the rest do not.
  std::set<std::string> seen(names.begin(), names.end());
  EXPECT_GE(seen.size(), paths.size() - 2);
  for (const std::string& name : names) EXPECT_FALSE(name.empty());
}

TEST(RankNames, RandomPathsKeepDistinctShortNames) {
  std::mt19937 random(25);
  const std::vector<std::string> words = {"run",   "rank",  "node", "a",    "b",  "memory",
                                          "snap",  "final", "x",    "long", "_",  "-",
                                          "alpha", "beta",  "2024", "data", "exp"};
  for (int round = 0; round < 300; ++round) {
    Names paths;
    const size_t count = 1 + random() % 6;
    for (size_t i = 0; i < count; ++i) {
      std::string path = round % 2 == 0 ? "/shared/prefix/" : "";
      const size_t pieces = 1 + random() % 7;
      for (size_t p = 0; p < pieces; ++p) {
        path += words[random() % words.size()];
        if (random() % 3 == 0) path += '/';
      }
      path += ".pickle";
      paths.push_back(path);
    }
    expect_names_hold(paths, distinguishing_names(paths));
  }
}

TEST(RankNames, OnlyFilesWithoutARankAreNamed) {
  RunSummary numbered;
  numbered.path = "/runs/today/rank_3.pickle";
  numbered.rank = 3;
  RunSummary first;
  first.path = "/runs/today/first_try.pickle";
  RunSummary second;
  second.path = "/runs/today/second_try.pickle";
  const RanksReport report = analyze_ranks({numbered, first, second});
  std::set<std::string> names;
  for (const RankRow& row : report.rows) {
    if (row.rank) {
      EXPECT_TRUE(row.name.empty());
    } else {
      names.insert(row.name);
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"first", "second"}));
}

}  // namespace
}  // namespace memsnap
