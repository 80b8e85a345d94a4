// memsnap check CURRENT: a memory-regression gate for CI (exit 3 when a limit
// is violated), its report saying which lines grew.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "analysis/reports/check.h"
#include "analysis/reports/run_compare.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "formats/budget_file.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "report/check_render.h"
#include "runs/run_check.h"

namespace memsnap::cli {

namespace {

struct CheckFlags {
  std::string current;
  std::string baseline;
  std::string budget;
  std::map<LimitKind, std::string> sizes;  // --max-peak and the rest, as given
  std::vector<std::string> categories;     // --max-category NAME=SIZE
  bool no_oom = false;
  bool allow_unmeasured = false;
  std::string format = "text";
  std::string output;
  bool write_budget = false;
  std::string headroom = "5%";
  SummaryInputs inputs;
};

CheckRequest request_of(const CheckFlags& flags) {
  CheckRequest request;
  request.current = flags.current;
  request.baseline = flags.baseline;
  request.budget = flags.budget;
  request.amounts = flags.sizes;
  for (const std::string& spec : flags.categories) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format("--max-category: '{}' is not CATEGORY=SIZE (e.g. activation=20GiB)", spec));
    }
    request.categories.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
  }
  request.no_oom = flags.no_oom;
  request.allow_unmeasured = flags.allow_unmeasured;
  return request;
}

void write_report(const CheckFlags& flags, const std::string& text) {
  if (flags.output.empty()) {
    write_out(text);
  } else {
    write_file(flags.output, text);
  }
}

// The report of one file (CheckReport) or of a folder (RankedCheck) in --format.
template <typename Report>
void write_in_format(const CheckFlags& flags, const Report& report) {
  const int top = flags.inputs.common.top;
  if (flags.format == "json") {
    write_report(flags, json_text(render_check_json(report, top), 2) + "\n");
  } else if (flags.format == "junit") {
    write_report(flags, render_check_junit(report, top));
  } else if (flags.format == "github") {
    write_report(flags, render_check_github(report, top));
  } else if (flags.format == "markdown") {
    write_report(flags, render_check_markdown(report, top));
  } else {
    write_report(flags, render_check_text(report, top));
  }
}

// --write-budget: a starting budget (TOML) from one good run.
void write_budget(const CheckFlags& flags) {
  std::error_code error;
  if (std::filesystem::is_directory(flags.current, error)) {
    throw Error(ErrorCode::kBadParameter, "--write-budget takes one good run's file, not a folder");
  }
  bool current_is_summary = false;
  const RunSummary current = summary_of(flags.current, flags.inputs, current_is_summary);
  const Amount headroom = parse_amount(flags.headroom, "--headroom", true);
  const double fraction = headroom.percent ? headroom.value / 100 : headroom.value;
  // Beyond 10x a budget says nothing (and 1e308% wrote 'infMiB', which
  // --budget then refused).
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 10) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format("--headroom must be 0% to 1000% (or 0 to 10), not '{}'", flags.headroom));
  }
  const std::vector<Limit> limits = budget_from_run(current, fraction);
  const std::string comment = fmt::format(
      "memsnap budget, written by `memsnap check --write-budget` from {}\n"
      "(absolute peak {} bytes) with {} headroom. Check a run against it with\n"
      "  memsnap check RUN --budget THIS_FILE [--baseline {}]\n"
      "Keys: max_peak, max_peak_delta, max_reserved, max_fragmentation, max_growth and\n"
      "max_source_growth (need --baseline), max_unmatched_frees, no_oom, step_max_peak,\n"
      "and [category] NAME = SIZE.",
      current.path, current.facts.absolute_peak, flags.headroom, current.path);
  write_report(flags, write_budget_toml(limits, comment));
}

void run_check_command(const CheckFlags& flags) {
  std::error_code error;
  const std::array inputs_read = {flags.current, flags.baseline, flags.budget};
  refuse_stdin_twice({inputs_read.begin(), inputs_read.end()});
  if (!flags.output.empty()) {
    // -o onto the run, the baseline or the budget would replace what the
    // gate reads (a folder: any file in it).
    std::vector<std::string> inputs;
    for (const std::string& input : inputs_read) {
      if (input.empty()) continue;
      if (std::filesystem::is_directory(input, error)) {
        for (const std::string& file : expand_inputs({input})) inputs.push_back(file);
      }
      inputs.push_back(input);
    }
    refuse_overwriting_inputs(flags.output, inputs);
  }
  if (flags.write_budget) {
    write_budget(flags);
    return;
  }
  const CheckRun run =
      check_run(request_of(flags), run_inputs(flags.inputs), stderr_listener(flags.inputs.common));
  if (run.ranked) {
    write_in_format(flags, *run.ranked);
    if (!run.passed()) throw Error(ErrorCode::kCheckFailed, check_verdict(*run.ranked));
    return;
  }
  write_in_format(flags, *run.single);
  if (!run.passed()) throw Error(ErrorCode::kCheckFailed, check_verdict(*run.single));
}

}  // namespace

