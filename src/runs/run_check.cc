#include "runs/run_check.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <filesystem>

#include "formats/budget_file.h"
#include "io/input.h"
#include "memsnap/error.h"

namespace memsnap {

namespace {

// Every file's summary, or an error naming the files that could not be read
// (a gate must not pass over a rank it could not read).
std::vector<RunSummary> summaries_of_folder(const std::string& folder, const RunInputs& inputs,
                                            const RunListener& listener, bool& any_summary) {
  std::vector<SummaryOutcome> outcomes = summarize_all(expand_inputs({folder}), inputs, listener);
  SummarySet read = split_outcomes(outcomes, 0, outcomes.size());
  if (!read.unread.empty()) {
    // One line: the first file's error, then how many more.
    const size_t more = read.unread.size() - 1;
    throw Error(ErrorCode::kFilesUnread,
                fmt::format("{}: {} of {} files could not be read: {}{}", folder,
                            read.unread.size(), outcomes.size(), read.unread.front().error,
                            more == 0 ? "" : fmt::format(" (and {} more)", more)));
  }
  any_summary = any_summary ||
                std::find(read.from_summary_file.begin(), read.from_summary_file.end(), true) !=
                    read.from_summary_file.end();
  return std::move(read.summaries);
}

std::vector<Limit> limits_required(const CheckRequest& request, const SpellParameter& spell) {
  std::vector<Limit> limits = limits_of(request, spell);
  if (limits.empty()) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format(
            "no limit to check: give {} FILE or limits such as {} 12GiB, {} 5% with {} FILE",
            spell("budget"), spell("max_peak"), spell("max_growth"), spell("baseline")));
  }
  if (request.baseline.empty()) {
    for (const Limit& limit : limits) {
      const LimitInfo& info = limit_info(limit.kind);
      if (!info.needs_baseline || limit.from_budget) continue;
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{}: needs a baseline to grow from ({} FILE)", spell(info.name),
                              spell("baseline")));
    }
  }
  return limits;
}

// CURRENT_DIR [BASELINE_DIR]: rank N against rank N.
RankedCheck check_folders(const CheckRequest& request, const RunInputs& inputs,
                          const RunListener& listener, const SpellParameter& spell) {
  std::error_code error;
  if (!request.baseline.empty() && !std::filesystem::is_directory(request.baseline, error)) {
    throw Error(
        ErrorCode::kBadParameter,
        fmt::format("{} is a folder and {} {} is not: give the baseline run's folder, rank by rank",
                    request.current, spell("baseline"), request.baseline));
  }
  bool ignored = false;
  const std::vector<RunSummary> current =
      summaries_of_folder(request.current, inputs, listener, ignored);
  std::vector<RunSummary> baseline;
  bool baseline_is_summary = false;
  if (!request.baseline.empty()) {
    baseline = summaries_of_folder(request.baseline, inputs, listener, baseline_is_summary);
  }
  // Matching by rank would check one of two files with the same rank and
  // leave the other out: a gate refuses that.
  const std::array<const std::vector<RunSummary>*, 2> runs{&current, &baseline};
  for (const std::vector<RunSummary>* run : runs) {
    if (const std::optional<DuplicateRank> duplicate = duplicate_rank(*run)) {
      throw Error(ErrorCode::kDuplicateRank, duplicate_rank_message(*run, *duplicate, listener));
    }
  }
  return check_ranked(
      current, request.baseline.empty() ? nullptr : &baseline, limits_required(request, spell),
      {.baseline_is_summary = baseline_is_summary, .allow_unmeasured = request.allow_unmeasured});
}

}  // namespace

std::vector<Limit> limits_of(const CheckRequest& request, const SpellParameter& spell) {
  std::map<std::string, Limit> by_name;
  std::vector<std::string> order;
  auto put = [&](Limit limit) {
    const std::string name = limit.name();
    if (!by_name.contains(name)) order.push_back(name);
    by_name.insert_or_assign(name, std::move(limit));
  };
  if (!request.budget.empty()) {
    for (Limit& limit :
         read_budget(read_small_file(request.budget, spell("budget")), request.budget)) {
      put(std::move(limit));
    }
  }
  for (const auto& [kind, text] : request.amounts) {
    const LimitInfo& info = limit_info(kind);
    const std::string name = spell(info.name);
    Limit limit{kind, parse_amount(text, name, info.takes_percent), {}, false};
    if (kind == LimitKind::kMaxFragmentation && !limit.amount.percent && limit.amount.value > 1) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{}: '{}' is more than 1: give a fraction (0.3) or a percent (30%)",
                              name, text));
    }
    put(limit);
  }
  const std::string category_name = spell("max_category");
  for (const auto& [category, size] : request.categories) {
    require_category(category, category_name);
    put(Limit{LimitKind::kCategory,
              parse_amount(size, fmt::format("{} {}", category_name, category), false), category,
              false});
  }
  if (request.no_oom) put(Limit{LimitKind::kNoOom, {}, {}, false});
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

CheckRun check_run(const CheckRequest& request, const RunInputs& inputs,
                   const RunListener& listener) {
  const SpellParameter spell = [&listener](std::string_view id) { return spelled(listener, id); };
  refuse_stdin_twice({request.current, request.baseline, request.budget});
  CheckRun out;
  std::error_code error;
  if (std::filesystem::is_directory(request.current, error)) {
    out.ranked = check_folders(request, inputs, listener, spell);
    return out;
  }
  bool current_is_summary = false;
  const RunSummary current = summary_of(request.current, inputs, listener, current_is_summary);
  std::optional<RunSummary> baseline;
  bool baseline_is_summary = false;
  if (!request.baseline.empty()) {
    if (std::filesystem::is_directory(request.baseline, error)) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{} {} is a folder: give one file, a snapshot or its summary",
                              spell("baseline"), request.baseline));
    }
    baseline = summary_of(request.baseline, inputs, listener, baseline_is_summary);
  }
  out.single = run_check(
      current, baseline ? &*baseline : nullptr, limits_required(request, spell),
      {.baseline_is_summary = baseline_is_summary, .allow_unmeasured = request.allow_unmeasured});
  return out;
}

}  // namespace memsnap
