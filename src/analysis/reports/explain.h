// `memsnap explain FILE` (and a bare `memsnap FILE`): one page for a reader
// who does not know which command to run. A projection of the file's
// analysis: the devices and the one chosen, the peak and what was live then
// (memory from before the trace included, under its own source), the OOM and
// its verdict, the allocator at the peak, the steps, what the file lacks, and
// which commands to run next. Plain data; renderers format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/device_choice.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/reports/oom_report.h"

namespace memsnap {

struct ExplainOptions {
  SourceKeyOptions keys;
};

struct ExplainDevice {
  int device = 0;
  uint64_t entries = 0;
  uint64_t reserved = 0;  // at the dump
  uint64_t oom_count = 0;
};

struct ExplainPeak {
  int64_t absolute = 0;  // baseline + delta
  int64_t baseline = 0;  // live before the trace's first entry
  int64_t delta = 0;     // over the baseline
  uint64_t event = 0;    // index in the device's trace of the entry that reached it
  bool at_trace_start = false;
  std::optional<double> time_s;
  // Every row, largest first; the renderers show --top of them and sum the rest.
  std::vector<SourceUsage> by_category;
  std::vector<SourceUsage> by_source;
  bool includes_baseline = false;  // the tables name memory from before the trace too
  // The allocator then.
  uint64_t reserved = 0;  // reserved at the peak's entry
  std::optional<uint64_t> free_at_reserved_peak;
  std::optional<uint64_t> largest_free_at_reserved_peak;
  uint64_t reserved_peak = 0;
};

struct ExplainOom {
  uint64_t count = 0;  // oom entries on the device
  uint64_t event = 0;  // the first one's index in the device's trace
  std::optional<double> time_s;
  uint64_t request = 0;
  std::optional<uint64_t> device_free;
  int64_t live = 0;
  uint64_t reserved = 0;
  int64_t free = 0;
  std::optional<uint64_t> largest_usable;  // when the blocks at the moment are known
  std::vector<OomVerdict> verdicts;        // primary first
  std::string request_source;
  int64_t shortfall = 0;
  std::optional<OomPrediction> prediction;  // what other allocator settings would have done
};

struct ExplainSteps {
  uint64_t count = 0;  // complete step windows
  StepsInference origin;
  std::optional<int64_t> highest;
  int64_t highest_peak = 0;  // absolute
};

// What the file lacks, and so what the page cannot say.
enum class Lack : uint8_t {
  kNoTrace,         // no allocation history: only the dump's state
  kTraceTruncated,  // many frees without their alloc: the ring buffer wrapped, or a late start
  kNoStacks,        // entries carry no frames: sources are unknown
  // Entries carry no frames, yet the dump's blocks do (a 2.0 dump's
  // history): the names come from the blocks; JSON says no_stacks too.
  kNoTraceStacks,
  kNoTimes,        // entries carry no time_us: positions instead of seconds
  kNoBlockFrames,  // memory from before the trace has no frames
};
std::string_view lack_name(Lack lack);

// The commands worth running next, with this file's name (the renderer
// spells them).
enum class NextCommand : uint8_t {
  kOom,           // memsnap oom FILE
  kReplayToTime,  // at the peak's time: every source live then (the trace holds nearly all of it)
  kReplayToTimeTraced,  // the same command where much predates the trace: the traced part
  kReplayStep,          // the highest step
  kPlot,
  kSegments,
  kOtherDevice,  // explain --device D for another device's OOM
};

struct ExplainReport {
  std::string file;
  uint64_t file_size = 0;
  DeviceChoice choice;
  std::vector<ExplainDevice> devices;  // every device with data
  uint64_t event_count = 0;
  std::optional<double> duration_s;
  ExplainPeak peak;
  // Memory live before the trace, from blocks and frees; every row.
  std::vector<SourceUsage> baseline_by_category;
  std::vector<SourceUsage> baseline_by_source;
  std::optional<ExplainOom> oom;
  // The allocator at the dump.
  uint64_t reserved_at_dump = 0;
  uint64_t allocated_at_dump = 0;
  ExplainSteps steps;
  std::vector<Lack> lacks;
  // With kTraceTruncated: which cut (a wrapped ring buffer or a late start).
  TraceCut trace_cut = TraceCut::kRingBuffer;
  std::vector<NextCommand> next;
  std::optional<int> other_oom_device;  // for kOtherDevice
  // No segments and no trace entry on any device: nothing to explain.
  bool empty = false;
};

ExplainReport explain_file(const FileAnalysis& file, const ExplainOptions& options);

}  // namespace memsnap
