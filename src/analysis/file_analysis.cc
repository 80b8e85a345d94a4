#include "analysis/file_analysis.h"

#include <future>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "memsnap/error.h"

namespace memsnap {

const StepStats* FileAnalysis::step(int64_t number) const {
  // profiler_steps gives the steps in ascending number, one per number.
  auto found = std::lower_bound(
      analysis.steps.begin(), analysis.steps.end(), number,
      [](const StepStats& stats, int64_t wanted) { return stats.step.number < wanted; });
  return found != analysis.steps.end() && found->step.number == number ? &*found : nullptr;
}

int choose_device(const Snapshot& snapshot, std::optional<int> requested) {
  if (!requested) return snapshot.default_device();
  std::vector<int> in_use = snapshot.devices_in_use();
  bool known = std::find(in_use.begin(), in_use.end(), *requested) != in_use.end() ||
               snapshot.trace_of(*requested) != nullptr;
  if (!known) {
    throw Error(fmt::format("device {} is not in this snapshot (devices with data: {})", *requested,
                            in_use.empty() ? "none" : fmt::format("{}", fmt::join(in_use, ", "))));
  }
  return *requested;
}

DeviceTrace trace_or_empty(const Snapshot& snapshot, int device) {
  const DeviceTrace* trace = snapshot.trace_of(device);
  return trace != nullptr ? *trace : DeviceTrace{device, 0, 0};
}

FileAnalysis analyze_file(const std::string& path, const Snapshot& snapshot,
                          std::optional<int> device) {
  FileAnalysis file;
  file.path = path;
  file.snapshot = &snapshot;
  file.device = choose_device(snapshot, device);
  file.device_requested = device.has_value();
  file.trace = trace_or_empty(snapshot, file.device);
  file.segments = segment_totals(snapshot, file.device);
  file.reserved = reserved_history(snapshot, file.trace, file.segments.total_size);
  // The allocator replay only reads the model: it runs beside the trace's
  // analysis (two cores are the common case).
  auto replayed =
      std::async(std::launch::async, [&snapshot, trace = file.trace, reserved = file.reserved] {
        std::pair<std::shared_ptr<const AllocatorHistory>, FragmentationHistory> out;
        if (trace.count() == 0) return out;
        out.first = std::make_shared<const AllocatorHistory>(snapshot, trace.device);
        out.second = fragmentation_history(*out.first, reserved_peak_position(reserved, trace));
        return out;
      });
  file.steps = profiler_steps(snapshot, file.device);
  file.analysis = analyze_trace(snapshot, file.trace, file.steps);
  std::tie(file.history, file.fragmentation) = replayed.get();
  file.baseline = compute_baseline(file.segments, file.analysis.totals);
  return file;
}

std::string step_ranges(const std::vector<int64_t>& numbers) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(numbers[i])
                           : fmt::format("{}-{}", numbers[i], numbers[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace memsnap
