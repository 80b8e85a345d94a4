// Findings in words: the one place they are phrased.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/core/findings.h"
#include "analysis/core/steps.h"
#include "analysis/reports/run_summary.h"

namespace memsnap {

std::string phrase(const Finding& finding);
// What a truncated trace's cut means and what to do about it (parse's
// warning, explain's "what the file lacks").
std::string trace_cut_text(TraceCut cut, uint64_t entries);
std::vector<std::string> phrase_all(const std::vector<Finding>& findings);
// Why a summary's measure cannot be trusted; empty when it holds. Summary
// files store these words (formats/summary_json.h).
std::string phrase(const Doubt& doubt);
// The line every command prints on stderr when the file has data on devices
// its report does not show: "memsnap: FILE: this report is device 1 (it ran
// out of memory); the file also has data on devices 0, 2 (...)".
// How the caller's reader picks a device: "--device N" and "--device 1" on
// the command line; Python says load(..., device=N) and .on_device(1).
struct ChooseDevice {
  std::string_view any = "--device N";
  std::string_view one_before = "--device ";
  std::string_view one_after;
};
std::string device_choice_note(const std::string& path, const DeviceChoice& choice,
                               const ChooseDevice& how = {});
// Where inferred steps came from, as one sentence ("Steps are inferred: ...");
// empty for ProfilerStep markers and for no steps.
std::string steps_inferred_note(const StepsInference& inference);
// {"kind": "profiler" | "optimizer_annotations" | "optimizer_frames" | "none",
//  "inferred": bool, "from": string}: every report's `steps_source`.
nlohmann::ordered_json steps_source_json(const StepsInference& inference);

}  // namespace memsnap
