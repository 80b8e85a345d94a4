#include "report/findings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/format.h"
#include "util/utf8.h"

namespace memsnap {
std::string trace_cut_text(TraceCut cut, uint64_t entries) {
  if (cut == TraceCut::kRingBuffer) {
    return fmt::format(
        "the trace holds {} entries, a round number: its ring buffer wrapped at max_entries and "
        "kept only the newest; raise max_entries in _record_memory_history to see the whole run",
        format_count(entries));
  }
  return fmt::format(
      "recording started after those allocations were made (the trace holds {} entries, not "
      "the round max_entries a wrapped ring buffer holds); start _record_memory_history earlier, "
      "before the model is built, to see them (raising max_entries does not help)",
      format_count(entries));
}

namespace {

const char* side_name(Side side) {
  return side == Side::kA ? "A" : "B";
}
const char* other_side_name(Side side) {
  return side == Side::kA ? "B" : "A";
}

std::string say(const finding::NoHistory& f) {
  return std::string(
             "no allocation history for this device: call "
             "torch.cuda.memory._record_memory_history() before the code you want to see "
             "(the segments are the state at dump time") +
         (f.sources_from_blocks ? "; their blocks name what was live, by source, below)" : ")");
}
std::string say(const finding::TruncatedTrace& f) {
  return fmt::format("{} of {} frees ({}) have no alloc in the trace: {}", f.unmatched_frees,
                     f.frees, format_bytes(f.unmatched_bytes), trace_cut_text(f.cut, f.entries));
}
std::string say(const finding::LargeBaseline& f) {
  return fmt::format(
      "{} was already allocated when the trace starts: recording started after those "
      "allocations were made, so the trace gives them no source{}",
      format_bytes(f.bytes),
      f.sources_from_blocks
          ? "; the dump's blocks name what was live at the dump (memsnap parse lists them, "
            "memsnap explain names them by category)"
          : " (memsnap explain names them by category: persistent where they have no frames)");
}
std::string say(const finding::NegativeBaseline& f) {
  return fmt::format(
      "baseline is negative ({}): the trace holds more live memory than the segments; the "
      "snapshot's segments and trace disagree",
      format_signed_bytes(f.bytes));
}
std::string say(const finding::NoTimestamps& /*unused*/) {
  return "trace entries carry no time_us (PyTorch before 2.2): time-based views "
         "(--time, steps) are unavailable";
}
std::string say(const finding::OutOfMemory& f) {
  return fmt::format(
      "out of memory on device {}: a request of {} failed{}", f.device, format_bytes(f.requested),
      f.device_free ? fmt::format(" with {} free on the device", format_bytes(*f.device_free))
                    : std::string());
}
std::string say(const finding::MoreOutOfMemory& f) {
  return fmt::format(
      "and {} more oom entries on device {} ({} in all): memsnap oom --at N shows each",
      format_count(f.more), f.device, format_count(f.total));
}
std::string say(const finding::MalformedEntries& f) {
  return fmt::format("{} malformed trace entries were skipped", f.count);
}
std::string say(const finding::MalformedSegments& f) {
  return fmt::format(
      "{} malformed segments and {} malformed blocks were skipped (a size that is negative or "
      "beyond 16 TiB, or a device that is no CUDA ordinal): segment totals leave them out",
      f.segments, f.blocks);
}
std::string say(const finding::MalformedAnnotations& f) {
  return fmt::format(
      "{} malformed annotations were skipped (no name, a device that is no CUDA ordinal, or a "
      "time_us that is no timestamp)",
      f.count);
}
std::string say(const finding::TruncatedStrings& f) {
  return fmt::format(
      "{} strings (frame names, annotations, metadata, settings) were longer than {} MiB and are "
      "cut to it",
      f.count, kMaxStringBytes >> 20);
}
std::string say(const finding::BytesNotRead& f) {
  const auto bytes = [](uint64_t n) { return format_count(n) + (n == 1 ? " byte" : " bytes"); };
  std::vector<std::string> parts;
  if (f.after_stop != 0) {
    parts.push_back(
        fmt::format("{} after the pickle's STOP opcode were not read", bytes(f.after_stop)));
  }
  if (f.after_compressed != 0) {
    parts.push_back(fmt::format(
        "{} after the last gzip member start no member and were ignored, as gunzip does",
        bytes(f.after_compressed)));
  }
  return fmt::format("{}: the file was appended to, or holds more than one dump",
                     fmt::join(parts, "; "));
}
std::string say(const finding::MalformedField& f) {
  return fmt::format("'{}' is {}, not a list: left out", f.field, f.found);
}
std::string say(const finding::UnreadSetting& f) {
  // What the allocator does without the setting, which is how it is read.
  const std::string_view read_as = f.key == "expandable_segments" ? "off"
                                   : f.key == "max_split_size"    ? "unlimited"
                                                                  : "not set";
  const std::string_view kept = utf8_prefix(f.value, 64);
  const std::string value = printable(kept) + (kept.size() < f.value.size() ? "..." : "");
  return fmt::format(
      "allocator_settings.{} is {}, which is no value PyTorch writes there: read as {}",
      printable(f.key), value, read_as);
}
std::string say(const finding::FlatDeviceTraces& /*unused*/) {
  return "device_traces holds trace entries directly instead of one list per device: they "
         "were read as device 0's trace";
}
std::string say(const finding::TimesGoBackwards& f) {
  return fmt::format(
      "{} trace entries have a time_us earlier than the entry before them: the trace is not in "
      "time order, so times, durations and --time positions are approximate (the trace span is "
      "from the earliest to the latest time)",
      f.count);
}
std::string say(const finding::StepsEndBeforeStart& f) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < f.numbers.size() && i < 10; ++i)
    shown.push_back(fmt::format("{}", f.numbers[i]));
  return fmt::format(
      "{} ProfilerStep windows end before they start (step {}{}): their END is ignored and "
      "they count as incomplete",
      f.numbers.size(), fmt::join(shown, ", "), f.numbers.size() > 10 ? ", ..." : "");
}
std::string say(const finding::UnusableTimes& f) {
  return fmt::format(
      "{} trace entries have a time_us that is no timestamp (a float, negative, or beyond 2^53 "
      "us): they count as entries without time",
      f.count);
}
std::string other_devices_text(const finding::OtherDevices& f, const ChooseDevice& how) {
  std::vector<int> others = f.devices;
  std::erase(others, f.analysed);
  return fmt::format(
      "{}this report is device {} ({}); the file also has data on device{} {} (choose one with "
      "{}){}",
      f.side ? fmt::format("{}: ", side_name(*f.side)) : std::string(), f.analysed,
      device_reason_text(f.reason), others.size() == 1 ? "" : "s", fmt::join(others, ", "), how.any,
      f.oom_devices.empty()
          ? std::string()
          : fmt::format("; out of memory on device {}: see {}{}{}", fmt::join(f.oom_devices, ", "),
                        how.one_before, f.oom_devices.front(), how.one_after));
}
std::string say(const finding::OtherDevices& f) {
  return other_devices_text(f, ChooseDevice{});
}
std::string say(const finding::NoTrace& f) {
  if (f.a && f.b) {
    return "neither file has an allocation trace (record one with "
           "torch.cuda.memory._record_memory_history()): only the state at the dump compares "
           "(segments, and the blocks' sources where they carry frames)";
  }
  return fmt::format(
      "{} has no allocation trace (record one with torch.cuda.memory._record_memory_history()): "
      "its peaks and sources are empty, compare the segments",
      f.a ? "A" : "B");
}
std::string say(const finding::CudaGraphsLikely& f) {
  std::string scope = f.step ? fmt::format("in step {}", *f.step) : "over the trace";
  return fmt::format(
      "{} makes {:.1f}x the allocations of {} {} ({} vs {}): CUDA graphs likely (a graph "
      "replay allocates nothing per step; its memory sits in a private pool)",
      side_name(f.more), f.ratio, other_side_name(f.more), scope, format_count(f.more_count),
      format_count(f.fewer_count));
}
std::string say(const finding::TopSourcesShare& f) {
  return fmt::format("the top {} sources account for {} of the per-source difference {}", f.sources,
                     format_percent(f.share), f.at_dump ? "at the dump" : "at the peak");
}
std::string say(const finding::SideTruncated& f) {
  return fmt::format(
      "{}: {} of {} frees have no alloc in the trace: {}; its peaks cover only the recorded "
      "part",
      side_name(f.side), format_count(f.unmatched_frees), format_count(f.frees),
      f.cut == TraceCut::kRingBuffer ? "its ring buffer wrapped (max_entries)"
                                     : "recording started after those allocations were made");
}
std::string say(const finding::BaselinesDiffer& f) {
  return fmt::format(
      "baselines differ (A {}, B {}): one trace probably started after model construction; "
      "compare peak deltas rather than absolute peaks",
      format_signed_bytes(f.a), format_signed_bytes(f.b));
}
std::string say(const finding::DifferentDevices& f) {
  return fmt::format("different devices compared: A is device {}, B is device {}", f.a, f.b);
}
std::string say(const finding::PrivatePoolsOneSide& f) {
  return fmt::format(
      "private pools (CUDA graphs or MemPools) only in {}: {} segments, {} reserved that the "
      "other run's allocator does not have; `memsnap segments` shows them by pool",
      side_name(f.side), format_count(f.segments), format_bytes(f.reserved));
}
std::string say(const finding::DifferentRanks& f) {
  return fmt::format(
      "the file names suggest different ranks (_{} vs _{}): ranks can "
      "legitimately differ in memory",
      f.a, f.b);
}

