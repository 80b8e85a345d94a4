// memsnap summarize FILE...: the compact per-file summary that `ranks` and
// `check --baseline` read (the map step over many ranks).
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "formats/summary_json.h"
#include "memsnap/error.h"
#include "report/summaries_render.h"

namespace memsnap::cli {

namespace {

// DIR/<file name less its extensions>.summary.json
std::string summary_path(const std::string& folder, const std::string& input) {
  std::string name = std::filesystem::path(input).filename().string();
  for (const char* suffix : {".gz", ".zst", ".pickle", ".pkl", ".pt", ".json"}) {
    const std::string_view ext(suffix);
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
  }
  if (name.empty() || name == "-") name = "stdin";
  return (std::filesystem::path(folder) / (name + ".summary.json")).string();
}

// Where each input's summary goes (empty: stdout), the folder created; two
// inputs to one summary, or a summary over an input, are refused first.
std::vector<std::string> summary_outputs(const std::string& folder,
                                         const std::vector<std::string>& paths) {
  std::vector<std::string> outputs(paths.size());
  if (folder.empty()) return outputs;
  std::map<std::string, std::string> taken;
  for (size_t i = 0; i < paths.size(); ++i) {
    outputs[i] = summary_path(folder, paths[i]);
    auto [it, fresh] = taken.emplace(outputs[i], paths[i]);
    if (!fresh) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{} and {} would both be summarised to {}: rename one, or summarise "
                              "them to different folders",
                              it->second, paths[i], outputs[i]));
    }
    // r0.pickle's summary is r0.summary.json: never over an input.
    refuse_overwriting_inputs(outputs[i], paths);
  }
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw Error(ErrorCode::kOutputFailed,
                fmt::format("cannot create {}: {}", folder, error.message()));
  }
  return outputs;
}

}  // namespace

Command summarize_command() {
  return {"summarize",
          "A compact summary per file (JSON, a few KB): the map step for many ranks, and a "
          "baseline for CI",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::vector<std::string> files;
              std::string output;
              SummaryInputs inputs;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshots_argument(
                command, flags->files,
                "Snapshots (.pickle, .gz, .zst, - for stdin) or folders of them");
            command
                .add_option("-o,--output", flags->output,
                            "Folder to write one FILE.summary.json per input to (created if "
                            "missing); without it the summaries go to stdout")
                ->option_text("DIR");
            add_json_flag(command, flags->inputs.common);
            add_device_flag(command, flags->inputs.common);
            add_steps_flag(command, flags->inputs.common);
            add_source_key_flags(command, flags->inputs.common);
            add_input_flags(command, flags->inputs.common);
            add_summary_input_flags(command, flags->inputs);
            return [flags] {
              const std::vector<std::string> paths = expand_inputs(flags->files);
              const std::vector<std::string> outputs = summary_outputs(flags->output, paths);
              std::vector<SummaryOutcome> outcomes = summarize_all(paths, flags->inputs);
              std::vector<RunSummary> done;
              std::vector<std::string> written;
              nlohmann::ordered_json documents = nlohmann::ordered_json::array();
              std::vector<std::string> failures;
              for (size_t i = 0; i < outcomes.size(); ++i) {
                if (!outcomes[i].summary) {
                  failures.push_back(outcomes[i].error);
                  continue;
                }
                nlohmann::ordered_json document = render_summary_json(*outcomes[i].summary);
                if (!outputs[i].empty()) write_file(outputs[i], json_text(document, -1) + "\n");
                documents.push_back(std::move(document));
                done.push_back(std::move(*outcomes[i].summary));
                written.push_back(outputs[i]);
              }
              if (flags->inputs.common.json && flags->output.empty()) {
                write_json(paths.size() == 1 && !documents.empty() ? documents[0] : documents);
              } else if (!done.empty()) {
                write_out(render_summaries_text(done, written));
              }
              // One line per file that could not be read, the last with the count.
              for (size_t i = 0; i + 1 < failures.size(); ++i) write_note(failures[i]);
              if (!failures.empty()) {
                throw Error(ErrorCode::kFilesUnread,
                            fmt::format("{} ({} of {} files could not be summarised)",
                                        failures.back(), failures.size(), paths.size()));
              }
            };
          }};
}

}  // namespace memsnap::cli
