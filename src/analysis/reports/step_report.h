// replay-step: what happened in each profiler step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"

namespace memsnap {

struct StepReport {
  StepStats stats;
  double duration_ms = 0;
  int64_t absolute_peak = 0;
  std::vector<SourceUsage> sources_at_peak;  // every source live at the step's peak, largest first
  std::map<std::string, uint64_t> annotations;
};

struct ReplayStepResult {
  GroupBy group = GroupBy::kSource;  // what the source rows stand for
  std::string file;
  int device = 0;
  int64_t baseline = 0;
  StepsInference steps_origin;
  std::vector<StepReport> steps;
};

// Throws Error with the explanation of docs/design.md ("Steps") when there are no steps, and
// with the list of steps when `step` is unknown. step == nullopt: all steps.
ReplayStepResult replay_steps(const FileAnalysis& file, std::optional<int64_t> step,
                              const SourceKeyOptions& key_options);

}  // namespace memsnap
