// Budget files of `memsnap check`: the limits a team checks into its repo, in
// TOML (read and written with toml++) or JSON. One key per limit, as
// `memsnap check --write-budget` writes them:
//
//   max_peak = "11264MiB"        # sizes with a unit (GiB, GB, MiB, ...) or bytes
//   max_growth = "5%"            # needs --baseline
//   max_fragmentation = 0.3      # a fraction (or "30%")
//   max_unmatched_frees = 0      # a count
//   no_oom = true
//   step_max_peak = "10GiB"
//   [category]
//   activation = "20GiB"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/reports/check.h"

namespace memsnap {

// Throws a usage Error naming the file and the key on anything it does not know.
std::vector<Limit> read_budget(std::string_view text, const std::string& path);

// The TOML of a budget, with a comment saying where it came from.
std::string write_budget_toml(const std::vector<Limit>& limits, const std::string& comment);

// How a limit's threshold is written: "11264MiB", "5%", 0.3, 12, true.
std::string amount_text(const Limit& limit);

}  // namespace memsnap
