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

#include "analysis/check.h"
#include "analysis/run_compare.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/summaries.h"
#include "formats/budget_file.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "report/check_render.h"

namespace memsnap::cli {

namespace {

constexpr uint64_t kMaxBudgetBytes = uint64_t{1} << 20;

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

// A file that cannot be read is bad input (exit 1) like any other input;
// what it says, if wrong, is the user's usage error (read_budget).
std::string read_small_file(const std::string& path, std::string_view what) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_head(path, kMaxBudgetBytes + 1);
  } catch (const Error& error) {
    throw Error(fmt::format("{} {}", what, error.what()));
  }
  if (bytes.size() > kMaxBudgetBytes) {
    throw Error(fmt::format("{} {}: larger than 1 MiB", what, path));
  }
  return {bytes.begin(), bytes.end()};
}

// The budget file's limits, then the flags' (a flag wins over the file's key).
std::vector<Limit> limits_of(const CheckFlags& flags) {
  std::map<std::string, Limit> by_name;
  std::vector<std::string> order;
  auto put = [&](Limit limit) {
    const std::string name = limit.name();
    if (!by_name.contains(name)) order.push_back(name);
    by_name.insert_or_assign(name, std::move(limit));
  };
  if (!flags.budget.empty()) {
    for (Limit& limit : read_budget(read_small_file(flags.budget, "--budget"), flags.budget)) {
      put(std::move(limit));
    }
  }
  for (const auto& [kind, text] : flags.sizes) {
    const LimitInfo& info = limit_info(kind);
    std::string flag = "--" + std::string(info.name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    Limit limit{kind, parse_amount(text, flag, info.takes_percent), {}, false};
    if (kind == LimitKind::kMaxFragmentation && !limit.amount.percent && limit.amount.value > 1) {
      throw Error::usage(
          fmt::format("{}: '{}' is more than 1: give a fraction (0.3) or a percent "
                      "(30%)",
                      flag, text));
    }
    put(limit);
  }
  for (const std::string& spec : flags.categories) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error::usage(
          fmt::format("--max-category: '{}' is not CATEGORY=SIZE (e.g. activation=20GiB)", spec));
    }
    require_category(spec.substr(0, eq), "--max-category");
    Limit limit{LimitKind::kCategory,
                parse_amount(spec.substr(eq + 1), "--max-category " + spec.substr(0, eq), false),
                spec.substr(0, eq), false};
    put(limit);
  }
  if (flags.no_oom) put(Limit{LimitKind::kNoOom, {}, {}, false});
  // In the order of the limit table, categories last by name.
  std::vector<Limit> limits;
  for (const LimitInfo& info : all_limit_infos()) {
    for (const std::string& name : order) {
      const Limit& limit = by_name.at(name);
      if (limit.kind == info.kind) limits.push_back(limit);
    }
  }
  return limits;
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

// Every file's summary, or an error naming the files that could not be read
// (a gate must not pass over a rank it could not read).
std::vector<RunSummary> summaries_of_folder(const std::string& folder, const SummaryInputs& inputs,
                                            bool& any_summary) {
  std::vector<SummaryOutcome> outcomes = summarize_all(expand_inputs({folder}), inputs);
  SummarySet read = split_outcomes(outcomes, 0, outcomes.size());
  if (!read.unread.empty()) {
    // One line: the first file's error, then how many more.
    const size_t more = read.unread.size() - 1;
    throw Error(fmt::format("{}: {} of {} files could not be read: {}{}", folder,
                            read.unread.size(), outcomes.size(), read.unread.front().error,
                            more == 0 ? "" : fmt::format(" (and {} more)", more)));
  }
  any_summary = any_summary ||
                std::find(read.from_summary_file.begin(), read.from_summary_file.end(), true) !=
                    read.from_summary_file.end();
  return std::move(read.summaries);
}

