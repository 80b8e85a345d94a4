// A compact summary of one run's file (one rank of a distributed job): what
// `memsnap summarize` writes and `memsnap ranks` reads back. Everything the
// many-rank reports need comes from it, so a reduce over thousands of ranks
// never opens a pickle. Plain data; report/summary_json.h writes and reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/file_analysis.h"
#include "analysis/core/findings.h"
#include "analysis/core/segments.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/reports/parse_report.h"
#include "memsnap/model.h"

namespace memsnap {

// How many source rows a summary keeps (live at the peak, throughput), and
// how many steps (the highest peaks, when a run has more): a summary stays
// within a few hundred KB whatever the trace's length.
constexpr size_t kSummarySources = 200;
constexpr size_t kSummarySteps = 1024;
// How many oom entries a summary lists (the first ones; it counts them all):
// a run that failed thousands of requests stays a few KB.
constexpr size_t kSummaryOoms = 8;
// A source name in a summary is cut to this many bytes (at a character's
// start, then "..."): a frame name of a megabyte would otherwise make the
// summary hundreds of MB. Two names that agree this far become one row.
constexpr size_t kSummarySourceBytes = 1024;

struct SummaryStep {
  int64_t number = 0;
  bool complete = false;
  double duration_ms = 0;
  int64_t absolute_peak = 0;
  int64_t peak_delta = 0;
};

struct SummaryOom {
  uint64_t event = 0;
  uint64_t requested = 0;
  std::optional<uint64_t> device_free;
  std::optional<double> time_s;
};

// Why a file cannot give a measure, as a kind and its numbers; only
// report/findings.h puts it in words. `memsnap check` fails a limit on such a
// measure unless --allow-unmeasured: "reserved peak 0 B, PASS" from a file
// whose segments were all unreadable would slip a regression past the gate.
namespace doubt {
struct SkippedDump {  // malformed segments and blocks were left out of the totals
  uint64_t segments = 0;
  uint64_t blocks = 0;
};
struct SkippedEntries {  // malformed trace entries were left out of the replay
  uint64_t count = 0;
};
struct DumpBelowTrace {  // the dump's segments hold less than the trace leaves live
  int64_t bytes = 0;
};
struct TraceReleasesMore {  // the trace releases more segment memory than the dump holds
  int64_t bytes = 0;
};
struct ReservedBelowAbsolute {  // segments are missing from the dump
  uint64_t reserved_peak = 0;
  int64_t absolute_peak = 0;
};
// Read back from a summary file, which keeps the words it was written with.
struct InWords {
  std::string words;
};
}  // namespace doubt

// std::monostate: the measure holds.
using Doubt =
    std::variant<std::monostate, doubt::SkippedDump, doubt::SkippedEntries, doubt::DumpBelowTrace,
                 doubt::TraceReleasesMore, doubt::ReservedBelowAbsolute, doubt::InWords>;

inline bool holds(const Doubt& doubt) {
  return std::holds_alternative<std::monostate>(doubt);
}

// Each measure a file may not give, with why.
struct SummaryDoubts {
  Doubt absolute;       // absolute peak, growth, step peaks
  Doubt reserved;       // reserved peak
  Doubt fragmentation;  // fragmentation at the dump
  Doubt trace;          // anything from the trace entries: peak delta, what grew, OOMs
};

struct SummaryThroughput {
  std::string source;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

// The implicit move is noexcept; clang-tidy cannot see through
// nlohmann::json's invariant assertions.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct RunSummary {
  // The file: its path as given, size on disk, and a hash of its first MiB
  // (XXH3-128, hex) that tells two copies of one file apart from two files.
  std::string path;
  uint64_t size_bytes = 0;
  std::string head_hash;
  std::string compression;  // none, gzip, zstd
  std::optional<int64_t> rank;
  int device = 0;
  std::vector<int> devices;
  GroupBy group = GroupBy::kSource;           // what the source rows name
  nlohmann::ordered_json allocator_settings;  // null when the file has none
  SegmentTotals segments;
  PeakFacts facts;                 // parse's, as it reported them
  std::vector<SummaryStep> steps;  // by number; the kSummarySteps highest when there are more
  uint64_t step_count = 0;         // steps in the trace
  StepsInference steps_origin;     // ProfilerStep marks, or iterations inferred from the optimizer
  // With no steps, from a snapshot (a summary file keeps neither): what
  // --steps asked and the marks there are, for the note that says why.
  StepSource step_source = StepSource::kAuto;
  std::optional<StepMarks> step_marks;
  // Live at the absolute peak, top kSummarySources, largest first; sums of
  // every row (the list may be cut).
  std::vector<SourceUsage> live_at_peak;
  uint64_t live_at_peak_sources = 0;
  uint64_t live_at_peak_bytes = 0;
  std::vector<SourceUsage> live_at_peak_by_category;
  std::vector<SummaryThroughput> throughput;  // top kSummarySources by allocated bytes
  uint64_t throughput_sources = 0;
  std::vector<SummaryOom> ooms;  // the first kSummaryOoms oom entries
  uint64_t oom_count = 0;        // every oom entry on the device
  SummaryDoubts doubts;
  // What parse warns of, for check's reports: typed for a summary made from a
  // snapshot, in words (`warnings`) for one read from a summary file.
  std::vector<Finding> findings;
  std::vector<std::string> warnings;
};

struct SummaryOptions {
  SourceKeyOptions keys;
  std::optional<int64_t> rank;  // from the file name (see rank_from_name), if any
};

// The summary of an analysed file: parse's report and the trace analysis'
// step windows (no second replay), plus what was live at the peak. `head_hash`
// (the file's bytes on disk) is the caller's to fill.
RunSummary run_summary(const FileAnalysis& file, const SummaryOptions& options);

// The rank in a file name: the first capture group of `pattern` searched in
// the name without its folder (throws a usage Error when the pattern is not
// a valid regex or has no group). The default pattern takes the number at
// the end of the name, before its extensions (.pickle, .pkl, .json,
// .summary, .gz, .zst), after `_`, `-`, `.` or `rank`: snapshot_12.pickle,
// rank3.pkl.gz, trace-0007.pickle.
inline constexpr const char* kDefaultRankPattern =
    R"((?:^|[_.\-]|rank)(\d+)(?:\.summary)?(?:\.json|\.pickle|\.pkl)?(?:\.gz|\.zst)?$)";
std::optional<int64_t> rank_from_name(const std::string& path, const std::string& pattern);
// Throws the usage Error rank_from_name would, naming the pattern `name`.
void check_rank_pattern(const std::string& pattern, std::string_view name);

}  // namespace memsnap
