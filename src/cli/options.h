// Flags that several commands share, each declared in one place so its name,
// default and help read the same everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "memsnap/load.h"
#include "memsnap/model.h"
#include "service/session.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace memsnap::cli {

struct CommonOptions {
  std::optional<int> device;
  bool json = false;
  bool allow_objects = false;
  uint64_t max_input_bytes = 0;  // 0: LoadOptions' default
  int top = 10;
  SourceKeyOptions
      keys;  // --frame-depth, --keys, --skip, --keep, --root, --group-by, --category-rules
  std::string category_rules_file;
  StepSource steps = StepSource::kAuto;  // --steps
  bool timings = false;  // --timings: what reading and each analysis part took, on stderr
};

// Checks for whole-number flags whose CLI11 defaults print the largest double
// in their error: "--top: expects a whole number >= 0, not '-1'".
CLI::Validator whole_number_at_least(long long minimum);
// A finite number (no nan/inf), for --time and --precision.
CLI::Validator finite_number();
// One of `words`, exactly; otherwise a message listing them, with the
// nearest ("'jsn' is not one of text, json; did you mean json?").
CLI::Validator one_of(std::vector<std::string> words);

// The positional FILE of a command that reads one snapshot (required).
void add_snapshot_argument(CLI::App& command, std::string& file,
                           const std::string& help =
                               "Snapshot pickle (.pickle, .gz, .zst, or - "
                               "for stdin)");
// FILE...: one or more snapshots, folders of them, or (where `help` says so)
// summaries (required).
void add_snapshots_argument(CLI::App& command, std::vector<std::string>& files,
                            const std::string& help);

void add_device_flag(CLI::App& command, CommonOptions& options);
// --steps auto|profiler|optimizer|none: which step windows the analysis uses.
void add_steps_flag(CLI::App& command, CommonOptions& options);
void add_json_flag(CLI::App& command, CommonOptions& options);
// --allow-objects and --max-input: how a file is read.
void add_input_flags(CLI::App& command, CommonOptions& options);
// Sets options.top to the command's default (the reference scripts': 15 for
// parse, compare and replay-step, 25 for replay-to-time).
void add_top_flag(CLI::App& command, CommonOptions& options, const std::string& what,
                  int default_top);
// --frame-depth, --keys, --skip, --keep: how allocations are named.
void add_source_key_flags(CLI::App& command, CommonOptions& options);
// --top, --frame-depth, --device, --json, --allow-objects.
void add_analysis_flags(CLI::App& command, CommonOptions& options, int default_top);

// Opens one file as a session (its analyses report their parts with
// --timings, on --steps), with a progress line on stderr for a person
// watching a large file load.
std::unique_ptr<service::Session> open_session(const std::string& path,
                                               const CommonOptions& options);
// Every command says so, on stderr, when the file holds devices its report
// leaves out: which device it shows and why (nothing when --device was given).
void note_device_choice(const std::string& path, const DeviceChoice& choice);
// With --timings: notes each analysis part's time and adds it to the
// command's ledger; else empty.
PartObserver timing_observer(const CommonOptions& options);
// The session's analysis of --device; names the device chosen
// (note_device_choice).
const FileAnalysis& analysis_of(const service::Session& session, const CommonOptions& options);
// With --timings, after the command: its wall time split into reading and
// decoding, the analysis parts computed on its own thread (waits for a part
// on another included), and the rest (building the results, rendering and
// writing them), with the peak RSS. restart_timings() at each command's start.
void restart_timings();
void note_timings_total();
// A file's label where none is given: its name without the folders.
std::string default_label(const std::string& path);
// Opens several files at once: each file after the first on its own thread.
std::vector<std::unique_ptr<service::Session>> open_all(const std::vector<std::string>& paths,
                                                        const CommonOptions& options);

}  // namespace memsnap::cli