// CURRENT_DIR [--baseline BASELINE_DIR]: rank N against rank N.
void check_folders(const CheckFlags& flags) {
  std::error_code error;
  if (flags.write_budget) {
    throw Error::usage("--write-budget takes one good run's file, not a folder");
  }
  if (!flags.baseline.empty() && !std::filesystem::is_directory(flags.baseline, error)) {
    throw Error::usage(fmt::format(
        "{} is a folder and --baseline {} is not: give the baseline run's folder, rank by rank",
        flags.current, flags.baseline));
  }
  bool ignored = false;
  const std::vector<RunSummary> current = summaries_of_folder(flags.current, flags.inputs, ignored);
  std::vector<RunSummary> baseline;
  bool baseline_is_summary = false;
  if (!flags.baseline.empty()) {
    baseline = summaries_of_folder(flags.baseline, flags.inputs, baseline_is_summary);
  }
  // Matching by rank would check one of two files with the same rank and
  // leave the other out: a gate refuses that.
  const std::vector<RunSummary>* runs[] = {&current, &baseline};
  for (const std::vector<RunSummary>* run : runs) {
    if (const std::optional<DuplicateRank> duplicate = duplicate_rank(*run)) {
      throw Error(duplicate_rank_message(*run, *duplicate));
    }
  }
  const std::vector<Limit> limits = limits_of(flags);
  if (limits.empty()) {
    throw Error::usage("no limit to check: give --budget FILE or limits such as --max-peak 12GiB");
  }
  const RankedCheck report = check_ranked(
      current, flags.baseline.empty() ? nullptr : &baseline, limits,
      {.baseline_is_summary = baseline_is_summary, .allow_unmeasured = flags.allow_unmeasured});
  write_in_format(flags, report);
  if (report.failed_ranks > 0) {
    throw Error::limit(check_verdict(report));
  }
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
  if (std::filesystem::is_directory(flags.current, error)) {
    check_folders(flags);
    return;
  }
  bool current_is_summary = false;
  const RunSummary current = summary_of(flags.current, flags.inputs, current_is_summary);
  if (flags.write_budget) {
    const Amount headroom = parse_amount(flags.headroom, "--headroom", true);
    const double fraction = headroom.percent ? headroom.value / 100 : headroom.value;
    // Beyond 10x a budget says nothing (and 1e308% wrote 'infMiB', which
    // --budget then refused).
    if (!std::isfinite(fraction) || fraction < 0 || fraction > 10) {
      throw Error::usage(
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
        current.path, current.absolute_peak, flags.headroom, current.path);
    write_report(flags, write_budget_toml(limits, comment));
    return;
  }
  std::optional<RunSummary> baseline;
  bool baseline_is_summary = false;
  if (!flags.baseline.empty()) {
    if (std::filesystem::is_directory(flags.baseline, error)) {
      throw Error::usage(
          fmt::format("--baseline {} is a folder: give one file, a snapshot or "
                      "its summary",
                      flags.baseline));
    }
    baseline = summary_of(flags.baseline, flags.inputs, baseline_is_summary);
  }
  const std::vector<Limit> limits = limits_of(flags);
  if (limits.empty()) {
    throw Error::usage(
        "no limit to check: give --budget FILE or limits such as --max-peak 12GiB, "
        "--max-growth 5% --baseline FILE (memsnap check --help lists them)");
  }
  const CheckReport report = run_check(
      current, baseline ? &*baseline : nullptr, limits,
      {.baseline_is_summary = baseline_is_summary, .allow_unmeasured = flags.allow_unmeasured});
  write_in_format(flags, report);
  if (report.failed > 0) {
    throw Error::limit(check_verdict(report));
  }
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
            struct SizeFlag {
              const char* name;
              LimitKind kind;
              const char* help;
            };
            static constexpr SizeFlag kSizeFlags[] = {
                {"--max-peak", LimitKind::kMaxPeak, "Absolute peak at most SIZE (12GiB, 512MiB)"},
                {"--max-peak-delta", LimitKind::kMaxPeakDelta,
                 "Peak above the trace's start at most SIZE"},
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
                      [flags, kind = flag.kind](const std::string& value) {
                        flags->sizes[kind] = value;
                      },
                      flag.help)
                  ->option_text(flag.kind == LimitKind::kMaxUnmatchedFrees ? "N" : "SIZE");
            }
            command
                .add_option("--max-category", flags->categories,
                            "CATEGORY=SIZE: that kind of memory live at the peak at most SIZE "
                            "(activation=20GiB); repeatable")
                ->option_text("CATEGORY=SIZE");
            command.add_flag("--no-oom", flags->no_oom, "Fail when the run has an oom entry");
            command.add_flag("--allow-unmeasured", flags->allow_unmeasured,
                             "A limit the file cannot measure (its dump contradicts its trace, "
                             "parts were malformed) is not checked; without it, it fails");
            command
                .add_option("--format", flags->format,
                            "text (default), json, junit (JUnit XML), github (Actions annotations) "
                            "or markdown ($GITHUB_STEP_SUMMARY)")
                ->check(one_of({"text", "json", "junit", "github", "markdown"}))
                ->option_text("FORMAT");
            command.add_option("-o,--output", flags->output,
                               "Write the report (or the budget) to PATH instead of stdout");
            command.add_flag("--write-budget", flags->write_budget,
                             "Write a starting budget (TOML) from CURRENT, a good run, and exit 0");
            command
                .add_option("--headroom", flags->headroom,
                            "With --write-budget: added to every measure (default 5%)")
                ->option_text("PERCENT");
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
