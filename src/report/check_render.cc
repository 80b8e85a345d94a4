#include "report/check_render.h"

#include <fmt/format.h>
#include <cmath>
#include <sstream>

#include <pugixml.hpp>

#include "report/findings.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "report/source_tables.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

enum class Unit : uint8_t { kBytes, kCount, kFraction };

Unit unit_of(LimitKind kind) {
  switch (kind) {
    case LimitKind::kMaxFragmentation: return Unit::kFraction;
    case LimitKind::kMaxUnmatchedFrees:
    case LimitKind::kNoOom: return Unit::kCount;
    default: return Unit::kBytes;
  }
}

std::string_view unit_name(Unit unit) {
  switch (unit) {
    case Unit::kBytes: return "bytes";
    case Unit::kCount: return "count";
    case Unit::kFraction: return "fraction";
  }
  return "bytes";
}

std::string value_text(double value, Unit unit) {
  switch (unit) {
    case Unit::kBytes: return format_level_bytes(static_cast<int64_t>(value));
    case Unit::kCount: return format_count(static_cast<uint64_t>(std::max(value, 0.0)));
    case Unit::kFraction: return format_percent(value);
  }
  return {};
}

std::string_view status_name(LimitStatus status) {
  switch (status) {
    case LimitStatus::kPass: return "pass";
    case LimitStatus::kFail: return "fail";
    case LimitStatus::kNotApplicable: return "not_applicable";
  }
  return "pass";
}

std::string threshold_text(const LimitResult& r) {
  const Unit unit = unit_of(r.limit.kind);
  std::string text = value_text(r.allowed, unit);
  if (r.limit.amount.percent && r.limit.kind != LimitKind::kMaxFragmentation) {
    text += fmt::format(" ({:g}% of the baseline's peak)", r.limit.amount.value);
  }
  return text;
}

// What grew, for a failure's explanation: the largest increases first.
std::vector<const SourceDiff*> grown(const SourceComparison& comparison, int top) {
  std::vector<const SourceDiff*> rows;
  for (const SourceDiff& row : comparison.rows) {
    if (row.delta() > 0) rows.push_back(&row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const SourceDiff* a, const SourceDiff* b) {
    return a->delta() > b->delta();
  });
  if (top >= 0 && rows.size() > static_cast<size_t>(top)) rows.resize(static_cast<size_t>(top));
  return rows;
}

std::string grown_list(const SourceComparison& comparison, int count) {
  std::string out;
  for (const SourceDiff* row : grown(comparison, count)) {
    out += fmt::format("{}{} (+{})", out.empty() ? "" : ", ", printable(row->source),
                       format_bytes(static_cast<uint64_t>(row->delta())));
  }
  return out;
}

std::string headline(const CheckReport& r) {
  return fmt::format("memsnap check: {}, {} {} {}", r.failed == 0 ? "PASS" : "FAIL",
                     check_verdict(r), r.failed == 0 ? "for" : "by", printable(r.current_file));
}