// ---- what a summary cannot measure ----
std::string say(const std::monostate& /*unused*/) {
  return {};
}
std::string say(const doubt::SkippedDump& d) {
  return fmt::format("{} malformed segments and {} malformed blocks were skipped", d.segments,
                     d.blocks);
}
std::string say(const doubt::SkippedEntries& d) {
  return fmt::format("{} malformed trace entries were skipped", d.count);
}
std::string say(const doubt::DumpBelowTrace& d) {
  return fmt::format(
      "the dump's segments hold {} bytes less than the trace leaves live (the dump does not "
      "match the trace)",
      d.bytes);
}
std::string say(const doubt::TraceReleasesMore& d) {
  return fmt::format(
      "the trace releases {} bytes more segment memory than the dump holds (the dump does not "
      "match the trace)",
      d.bytes);
}
std::string say(const doubt::ReservedBelowAbsolute& d) {
  return fmt::format(
      "the reserved peak ({} bytes) is below the absolute peak ({} bytes): segments are missing",
      d.reserved_peak, d.absolute_peak);
}
std::string say(const doubt::InWords& d) {
  return d.words;
}

}  // namespace

std::string phrase(const Finding& finding) {
  return std::visit([](const auto& f) { return say(f); }, finding);
}

std::string device_choice_note(const std::string& path, const DeviceChoice& choice,
                               const ChooseDevice& how) {
  std::vector<int> oom_elsewhere = choice.oom_devices;
  std::erase(oom_elsewhere, choice.device);
  return fmt::format(
      "{}: {}", path,
      other_devices_text(finding::OtherDevices{std::nullopt, choice.device, choice.reason,
                                               choice.devices, oom_elsewhere},
                         how));
}

