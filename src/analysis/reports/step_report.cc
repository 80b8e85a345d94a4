#include "analysis/reports/step_report.h"

#include <fmt/format.h>
#include <algorithm>

#include "memsnap/error.h"

namespace memsnap {

ReplayStepResult replay_steps(const FileAnalysis& file, std::optional<int64_t> step,
                              const SourceKeyOptions& key_options) {
  if (file.steps().empty()) {
    // Name only what really works on this file.
    bool has_trace = file.trace().count() > 0;
    bool has_time = has_trace && file.time().timed();
    std::string works = !has_trace  ? "parse and compare (segments at dump time) still work; "
                                      "the file has no allocation history at all"
                        : !has_time ? "parse, compare and plot still work on this file "
                                      "(replay-to-time needs time_us, which it lacks)"
                                    : "parse, compare, plot and replay-to-time still work on "
                                      "this file";
    if (file.step_source() == StepSource::kNone) {
      throw Error(
          ErrorCode::kNoSteps,
          fmt::format(
              "{} has no steps: --steps none turns step detection off (--steps auto, the default, "
              "reads ProfilerStep annotations or infers iterations from Optimizer.step). {}.",
              file.path(), works));
    }
    const StepMarks marks = count_step_marks(file.snapshot(), file.trace());
    throw Error(
        ErrorCode::kNoSteps,
        fmt::format(
            "{} has no steps: {}. {}{}.", file.path(), no_steps_reason(file.step_source(), marks),
            profiler_advice_applies(marks)
                ? "The file is fine: step boundaries come from the PyTorch profiler (run the loop "
                  "under torch.profiler.profile(...) and call prof.step() each iteration; in "
                  "Megatron Bridge, use_pytorch_profiler=True in ProfilingConfig). "
                : "",
            works));
  }
  std::vector<const StepStats*> chosen;
  if (step) {
    const StepStats* stats = file.step(*step);
    if (stats == nullptr) {
      std::vector<int64_t> numbers;
      for (const StepStats& s : file.trace_analysis().steps) numbers.push_back(s.step.number);
      throw Error(ErrorCode::kStepNotFound, fmt::format("step {} is not in {}; available steps: {}",
                                                        *step, file.path(), step_ranges(numbers)));
    }
    chosen.push_back(stats);
  } else {
    for (const StepStats& s : file.trace_analysis().steps) chosen.push_back(&s);
  }
  // One pass for every step's peak: positions ascending.
  std::vector<size_t> order(chosen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return chosen[x]->peak_position(file.trace()) < chosen[y]->peak_position(file.trace());
  });
  std::vector<uint64_t> positions;
  positions.reserve(order.size());
  for (size_t i : order) positions.push_back(chosen[i]->peak_position(file.trace()));
  SourceIndex sources(file.snapshot(), key_options);
  std::vector<std::vector<SourceUsage>> at_peaks =
      live_by_source(file.snapshot(), file.trace(), sources, positions);

  const AnnotationCounter annotations(file.snapshot(), file.device());
  const int64_t trace_end = file.time().end_us();
  ReplayStepResult result;
  result.group = key_options.group;
  result.file = file.path();
  result.device = file.device();
  result.baseline = file.baseline().baseline_at_start;
  result.steps_origin = file.step_windows().inference();
  result.steps.resize(chosen.size());
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    StepReport& report = result.steps[i];
    report.stats = *chosen[i];
    report.duration_ms = chosen[i]->step.duration_ms();
    report.absolute_peak = file.step_absolute_peak(*chosen[i]);
    report.sources_at_peak = std::move(at_peaks[k]);
    int64_t end_us = chosen[i]->step.complete ? chosen[i]->step.end_us : trace_end;
    report.annotations = annotations.between(chosen[i]->step.start_us, end_us);
  }
  return result;
}

}  // namespace memsnap
