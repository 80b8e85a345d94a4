#include "runs/multi_file.h"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "formats/summary_json.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "report/findings.h"
#include "report/format.h"
#include "util/glibc_malloc.h"

namespace memsnap {

namespace {

constexpr uint64_t kHeadBytes = uint64_t{1} << 20;  // what a file's identity hashes

// In a folder: snapshots (.pickle, .pkl, .pt, each optionally .gz or .zst)
// and summaries as `summarize -o` names them (.summary.json), so other JSON
// beside them (a reduce's ranks.json) is left alone.
bool summarisable_name(const std::string& name) {
  if (name.ends_with(".summary.json")) return true;
  std::string stem = name;
  for (const char* compressed : {".gz", ".zst"}) {
    if (stem.size() > std::string_view(compressed).size() && stem.ends_with(compressed)) {
      stem.resize(stem.size() - std::string_view(compressed).size());
    }
  }
  return stem.ends_with(".pickle") || stem.ends_with(".pkl") || stem.ends_with(".pt");
}

// Names in the order a person reads them: runs of digits compare as numbers,
// so snapshot_2 comes before snapshot_10.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const bool digit_a = a[i] >= '0' && a[i] <= '9';
    const bool digit_b = b[j] >= '0' && b[j] <= '9';
    if (digit_a && digit_b) {
      size_t end_a = i;
      size_t end_b = j;
      while (end_a < a.size() && a[end_a] >= '0' && a[end_a] <= '9') ++end_a;
      while (end_b < b.size() && b[end_b] >= '0' && b[end_b] <= '9') ++end_b;
      std::string_view run_a(a.data() + i, end_a - i);
      std::string_view run_b(b.data() + j, end_b - j);
      while (run_a.size() > 1 && run_a.front() == '0') run_a.remove_prefix(1);
      while (run_b.size() > 1 && run_b.front() == '0') run_b.remove_prefix(1);
      if (run_a.size() != run_b.size()) return run_a.size() < run_b.size();
      if (run_a != run_b) return run_a < run_b;
      i = end_a;
      j = end_b;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // equal as numbers (leading zeros): still a strict order
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& arguments) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  for (const std::string& argument : arguments) {
    std::error_code error;
    if (argument == "-" || !fs::is_directory(argument, error)) {
      paths.push_back(argument);
      continue;
    }
    std::vector<std::string> found;
    for (const fs::directory_entry& entry : fs::directory_iterator(argument, error)) {
      std::error_code kind;
      if (entry.is_regular_file(kind) && summarisable_name(entry.path().filename().string())) {
        found.push_back(entry.path().string());
      }
    }
    if (error)
      throw Error(ErrorCode::kUnreadable,
                  fmt::format("{}: cannot list the folder: {}", argument, error.message()));
    if (found.empty()) {
      throw Error(
          ErrorCode::kBadParameter,
          fmt::format(
              "{}: no snapshot or summary in this folder (.pickle, .pkl or .pt, each optionally "
              ".gz or .zst, or .summary.json)",
              argument));
    }
    std::sort(found.begin(), found.end(), natural_less);
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

void refuse_stdin_twice(const std::vector<std::string>& paths) {
  if (std::count(paths.begin(), paths.end(), std::string("-")) > 1) {
    throw Error(ErrorCode::kBadParameter,
                "stdin ('-') can be read once; give the other inputs as files");
  }
}

RunSummary summary_of(const std::string& path, const RunInputs& inputs, const RunListener& listener,
                      bool& from_summary) {
  from_summary = false;
  // stdin is read whole first: a summary or a snapshot, told by its bytes.
  const std::vector<uint8_t> piped =
      path == "-" ? read_stdin(inputs.load.max_input_bytes != 0 ? inputs.load.max_input_bytes
                                                                : default_max_input_bytes())
                  : std::vector<uint8_t>{};
  const std::vector<uint8_t> head =
      path == "-" ? std::vector<uint8_t>(
                        piped.begin(), piped.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(
                                                           piped.size(), kHeadBytes)))
                  : read_file_head(path, kHeadBytes);
  const std::string_view head_text(reinterpret_cast<const char*>(head.data()), head.size());
  if (looks_like_json(head_text)) {
    from_summary = true;
    if (path == "-") {
      return read_summary_json(
          std::string_view(reinterpret_cast<const char*>(piped.data()), piped.size()), "<stdin>");
    }
    if (head.size() < kHeadBytes) return read_summary_json(head_text, path);
    std::vector<uint8_t> whole = read_file_head(path, kMaxSummaryBytes + 1);
    return read_summary_json(
        std::string_view(reinterpret_cast<const char*>(whole.data()), whole.size()), path);
  }
  RunSummary summary;
  {
    const Snapshot snapshot = path == "-" ? load_snapshot_bytes(piped, "<stdin>", inputs.load)
                                          : load_snapshot(path, inputs.load);
    const FileAnalysis file(path, snapshot, inputs.device, listener.parts, inputs.steps);
    note_device_choice(file, listener);
    summary =
        run_summary(file, SummaryOptions{inputs.keys, rank_from_name(path, inputs.rank_pattern)});
  }  // the snapshot is gone before the next file loads
#if defined(MEMSNAP_GLIBC_MALLOC)
  // glibc keeps freed memory in the thread's arena; give it back so that
  // memory holds about `jobs` snapshots however many files are read.
  if (listener.trim_heap) malloc_trim(0);
#endif
  summary.head_hash = head_hash(head);
  return summary;
}

std::vector<SummaryOutcome> summarize_all(const std::vector<std::string>& paths,
                                          const RunInputs& inputs, const RunListener& listener) {
  refuse_stdin_twice(paths);
  // A bad rank pattern fails before any work.
  check_rank_pattern(inputs.rank_pattern, spelled(listener, "rank_from"));
  std::vector<SummaryOutcome> outcomes(paths.size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t jobs =
      std::min<size_t>(paths.size(), inputs.jobs > 0 ? static_cast<size_t>(inputs.jobs) : cores);
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex heard;    // one listener call at a time
  RunListener serial;  // the listener, one call at a time
  serial.trim_heap = listener.trim_heap;
  serial.spell = listener.spell;  // a pure function of its argument: safe from any thread
  if (listener.note) {
    serial.note = [&](const std::string& note) {
      const std::lock_guard<std::mutex> lock(heard);
      listener.note(note);
    };
  }
  if (listener.parts) {
    serial.parts = [&](const PartTiming& timing) {
      const std::lock_guard<std::mutex> lock(heard);
      listener.parts(timing);
    };
  }
  auto work = [&] {
    for (size_t i = next++; i < paths.size(); i = next++) {
      SummaryOutcome& outcome = outcomes[i];
      outcome.path = paths[i];
      try {
        outcome.summary = summary_of(paths[i], inputs, serial, outcome.from_summary_file);
      } catch (const Error& error) {
        outcome.error = error.what();
      } catch (const std::bad_alloc&) {
        outcome.error = fmt::format("{}: out of memory (read fewer files at once)", paths[i]);
      }
      const size_t finished = ++done;
      if (listener.progress) {
        const std::lock_guard<std::mutex> lock(heard);
        listener.progress(finished, paths.size());
      }
    }
  };
  {
    std::vector<std::jthread> threads;  // joined before the outcomes are read
    for (size_t k = 1; k < jobs; ++k) {
      try {
        threads.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no thread to be had: fewer at once
      }
    }
    work();
  }
  return outcomes;
}

SummarySet split_outcomes(std::vector<SummaryOutcome>& outcomes, size_t begin, size_t end) {
  SummarySet set;
  for (size_t i = begin; i < end; ++i) {
    SummaryOutcome& outcome = outcomes[i];
    if (!outcome.summary) {
      set.unread.push_back({outcome.path, outcome.error});
      continue;
    }
    set.from_summary_file.push_back(outcome.from_summary_file);
    set.summaries.push_back(std::move(*outcome.summary));
  }
  return set;
}

std::string spelled(const RunListener& listener, std::string_view id) {
  return listener.spell ? listener.spell(id) : std::string(id);
}

std::string duplicate_rank_message(const std::vector<RunSummary>& run,
                                   const DuplicateRank& duplicate, const RunListener& listener) {
  return fmt::format(
      "{} and {} both have rank {}: name the ranks apart with {} REGEX (its first "
      "group is the rank)",
      run[duplicate.first].path, run[duplicate.second].path, duplicate.rank,
      spelled(listener, "rank_from"));
}

void note_device_choice(const FileAnalysis& file, const RunListener& listener) {
  const DeviceChoice& choice = file.device_choice();
  if (listener.note && choice.reason != DeviceReason::kRequested && choice.others()) {
    // "--device N" where the caller spells flags, "device=N" where keywords.
    const std::string name = spelled(listener, "device");
    const std::string joiner = name.starts_with("--") ? " " : "=";
    const std::string any = name + joiner + "N";
    const std::string one = name + joiner;
    listener.note(printable(device_choice_note(file.path(), choice, ChooseDevice{any, one, ""})));
  }
}

void note_duplicate_rank(const std::vector<RunSummary>& run, const RunListener& listener) {
  if (!listener.note) return;
  if (const std::optional<DuplicateRank> duplicate = duplicate_rank(run)) {
    listener.note("warning: " + duplicate_rank_message(run, *duplicate, listener));
  }
}

}  // namespace memsnap