std::string phrase(const Doubt& doubt) {
  return std::visit([](const auto& d) { return say(d); }, doubt);
}

std::vector<std::string> phrase_all(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  out.reserve(findings.size());
  for (const Finding& finding : findings) out.push_back(phrase(finding));
  return out;
}

std::string steps_inferred_note(const StepsInference& inference) {
  switch (inference.origin) {
    case StepOrigin::kOptimizerAnnotations:
      return fmt::format(
          "Steps are inferred (no ProfilerStep marks): one training iteration per '{}' mark, "
          "from the data loader's next batch (or the previous iteration's end) to the "
          "optimizer step's end; --steps none leaves them out.",
          printable(inference.from));
    case StepOrigin::kOptimizerFrames:
      return "Steps are inferred (no ProfilerStep or optimizer marks): one training iteration "
             "per run of allocations inside torch/optim/, ending where the next allocation "
             "outside it begins; --steps none leaves them out.";
    case StepOrigin::kNone:
    case StepOrigin::kProfiler: break;
  }
  return {};
}

nlohmann::ordered_json steps_source_json(const StepsInference& inference) {
  return {{"kind", step_origin_name(inference.origin)},
          {"inferred", steps_are_inferred(inference.origin)},
          {"from", inference.from}};
}

}  // namespace memsnap
