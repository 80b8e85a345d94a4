// The CI gate (`memsnap check`, Python's memsnap.check) for every front end:
// the limits as given (a budget file's, then those given one by one, which
// win), one run or a folder of rank files against its baseline, and the
// report. Writing it (text, JSON, JUnit, ...) and the exit status are the
// front end's.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/reports/check.h"
#include "runs/multi_file.h"

namespace memsnap {

struct CheckRequest {
  std::string current;                       // a snapshot, a summary, or a folder of rank files
  std::string baseline;                      // the same kind of input as current, or empty
  std::string budget;                        // a TOML or JSON file of limits, or empty
  std::map<LimitKind, std::string> amounts;  // "12GiB", "5%", "0.3", "10"
  std::vector<std::pair<std::string, std::string>> categories;  // activation -> "20GiB"
  bool no_oom = false;
  bool allow_unmeasured = false;
};

// The request's limits: the budget file's, then the ones given (a given one
// wins over the file's key), in the order of the limit table, categories
// last. A malformed amount or category is a usage error in `spell`'s words.
std::vector<Limit> limits_of(const CheckRequest& request, const SpellParameter& spell);

// The outcome: one run's report, or a folder's rank by rank.
struct CheckRun {
  std::optional<CheckReport> single;
  std::optional<RankedCheck> ranked;
  [[nodiscard]] bool passed() const {
    return single ? single->failed == 0 : ranked->failed_ranks == 0;
  }
};
// Messages name parameters as listener.spell does.
CheckRun check_run(const CheckRequest& request, const RunInputs& inputs,
                   const RunListener& listener);

}  // namespace memsnap
