#include "cli/report_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <utility>
#include <vector>

#include "cli/output.h"
#include "memsnap/error.h"

namespace memsnap::cli {
namespace {

using service::Parameter;
using service::ParameterKind;
using service::ReportEntry;

// The table's own check of a value's text, as CLI11 runs it while parsing
// (its message then reads "--time: expects a finite number, not 'nan'").
CLI::Validator syntax_of(const Parameter& parameter) {
  return {[&parameter](std::string& text) { return service::syntax_problem(parameter, text); }, ""};
}

void add_parameter(CLI::App& command, const Parameter& parameter, ReportFlags& flags) {
  const std::string flag = service::spelled(parameter, service::Spelling::kFlag);
  const std::string id(parameter.id);
  if (parameter.kind == ParameterKind::kSwitch) {
    command.add_flag(flag, flags.switches[id], std::string(parameter.help));
    return;
  }
  CLI::Option* option = command.add_option(flag, flags.texts[id], std::string(parameter.help))
                            ->check(syntax_of(parameter))
                            ->option_text(std::string(parameter.value_name));
  if (parameter.required) option->required();
}

Runner configure(CLI::App& command, const ReportEntry& entry) {
  struct Flags {
    std::string file;
    std::string other;
    ReportFlags report;
  };
  auto flags = std::make_shared<Flags>();
  add_snapshot_argument(command, flags->file, std::string(entry.file_help));
  if (entry.answer_pair != nullptr) {
    command.add_option("B", flags->other,
                       "A second snapshot: both side by side, sorted by |B - A|");
  }
  add_report_flags(command, entry, flags->report);
  return [flags, &entry] {
    const service::ReportRequest request = report_request(entry, flags->report);
    const CommonOptions& common = flags->report.common;
    if (flags->other.empty()) {
      answer_file(entry, flags->file, request, common);
      return;
    }
    const service::Format format = common.json ? service::Format::kJson : service::Format::kText;
    const std::vector<std::string> files{flags->file, flags->other};
    const auto sessions = open_all(files, common);
    const FileAnalysis& a = analysis_of(*sessions[0], common);
    const FileAnalysis& b = analysis_of(*sessions[1], common);
    write_answer(entry.answer_pair(a, b, request, format), common.json);
  };
}

}  // namespace

void add_report_flags(CLI::App& command, const ReportEntry& entry, ReportFlags& flags) {
  for (const Parameter& parameter : entry.parameters) add_parameter(command, parameter, flags);
  CommonOptions& common = flags.common;
  add_json_flag(command, common);
  add_device_flag(command, common);
  if (entry.uses_steps) add_steps_flag(command, common);
  add_top_flag(command, common, std::string(entry.top_rows), entry.default_top);
  if (entry.uses_keys) add_source_key_flags(command, common);
  add_input_flags(command, common);
}

service::ReportRequest report_request(const ReportEntry& entry, const ReportFlags& flags) {
  std::vector<std::pair<std::string, service::Value>> given;
  for (const Parameter& parameter : entry.parameters) {
    const std::string id(parameter.id);
    if (parameter.kind == ParameterKind::kSwitch) {
      if (flags.switches.at(id)) given.emplace_back(id, true);
      continue;
    }
    const std::optional<std::string>& text = flags.texts.at(id);
    if (text) {
      given.emplace_back(id, service::value_of_text(parameter, *text, service::Spelling::kFlag));
    }
  }
  given.emplace_back("top", int64_t{flags.common.top});
  return service::request_for(entry, given, flags.common.keys, service::Spelling::kFlag);
}

void answer_file(const ReportEntry& entry, const std::string& path,
                 const service::ReportRequest& request, const CommonOptions& common) {
  const auto session = open_session(path, common);
  const FileAnalysis& file = analysis_of(*session, common);
  write_answer(
      entry.answer(file, request, common.json ? service::Format::kJson : service::Format::kText),
      common.json);
}

void write_answer(const service::Answer& answer, bool json) {
  for (const std::string& note : answer.notes) write_note("note: " + note);
  if (json) {
    write_json(answer.json);
  } else {
    write_out(answer.text);
  }
}

Command report_command(std::string_view name) {
  const ReportEntry* entry = service::find_report(name);
  if (entry == nullptr)
    throw Error(ErrorCode::kInternalError, fmt::format("no report named '{}' in the table", name));
  return {entry->name, entry->summary,
          [entry](CLI::App& command) { return configure(command, *entry); }, entry->description,
          entry->example};
}

}  // namespace memsnap::cli
