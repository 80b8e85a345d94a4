// `memsnap compare RUN_A_DIR RUN_B_DIR`: text and JSON of a RunComparison,
// with the full compare of the rank that grew most when both of its files
// are snapshots.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/compare.h"
#include "analysis/reports/run_compare.h"
#include "report/ranks_render.h"

namespace memsnap {

struct RunCompareView {
  std::string dir_a, dir_b;
  const std::vector<RunSummary>* a = nullptr;
  const std::vector<RunSummary>* b = nullptr;
  const RunComparison* comparison = nullptr;
  const CompareResult* drill = nullptr;  // the rank that grew most, compared in full (or null)
  std::vector<UnreadableFile> unread;
};

std::string render_run_compare_text(const RunCompareView& view, int top);
nlohmann::ordered_json render_run_compare_json(const RunCompareView& view, int top);

}  // namespace memsnap
