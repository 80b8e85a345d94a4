// The commands made from the report table (service/report_table.h): one per
// entry, with its parameters as flags, the shared flags it uses, its
// description and example in its --help.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cli/command.h"
#include "cli/options.h"
#include "service/report_table.h"

namespace CLI {
class App;
}  // namespace CLI

namespace memsnap::cli {

// What the command line gave for an entry's parameters, as text, and the
// shared flags.
struct ReportFlags {
  std::map<std::string, std::optional<std::string>, std::less<>> texts;
  std::map<std::string, bool, std::less<>> switches;
  CommonOptions common;
};

// Declares the entry's parameters and the shared flags it uses (--json,
// --device, --steps, --top, the source-key flags, the input flags).
void add_report_flags(CLI::App& command, const service::ReportEntry& entry, ReportFlags& flags);
// The checked request (a bad_parameter Error naming the flag).
service::ReportRequest report_request(const service::ReportEntry& entry, const ReportFlags& flags);
// One file's report: loaded, analysed on --device, answered in the format
// asked for; the notes on stderr, then the report on stdout.
void answer_file(const service::ReportEntry& entry, const std::string& path,
                 const service::ReportRequest& request, const CommonOptions& common);
// The notes on stderr, then the report on stdout.
void write_answer(const service::Answer& answer, bool json);

// The command of the entry named `name` (a report of one file, or two where
// the entry compares two).
Command report_command(std::string_view name);

}  // namespace memsnap::cli
