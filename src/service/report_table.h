// The report table: every report of one snapshot, one entry each. An entry
// holds what a front end needs to offer the report (its name, what it shows,
// an example, its parameters with their limits, which shared options apply)
// and computes it (its analysis, then its renderer). The command line makes
// one command per entry, Python one method, the server one route; none of
// them declares a parameter, checks a limit or phrases a message again.
//
// Adding a report: write its analysis (analysis/reports/) and renderers
// (report/), then one entry in report_table.cc; `memsnap NAME`,
// `Snapshot.NAME()` and the docs' option table follow from it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/reports/oom_report.h"
#include "service/parameters.h"

namespace memsnap::service {

enum class Format : uint8_t { kText, kJson };

// A request for one report, checked: its parameters, the rows per table and
// how allocations are named.
struct ReportRequest {
  Arguments arguments;
  int top = 10;
  SourceKeyOptions keys;
  Spelling spelling = Spelling::kFlag;  // how notes name a parameter
};

// A report, and what it says besides (one line each, without "note: ": the
// command line prints them on stderr, Python warns them). The implicit move
// is noexcept; clang-tidy cannot see through nlohmann::json's invariant
// assertions.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Answer {
  std::string text;             // Format::kText
  nlohmann::ordered_json json;  // Format::kJson
  std::vector<std::string> notes;
};

struct ReportEntry {
  std::string_view name;         // the command: "replay-to-time"; Python: replay_to_time
  std::string_view summary;      // one line, in `memsnap --help`
  std::string_view description;  // what it shows and when to use it (COMMAND --help, docs)
  std::string_view example;      // one command line
  std::string_view file_help;    // the positional FILE
  std::vector<Parameter> parameters;
  int default_top = 10;
  std::string_view top_rows;  // what --top counts: "sources", "rows per table"
  bool uses_keys = true;      // allocations are named: --frame-depth, --keys, --group-by, ...
  bool uses_steps = true;     // --steps
  std::string_view schema;    // tests/schema/<schema>.schema.json
  // Rules across parameters (one of --step and --all-steps); may be null.
  void (*check_together)(const Arguments& arguments, Spelling spelling) = nullptr;
  Answer (*answer)(const FileAnalysis& file, const ReportRequest& request, Format format) = nullptr;
  // Two files side by side (replay-to-time A B); null where the report
  // reads one file.
  Answer (*answer_pair)(const FileAnalysis& a, const FileAnalysis& b, const ReportRequest& request,
                        Format format) = nullptr;
};

// Every report of one snapshot, in the order `memsnap --help` lists them.
const std::vector<ReportEntry>& report_table();
// The entry named `name` (the command's name, or Python's with '_'), or null.
const ReportEntry* find_report(std::string_view name);

// --top, as every entry has it: a whole number >= 0.
const Parameter& top_parameter();
// The entry's parameter `id` (top included), or null.
const Parameter* find_parameter(const ReportEntry& entry, std::string_view id);

// The request for `entry` from values a front end gathered (id, value):
// each checked (parameters.h), "top" among them or the entry's default, the
// rules across parameters applied. Throws a bad_parameter Error.
ReportRequest request_for(const ReportEntry& entry,
                          const std::vector<std::pair<std::string, Value>>& given,
                          SourceKeyOptions keys, Spelling spelling);

// The OomOptions of a request for `oom` (the command line's folder of ranks
// reads them too).
OomOptions oom_options(const ReportRequest& request);

}  // namespace memsnap::service