// GitHub's workflow commands: data escapes %, CR, LF; properties also : and ,.
std::string github_data(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else
      out += c;
  }
  return out;
}
std::string github_property(std::string_view text) {
  std::string out;
  for (char c : github_data(text)) {
    if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

// Markdown text (a heading, a table cell) from strings of the input: one line
// (printable()); HTML shown, never rendered (&lt;img&gt;); Markdown's own
// characters escaped, so that a file name can neither end the cell (|) nor
// open a code span, emphasis, a link or an image.
std::string md_cell(std::string_view text) {
  std::string out;
  for (char c : printable(text)) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '|':
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '~':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

// The longest run of `c` in `text`.
size_t longest_run(std::string_view text, char c) {
  size_t longest = 0;
  size_t run = 0;
  for (char k : text) {
    run = k == c ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

// A code span (names, paths: shown as they are, HTML inert): its fence is one
// backtick longer than any run inside, so a backtick in a frame name cannot
// close it. In a table cell a | still ends the cell unless escaped (GFM).
std::string md_code(std::string_view text, bool in_table = true) {
  std::string content = printable(text);
  if (in_table) {
    std::string escaped;
    for (char c : content) {
      if (c == '|') escaped += '\\';
      escaped += c;
    }
    content = std::move(escaped);
  }
  const std::string fence(longest_run(content, '`') + 1, '`');
  // A span that starts or ends with a backtick needs a space inside its fence.
  const bool pad = !content.empty() && (content.front() == '`' || content.back() == '`');
  return fence + (pad ? " " : "") + content + (pad ? " " : "") + fence;
}

// The run's warnings in words: what parse warns of, so that a gate never
// passes silently on a file whose numbers parse would doubt.
std::vector<std::string> warnings_of(const CheckReport& r) {
  std::vector<std::string> out = phrase_all(r.findings);
  out.insert(out.end(), r.warnings.begin(), r.warnings.end());
  return out;
}

// Ranked reports list at most this many warnings in text and Markdown (JSON,
// JUnit and GitHub carry all): a thousand ranks with one note each would bury
// the verdict.
constexpr size_t kRankedWarningsShown = 20;

// Why a limit was not checked or measured; empty when it was.
std::string note_text(const LimitResult& r) {
  switch (r.note) {
    case LimitNote::kNone: return {};
    case LimitNote::kNoSteps:
      // A summary file keeps no marks: it says only that there are none.
      return r.step_marks ? "the run has no steps: " + no_steps_reason(r.step_source, *r.step_marks)
                          : std::string("the run has no steps");
    case LimitNote::kNothingLive: return "the run has nothing live at its peak to categorise";
    case LimitNote::kNeedsBaseline: return "it needs --baseline";
    case LimitNote::kNoBaselineRank: return "no baseline rank";
    case LimitNote::kUnmeasurable: return phrase(r.doubt);
    case LimitNote::kBaselineUnmeasurable: return "the baseline: " + phrase(r.doubt);
  }
  return {};
}

// What the measured value is about: the source that grew, the category, or
// the highest step (an inferred iteration says where it came from: its number
// is not the profiler's); empty when nothing in particular.
std::string subject_text(const LimitResult& r) {
  if (!r.step) return r.subject;
  std::string subject = fmt::format("step {}", *r.step);
  if (r.steps_origin.origin == StepOrigin::kOptimizerAnnotations) {
    subject += fmt::format(", an iteration inferred from the '{}' marks", r.steps_origin.from);
  } else if (r.steps_origin.origin == StepOrigin::kOptimizerFrames) {
    subject += ", an iteration inferred from torch/optim frames";
  }
  return subject;
}

}  // namespace

std::string limit_sentence(const LimitResult& r) {
  const Unit unit = unit_of(r.limit.kind);
  const LimitInfo& info = limit_info(r.limit.kind);
  std::string what = r.limit.kind == LimitKind::kCategory
                         ? fmt::format("{} live at the peak", r.limit.category)
                         : std::string(info.what);
  if (!r.measurable) {
    return fmt::format("{}: not measurable on this file: {}{}", r.limit.name(),
                       printable(note_text(r)),
                       r.status == LimitStatus::kFail ? " (--allow-unmeasured skips it)" : "");
  }
  if (r.status == LimitStatus::kNotApplicable) {
    return fmt::format("{}: not checked, {}", r.limit.name(), note_text(r));
  }
  std::string subject = subject_text(r);
  if (!subject.empty() && r.limit.kind != LimitKind::kCategory) {
    subject = fmt::format(" ({})", printable(subject));
  } else {
    subject.clear();
  }
  if (r.limit.kind == LimitKind::kNoOom) {
    return r.status == LimitStatus::kPass
               ? "no_oom: no oom entry"
               : fmt::format("no_oom: {} oom entr{} in the run", value_text(r.measured, unit),
                             r.measured == 1 ? "y" : "ies");
  }
  const double margin = r.allowed - r.measured;
  return fmt::format("{}: {}{} {} {} {} ({} {})", r.limit.name(), what, subject,
                     value_text(r.measured, unit), r.status == LimitStatus::kPass ? "<=" : ">",
                     threshold_text(r), r.status == LimitStatus::kPass ? "margin" : "over by",
                     value_text(std::abs(margin), unit));
}

std::vector<std::string> investigate_commands(const CheckReport& r) {
  std::vector<std::string> commands;
  const std::string current = shell_quote(r.current_file);
  if (!r.baseline_file.empty()) {
    const std::string baseline = shell_quote(r.baseline_file);
    if (r.baseline_is_summary) {
      commands.push_back(fmt::format(
          "memsnap compare BASELINE_SNAPSHOT {}  # the baseline is a summary ({}): compare "
          "needs its snapshot",
          current, baseline));
    } else {
      commands.push_back(fmt::format("memsnap compare {} {}", baseline, current));
      commands.push_back(fmt::format("memsnap plot {} {} --labels baseline current -o check.html",
                                     baseline, current));
    }
  }
  commands.push_back(fmt::format("memsnap parse {}", current));
  commands.push_back(fmt::format("memsnap oom --at peak {}", current));
  return commands;
}

std::string render_check_text(const CheckReport& r, int top) {
  std::string out = headline(r) + "\n";
  if (!r.baseline_file.empty()) {
    out += fmt::format("  baseline {}: absolute peak {}; current {} ({})\n",
                       printable(r.baseline_file), format_level_bytes(r.baseline_peak.value_or(0)),
                       format_level_bytes(r.peak),
                       format_signed_bytes(r.peak - r.baseline_peak.value_or(0)));
  }
  for (const std::string& warning : warnings_of(r))
    out += "  warning: " + printable(warning) + "\n";
  out += "\n";
  for (const LimitResult& result : r.results) {
    const char* mark = result.status == LimitStatus::kFail            ? "FAIL"
                       : result.status == LimitStatus::kNotApplicable ? "skip"
                                                                      : "ok  ";
    out += fmt::format("  {}  {}\n", mark, limit_sentence(result));
  }
  if (r.failed > 0 && !r.baseline_file.empty()) {
    out += "\nWhat grew, at each run's peak (B - A = current - baseline)\n";
    out += diff_table(r.sources.rows, top);
    out += "\nBy category\n";
    out += diff_table(r.categories.rows, top, "category");
  } else if (r.failed > 0 && std::ranges::any_of(r.results, [](const LimitResult& result) {
               return result.note == LimitNote::kNoBaselineRank;
             })) {
    out += "\n(the baseline run has no file of this rank: nothing to see what grew against)\n";
  } else if (r.failed > 0) {
    out += "\n(no --baseline: pass one, a snapshot or a summary, to see what grew)\n";
  }
  if (r.failed > 0) {
    out += "\nTo look closer:\n";
    for (const std::string& command : investigate_commands(r)) out += "  " + command + "\n";
  }
  return out;
}

ordered_json render_check_json(const CheckReport& r, int top) {
  ordered_json limits = ordered_json::array();
  for (const LimitResult& result : r.results) {
    const Unit unit = unit_of(result.limit.kind);
    const bool measured = result.measurable && result.status != LimitStatus::kNotApplicable;
    limits.push_back(
        {{"name", result.limit.name()},
         {"status", status_name(result.status)},
         {"measurable", result.measurable},
         {"measured", !measured ? ordered_json(nullptr) : ordered_json(result.measured)},
         {"allowed", result.allowed},
         {"margin",
          !measured ? ordered_json(nullptr) : ordered_json(result.allowed - result.measured)},
         {"unit", unit_name(unit)},
         {"given", result.limit.amount.percent
                       ? ordered_json(fmt::format("{:g}%", result.limit.amount.value))
                       : ordered_json(result.limit.amount.value)},
         {"subject", text_or_null(subject_text(result))},
         {"note", text_or_null(note_text(result))},
         {"sentence", limit_sentence(result)}});
  }
  ordered_json out{
      {"passed", r.failed == 0},
      {"exit_status", r.failed == 0 ? 0 : 3},
      {"failed", r.failed},
      {"checked", r.checked()},
      {"not_checked", r.not_checked},
      {"current",
       {{"file", r.current_file},
        {"rank", r.rank ? ordered_json(*r.rank) : ordered_json(nullptr)},
        {"absolute_peak", r.peak}}},
      {"baseline", r.baseline_file.empty()
                       ? ordered_json(nullptr)
                       : ordered_json{{"file", r.baseline_file},
                                      {"is_summary", r.baseline_is_summary},
                                      {"absolute_peak", r.baseline_peak.value_or(0)}}},
      {"limits", limits},
      {"warnings", warnings_of(r)},
      {"sources",
       r.baseline_file.empty() ? ordered_json(nullptr) : diff_json(r.sources.rows, top, false)},
      {"categories",
       r.baseline_file.empty() ? ordered_json(nullptr) : diff_json(r.categories.rows, top, false)},
      {"commands", investigate_commands(r)}};
  return out;
}

namespace {

std::string rank_label(const CheckReport& r) {
  return r.rank ? fmt::format("rank {}", *r.rank) : printable(r.current_file);
}

// "rank 3: <warning>" for the warnings of the ranks that passed (a failed
// rank's own section lists its warnings), at most kRankedWarningsShown and
// then how many more.
std::vector<std::string> passed_ranks_warnings(const RankedCheck& r) {
  std::vector<std::string> out;
  size_t more = 0;
  for (const CheckReport& report : r.ranks) {
    if (report.failed > 0) continue;
    for (const std::string& warning : warnings_of(report)) {
      if (out.size() < kRankedWarningsShown) {
        out.push_back(rank_label(report) + ": " + warning);
      } else {
        ++more;
      }
    }
  }
  if (more > 0) out.push_back(fmt::format("... and {} more (--format json lists all)", more));
  return out;
}

// One <testsuite> per checked file, its <testcase> per limit.
void append_junit_suite(pugi::xml_node suites, const CheckReport& r, int top) {
  const std::string suite_name = xml_safe("memsnap check " + r.current_file);
  auto suite = suites.append_child("testsuite");
  suite.append_attribute("name") = suite_name.c_str();
  suite.append_attribute("tests") = static_cast<unsigned long long>(r.results.size());
  suite.append_attribute("failures") = static_cast<unsigned long long>(r.failed);
  suite.append_attribute("errors") = 0;
  suite.append_attribute("skipped") = static_cast<unsigned long long>(r.not_checked);
  suite.append_attribute("time") = "0";
  std::string explanation;
  if (!r.baseline_file.empty()) {
    explanation = "\nWhat grew at the peak (current - baseline): " + grown_list(r.sources, top) +
                  "\nBy category: " + grown_list(r.categories, top);
  }
  explanation += "\nTo look closer:";
  for (const std::string& command : investigate_commands(r)) explanation += "\n  " + command;
  if (const std::vector<std::string> warnings = warnings_of(r); !warnings.empty()) {
    std::string text;
    for (const std::string& warning : warnings) text += "warning: " + warning + "\n";
    suite.append_child("system-err")
        .append_child(pugi::node_pcdata)
        .set_value(xml_safe(text).c_str());
  }
  for (const LimitResult& result : r.results) {
    auto test = suite.append_child("testcase");
    test.append_attribute("classname") = "memsnap.check";
    const std::string name =
        r.rank ? fmt::format("rank {}: {}", *r.rank, result.limit.name()) : result.limit.name();
    test.append_attribute("name") = xml_safe(name).c_str();
    test.append_attribute("time") = "0";
    const std::string sentence = xml_safe(limit_sentence(result));
    if (result.status == LimitStatus::kFail) {
      auto failure = test.append_child("failure");
      failure.append_attribute("message") = sentence.c_str();
      failure.append_attribute("type") = "memsnap.limit";
      failure.append_child(pugi::node_pcdata).set_value((sentence + xml_safe(explanation)).c_str());
    } else if (result.status == LimitStatus::kNotApplicable) {
      test.append_child("skipped").append_attribute("message") = sentence.c_str();
    } else {
      test.append_child("system-out").append_child(pugi::node_pcdata).set_value(sentence.c_str());
    }
  }
}

std::string junit_of(const std::vector<const CheckReport*>& reports, int top) {
  pugi::xml_document doc;
  auto declaration = doc.append_child(pugi::node_declaration);
  declaration.append_attribute("version") = "1.0";
  declaration.append_attribute("encoding") = "UTF-8";
  size_t tests = 0, failures = 0, skipped = 0;
  for (const CheckReport* r : reports) {
    tests += r->results.size();
    failures += r->failed;
    skipped += r->not_checked;
  }
  auto suites = doc.append_child("testsuites");
  suites.append_attribute("name") = "memsnap check";
  suites.append_attribute("tests") = static_cast<unsigned long long>(tests);
  suites.append_attribute("failures") = static_cast<unsigned long long>(failures);
  suites.append_attribute("errors") = 0;
  suites.append_attribute("skipped") = static_cast<unsigned long long>(skipped);
  suites.append_attribute("time") = "0";
  for (const CheckReport* r : reports) append_junit_suite(suites, *r, top);
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

// ::error per violated limit, ::warning per limit not checked.
std::string github_lines(const CheckReport& r, const std::string& prefix) {
  std::string out;
  const std::string what_grew =
      r.baseline_file.empty() ? "" : " What grew at the peak: " + grown_list(r.sources, 3) + ".";
  for (const LimitResult& result : r.results) {
    if (result.status != LimitStatus::kFail) continue;
    out += fmt::format("::error title={}::{}{}{}\n",
                       github_property("memsnap check: " + prefix + result.limit.name()),
                       github_data(prefix), github_data(limit_sentence(result)),
                       github_data(what_grew));
  }
  for (const LimitResult& result : r.results) {
    if (result.status == LimitStatus::kNotApplicable) {
      out += fmt::format("::warning title={}::{}{}\n",
                         github_property("memsnap check: " + prefix + result.limit.name()),
                         github_data(prefix), github_data(limit_sentence(result)));
    }
  }
  for (const std::string& warning : warnings_of(r)) {
    out += fmt::format("::warning title={}::{}{}\n",
                       github_property("memsnap check: " + prefix + "file"), github_data(prefix),
                       github_data(printable(warning)));
  }
  return out;
}

std::string ranked_headline(const RankedCheck& r) {
  if (r.failed_ranks == 0) return "memsnap check: PASS, " + check_verdict(r);
  std::vector<std::string> failing;
  for (const CheckReport& report : r.ranks) {
    if (report.failed > 0) failing.push_back(rank_label(report));
  }
  std::string names;
  for (size_t i = 0; i < failing.size() && i < 8; ++i) names += (i ? ", " : "") + failing[i];
  if (failing.size() > 8) names += fmt::format(", ... ({} in all)", failing.size());
  return fmt::format("memsnap check: FAIL, {}: {}", check_verdict(r), names);
}

}  // namespace

std::string check_verdict(const CheckReport& r) {
  const std::string not_checked =
      r.not_checked == 0 ? "" : fmt::format(" ({} not checked)", r.not_checked);
  if (r.failed == 0) {
    return fmt::format("{} {}{}", r.checked(), r.checked() == 1 ? "limit holds" : "limits hold",
                       not_checked);
  }
  return fmt::format("{} of {} limits violated{}", r.failed, r.checked(), not_checked);
}

std::string check_verdict(const RankedCheck& r) {
  if (r.failed_ranks == 0) return fmt::format("every limit holds on all {} ranks", r.ranks.size());
  return fmt::format("{} of {} ranks violate {} limit{}", r.failed_ranks, r.ranks.size(),
                     r.failed_limits, r.failed_limits == 1 ? "" : "s");
}

std::string render_check_junit(const CheckReport& r, int top) {
  return junit_of({&r}, top);
}

std::string render_check_github(const CheckReport& r, int /*top*/) {
  return github_lines(r, "") + fmt::format("::notice title={}::{}\n",
                                           github_property("memsnap check"),
                                           github_data(headline(r)));
}

std::string render_check_text(const RankedCheck& r, int top) {
  std::string out = ranked_headline(r) + "\n";
  for (const CheckReport& report : r.ranks) {
    if (report.failed == 0) continue;
    // Appended piece by piece: GCC 12 warns (falsely, -Wrestrict) on "literal" + string.
    out += '\n';
    out += rank_label(report);
    out += ": ";
    out += render_check_text(report, top);
  }
  out += "\nPer rank\n";
  TextTable table({"rank", "absolute peak", "baseline's", "limits", "violated"},
                  {true, true, true, true, false});
  for (const CheckReport& report : r.ranks) {
    std::string violated;
    for (const LimitResult& result : report.results) {
      if (result.status == LimitStatus::kFail) {
        violated += (violated.empty() ? "" : ", ") + result.limit.name();
      }
    }
    table.add_row({report.rank ? std::to_string(*report.rank) : printable(report.current_file),
                   format_level_bytes(report.peak),
                   report.baseline_peak ? format_level_bytes(*report.baseline_peak) : "-",
                   std::to_string(report.checked()), violated.empty() ? "-" : violated});
  }
  out += table.render();
  if (const std::vector<std::string> warnings = passed_ranks_warnings(r); !warnings.empty()) {
    out += "\nWarnings of the ranks that passed\n";
    for (const std::string& warning : warnings) out += "  " + printable(warning) + "\n";
  }
  if (!r.only_current.empty()) {
    out += "\nNot checked against a baseline (no rank to match in the baseline run)\n";
    for (const std::string& path : r.only_current) out += "  " + printable(path) + "\n";
  }
  if (!r.only_baseline.empty()) {
    out += "\nIn the baseline run only (no rank to match in the current run)\n";
    for (const std::string& path : r.only_baseline) out += "  " + printable(path) + "\n";
  }
  return out;
}

ordered_json render_check_json(const RankedCheck& r, int top) {
  ordered_json ranks = ordered_json::array();
  ordered_json failing = ordered_json::array();
  for (const CheckReport& report : r.ranks) {
    ranks.push_back(render_check_json(report, top));
    if (report.failed > 0) {
      failing.push_back(report.rank ? ordered_json(*report.rank) : ordered_json(nullptr));
    }
  }
  return {{"passed", r.failed_ranks == 0},   {"exit_status", r.failed_ranks == 0 ? 0 : 3},
          {"ranks_checked", r.ranks.size()}, {"ranks_failed", r.failed_ranks},
          {"failed_ranks", failing},         {"ranks", ranks},
          {"only_current", r.only_current},  {"only_baseline", r.only_baseline}};
}

std::string render_check_junit(const RankedCheck& r, int top) {
  std::vector<const CheckReport*> reports;
  reports.reserve(r.ranks.size());
  for (const CheckReport& report : r.ranks) reports.push_back(&report);
  return junit_of(reports, top);
}

std::string render_check_github(const RankedCheck& r, int /*top*/) {
  std::string out;
  for (const CheckReport& report : r.ranks) out += github_lines(report, rank_label(report) + ": ");
  return out + fmt::format("::notice title={}::{}\n", github_property("memsnap check"),
                           github_data(ranked_headline(r)));
}

std::string render_check_markdown(const RankedCheck& r, int top) {
  std::string out = fmt::format(
      "### {}\n\n| rank | absolute peak | baseline's | violated |\n|---:|---:|---:|---|\n",
      md_cell(ranked_headline(r)));
  for (const CheckReport& report : r.ranks) {
    std::string violated;
    for (const LimitResult& result : report.results) {
      if (result.status == LimitStatus::kFail) {
        violated += violated.empty() ? "" : ", ";
        violated += md_code(result.limit.name());
      }
    }
    out += fmt::format("| {} | {} | {} | {} |\n", md_cell(rank_label(report)),
                       format_level_bytes(report.peak),
                       report.baseline_peak ? format_level_bytes(*report.baseline_peak) : "-",
                       violated.empty() ? ":white_check_mark:" : ":x: " + violated);
  }
  if (const std::vector<std::string> warnings = passed_ranks_warnings(r); !warnings.empty()) {
    out += "\n";
    for (const std::string& warning : warnings) out += "> :warning: " + md_cell(warning) + "\n>\n";
  }
  for (const CheckReport& report : r.ranks) {
    if (report.failed == 0) continue;
    out += "\n#### " + md_cell(rank_label(report)) + "\n\n";
    const std::string single = render_check_markdown(report, top);
    out += single.substr(single.find('\n') + 1);  // its own headline is the rank's title
  }
  return out;
}

std::string render_check_markdown(const CheckReport& r, int top) {
  std::string out = fmt::format("### {}\n\n", md_cell(headline(r)));
  if (!r.baseline_file.empty()) {
    out += fmt::format("Baseline {}: absolute peak {}; current {} ({}).\n\n",
                       md_code(r.baseline_file, /*in_table=*/false),
                       format_level_bytes(r.baseline_peak.value_or(0)), format_level_bytes(r.peak),
                       format_signed_bytes(r.peak - r.baseline_peak.value_or(0)));
  }
  for (const std::string& warning : warnings_of(r))
    out += "> :warning: " + md_cell(warning) + "\n\n";
  out += "| | limit | measured | allowed |\n|---|---|---:|---:|\n";
  for (const LimitResult& result : r.results) {
    const Unit unit = unit_of(result.limit.kind);
    const char* mark = result.status == LimitStatus::kFail            ? ":x:"
                       : result.status == LimitStatus::kNotApplicable ? ":heavy_minus_sign:"
                                                                      : ":white_check_mark:";
    out += fmt::format(
        "| {} | {} | {} | {} |\n", mark, md_code(result.limit.name()),
        result.status == LimitStatus::kNotApplicable
            ? md_cell(note_text(result))
            : md_cell(value_text(result.measured, unit)) +
                  (subject_text(result).empty() || result.limit.kind == LimitKind::kCategory
                       ? ""
                       : " (" + md_code(subject_text(result)) + ")"),
        md_cell(threshold_text(result)));
  }
  if (r.failed > 0 && !r.baseline_file.empty()) {
    out +=
        "\n**What grew** at each run's peak (current - baseline):\n\n| source | baseline | current "
        "| B - A |\n|---|---:|---:|---:|\n";
    for (const SourceDiff* row : grown(r.sources, top)) {
      out +=
          fmt::format("| {} | {} | {} | {} |\n", md_code(row->source), format_bytes(row->bytes_a),
                      format_bytes(row->bytes_b), format_signed_bytes(row->delta()));
    }
    out += "\n| category | baseline | current | B - A |\n|---|---:|---:|---:|\n";
    for (const SourceDiff* row : grown(r.categories, top)) {
      out +=
          fmt::format("| {} | {} | {} | {} |\n", md_code(row->source), format_bytes(row->bytes_a),
                      format_bytes(row->bytes_b), format_signed_bytes(row->delta()));
    }
  }
  if (r.failed > 0) {
    // Commands are one line each (shell_quote); the fence is longer than any
    // backtick run in them, so no file name can close the block.
    std::string commands;
    for (const std::string& command : investigate_commands(r)) commands += command + "\n";
    const std::string fence(std::max<size_t>(3, longest_run(commands, '`') + 1), '`');
    out += "\nTo look closer:\n\n" + fence + "sh\n" + commands + fence + "\n";
  }
  return out;
}

}  // namespace memsnap