namespace {

// What a limit's flag takes, for --help.
const char* value_name(LimitKind kind) {
  switch (kind) {
    case LimitKind::kMaxUnmatchedFrees: return "N";
    case LimitKind::kMaxFragmentation: return "FRACTION|PERCENT";
    case LimitKind::kMaxGrowth:
    case LimitKind::kMaxSourceGrowth: return "SIZE|PERCENT";
    default: return "SIZE";
  }
}

// The limits that take an amount: --max-peak SIZE, --max-growth SIZE|PERCENT, ...
void add_limit_flags(CLI::App& command, const std::shared_ptr<CheckFlags>& flags) {
  struct SizeFlag {
    const char* name;
    LimitKind kind;
    const char* help;
  };
  static constexpr SizeFlag kSizeFlags[] = {
      {"--max-peak", LimitKind::kMaxPeak, "Absolute peak at most SIZE (12GiB, 512MiB)"},
      {"--max-peak-delta", LimitKind::kMaxPeakDelta, "Peak above the trace's start at most SIZE"},
      {"--max-reserved", LimitKind::kMaxReserved, "Reserved peak at most SIZE"},
      {"--max-fragmentation", LimitKind::kMaxFragmentation,
       "Inactive / reserved at the dump at most FRACTION (0.3) or PERCENT (30%)"},
      {"--max-growth", LimitKind::kMaxGrowth,
       "Absolute peak at most SIZE, or PERCENT of the baseline's, above the baseline's"},
      {"--max-source-growth", LimitKind::kMaxSourceGrowth,
       "No one source live at the peak grows by more than SIZE, or PERCENT of the "
       "baseline's peak"},
      {"--max-unmatched-frees", LimitKind::kMaxUnmatchedFrees,
       "Frees of allocations the trace never saw: at most N"},
      {"--step-max-peak", LimitKind::kStepMaxPeak,
       "Every profiler step's absolute peak at most SIZE"},
  };
  for (const SizeFlag& flag : kSizeFlags) {
    command
        .add_option_function<std::string>(
            flag.name,
            [flags, kind = flag.kind](const std::string& value) { flags->sizes[kind] = value; },
            flag.help)
        ->option_text(value_name(flag.kind));
  }
}

// Where the report goes and in which format; writing a budget instead.
void add_output_flags(CLI::App& command, const std::shared_ptr<CheckFlags>& flags) {
  command
      .add_option("--format", flags->format,
                  "text (default), json, junit (JUnit XML), github (Actions annotations) "
                  "or markdown ($GITHUB_STEP_SUMMARY)")
      ->check(one_of({"text", "json", "junit", "github", "markdown"}))
      ->option_text("FORMAT");
  command
      .add_option("-o,--output", flags->output,
                  "Write the report (or the budget) to PATH instead of stdout")
      ->option_text("PATH");
  command.add_flag("--write-budget", flags->write_budget,
                   "Write a starting budget (TOML) from CURRENT, a good run, and exit 0");
  command
      .add_option("--headroom", flags->headroom,
                  "With --write-budget: added to every measure (default 5%)")
      ->option_text("PERCENT");
}

}  // namespace

Command check_command() {
  return {"check",
          "A memory-regression gate for CI: limits on one run (and its growth over a baseline); "
          "exit 3 when one is violated, with the lines that grew",
          [](CLI::App& command) -> Runner {
            auto flags = std::make_shared<CheckFlags>();
            command
                .add_option("CURRENT", flags->current,
                            "The run to check: a snapshot, or its summary (memsnap summarize)")
                ->required();
            command
                .add_option("--baseline", flags->baseline,
                            "The run to compare with: a snapshot or a summary (a few KB to store "
                            "in CI)")
                ->option_text("FILE");
            command
                .add_option("--budget", flags->budget,
                            "Limits from a TOML or JSON file (memsnap check --write-budget writes "
                            "one); flags win over its keys")
                ->option_text("FILE");
            add_limit_flags(command, flags);
            command
                .add_option("--max-category", flags->categories,
                            "CATEGORY=SIZE: that kind of memory live at the peak at most SIZE "
                            "(activation=20GiB); repeatable")
                ->option_text("CATEGORY=SIZE");
            command.add_flag("--no-oom", flags->no_oom, "Fail when the run has an oom entry");
            command.add_flag("--allow-unmeasured", flags->allow_unmeasured,
                             "A limit the file cannot measure (its dump contradicts its trace, "
                             "parts were malformed) is not checked; without it, it fails");
            add_output_flags(command, flags);
            add_device_flag(command, flags->inputs.common);
            add_steps_flag(command, flags->inputs.common);
            add_top_flag(command, flags->inputs.common, "sources in the explanation", 10);
            add_source_key_flags(command, flags->inputs.common);
            add_input_flags(command, flags->inputs.common);
            // Folders: --rank-from tells ranks apart (two node*_rank0 files are an error).
            add_summary_input_flags(command, flags->inputs);
            return [flags] { run_check_command(*flags); };
          }};
}

}  // namespace memsnap::cli
