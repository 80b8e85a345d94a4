#include "cli/options.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "cli/output.h"
#include "cli/usage.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "report/findings.h"
#include "report/format.h"
#include "runs/multi_file.h"

namespace memsnap::cli {
namespace {

constexpr uint64_t kProgressThreshold = uint64_t{64} << 20;

service::SessionOptions session_options(const std::string& path, const CommonOptions& common,
                                        bool show_progress, bool walk_beside_read) {
  service::SessionOptions session;
  session.observer = timing_observer(common);
  session.steps = common.steps;
  // The allocator replay walks the trace on another core while it is read
  // (a thread and a walk per file: for a file or two, not for a directory).
  session.walk_beside_read = walk_beside_read;
  LoadOptions& options = session.load;
  options.allow_objects = common.allow_objects;
  options.max_input_bytes = common.max_input_bytes;
  if (show_progress && !output_captured() && ::isatty(STDERR_FILENO) != 0) {
    options.on_progress = [path = printable(path), last_percent = -1, last_mib = uint64_t{0}](
                              uint64_t done, uint64_t total) mutable {
      if (total == 0) {  // still inflating: the size is not known yet
        if (done < kProgressThreshold || done >> 24 == last_mib) return;  // every 16 MiB
        last_mib = done >> 24;
        std::fprintf(stderr, "\rmemsnap: reading %s (%s, inflating)", path.c_str(),
                     format_bytes(done).c_str());
        std::fflush(stderr);
        return;
      }
      if (total < kProgressThreshold) return;
      int percent =
          static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
      if (percent == last_percent) return;  // at most 101 updates, whatever the size
      last_percent = percent;
      std::fprintf(stderr, "\rmemsnap: reading %s %3d%% (%s of %s)", path.c_str(), percent,
                   format_bytes(done).c_str(), format_bytes(total).c_str());
      if (done >= total) std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    };
  }
  return session;
}

// Long inputs are cut in messages.
std::string shown(const std::string& input) {
  return input.size() <= 24 ? input : input.substr(0, 24) + "...";
}

}  // namespace

CLI::Validator one_of(std::vector<std::string> words) {
  return {[words = std::move(words)](std::string& value) -> std::string {
            if (std::find(words.begin(), words.end(), value) != words.end()) return {};
            const std::vector<std::string> near = nearest_words(value, words);
            return fmt::format(
                "'{}' is not one of {}{}", printable(shown(value)), fmt::join(words, ", "),
                near.empty() ? "" : fmt::format("; did you mean {}?", fmt::join(near, " or ")));
          },
          ""};
}

CLI::Validator whole_number_at_least(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& input) -> std::string {
        long long value = 0;
        auto [end, error] = std::from_chars(input.data(), input.data() + input.size(), value);
        const bool digits = end == input.data() + input.size();
        if (error == std::errc::result_out_of_range && digits && input.front() != '-') {
          // A number past the upper bound, not a word that is no number.
          return fmt::format("expects a whole number >= {} and at most {}, not '{}'", minimum,
                             std::numeric_limits<long long>::max(), shown(input));
        }
        if (error != std::errc() || !digits || value < minimum) {
          return "expects a whole number >= " + std::to_string(minimum) + ", not '" + shown(input) +
                 "'";
        }
        return {};
      },
      "INT>=" + std::to_string(minimum));
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        char* end = nullptr;
        double value = std::strtod(input.c_str(), &end);
        if (end == input.c_str() || *end != '\0' || !std::isfinite(value)) {
          return "expects a finite number, not '" + shown(input) + "'";
        }
        return {};
      },
      "NUMBER");
}

void add_device_flag(CLI::App& command, CommonOptions& options) {
  command
      .add_option("--device", options.device,
                  "CUDA device ordinal to analyse (default: the device with an oom entry, "
                  "else the one with the most trace entries, else the one that reserves "
                  "the most; stderr names it when the file has others)")
      ->check(whole_number_at_least(0));
}

void add_steps_flag(CLI::App& command, CommonOptions& options) {
  command
      .add_option_function<std::string>(
          "--steps",
          [&options](const std::string& source) {
            options.steps = step_source_named(source).value_or(StepSource::kAuto);
          },
          "Where steps come from: profiler (ProfilerStep#N marks), optimizer (one iteration "
          "per Optimizer.step#... mark, else per run of allocations inside torch.optim; for "
          "Megatron Bridge and other runs without the profiler), none, or auto (default: "
          "profiler where the file has its marks, else optimizer); reports say when steps "
          "are inferred")
      ->check(one_of({"auto", "profiler", "optimizer", "none"}))
      ->option_text("auto|profiler|optimizer|none");
}

void add_json_flag(CLI::App& command, CommonOptions& options) {
  command.add_flag("--json", options.json, "Print JSON instead of text (report on stdout only)");
}

void add_input_flags(CLI::App& command, CommonOptions& options) {
  command.add_flag("--allow-objects", options.allow_objects,
                   "Read opcodes that would import or call code as inert placeholders "
                   "instead of refusing the file (nothing is ever executed)");
  command
      .add_option("--max-input", options.max_input_bytes,
                  "Largest pickle to hold in memory after decompression or from a pipe, e.g. "
                  "48GiB (default: this machine's memory, at most 64 GiB); plain files are "
                  "mapped and not limited")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(whole_number_at_least(1).description(""))
      ->option_text("SIZE");
  command.add_flag("--timings", options.timings,
                   "Print to stderr how long reading each file and each part of its analysis "
                   "took (a part is computed once, when a report first needs it)");
}

void add_top_flag(CLI::App& command, CommonOptions& options, const std::string& what,
                  int default_top) {
  options.top = default_top;
  command
      .add_option("--top", options.top,
                  "Number of " + what + " to show (default " + std::to_string(default_top) + ")")
      ->check(whole_number_at_least(0));
}

void add_source_key_flags(CLI::App& command, CommonOptions& options) {
  command
      .add_option("--frame-depth", options.keys.depth,
                  "Frames per source key, joined with ' -> ' (default 1)")
      ->check(whole_number_at_least(1));
  command
      .add_option_function<std::string>(
          "--keys",
          [&options](const std::string& rule) {
            options.keys.rule = rule == "reference" ? KeyRule::kReference : KeyRule::kUserCode;
          },
          "How allocations are named: user (default: the first frame of your code, outside "
          "PyTorch, Triton, the Python runtime and torch.compile's generated code) or reference "
          "(the reference scripts' rule, exactly)")
      ->check(one_of({"user", "reference"}))
      ->option_text("user|reference");
  command
      .add_option_function<std::string>(
          "--group-by",
          [&options](const std::string& group) {
            options.keys.group = parse_group_by(group).value_or(GroupBy::kSource);
          },
          "What a row of the source tables stands for: source (name@file:line, default), file, "
          "function (name@file, all its lines), stack (every frame of your code), category "
          "(parameter, optimizer_state, gradient, activation, ...), annotation (the innermost "
          "record_function range open at the allocation), pool (default, or a CUDA graph's or "
          "MemPool's private pool), or the entries' user_metadata or compile_context; JSON keeps "
          "the key 'source'")
      ->check(one_of({"source", "file", "function", "stack", "category", "annotation", "pool",
                      "user_metadata", "compile_context"}))
      ->option_text("GROUP");
  // Read and checked while the command line is parsed: what the rules say
  // wrong is a usage error (exit 2); a file that cannot be read is thrown on
  // as it is (exit 1).
  command
      .add_option("--category-rules", options.category_rules_file,
                  "File of your own category rules, checked before the built-in ones: one per "
                  "line, CATEGORY frame|cpp|annotation|metadata REGEX (e.g. 'parameter frame "
                  "lora_init@' or 'communication annotation ^allreduce')")
      ->check(CLI::Validator(
          [&options](std::string& path) -> std::string {
            try {
              options.keys.category_rules =
                  parse_category_rules(read_small_file(path, "--category-rules"), path);
            } catch (const Error& error) {
              if (error.kind() != Error::Kind::kUsage) throw;
              // CLI11 keeps the message as a C string: shown now, so that a
              // NUL in the file does not cut it.
              return printable(error.message());
            }
            return {};
          },
          ""))
      ->option_text("FILE");
  command
      .add_option("--skip", options.keys.skip,
                  "Regex: Python frames whose 'name@path:line' it matches count as library "
                  "code (your own wrappers); repeatable")
      ->option_text("REGEX");
  command
      .add_option("--keep", options.keys.keep,
                  "Regex: Python frames it matches count as your code even inside a "
                  "library (wins over --skip); repeatable")
      ->option_text("REGEX");
  command
      .add_option("--root", options.keys.roots,
                  "Folder of your own code: name the innermost frame under it (not in its "
                  "site-packages), your other code only when none is; a relative folder "
                  "matches wherever the file was recorded; repeatable")
      ->option_text("DIR");
  // After parsing, before any file is read: options no analysis can use.
  command.final_callback([&options] {
    check_key_options(options.keys, KeyOptionNames{.group_by = "--group-by",
                                                   .user_keys = "--keys user",
                                                   .skip = "--skip",
                                                   .keep = "--keep"});
  });
}

void add_snapshot_argument(CLI::App& command, std::string& file, const std::string& help) {
  command.add_option("FILE", file, help)->required();
}

void add_snapshots_argument(CLI::App& command, std::vector<std::string>& files,
                            const std::string& help) {
  command.add_option("FILE", files, help)->required()->expected(1, -1);
}

void add_analysis_flags(CLI::App& command, CommonOptions& options, int default_top) {
  add_top_flag(command, options, "source rows", default_top);
  add_source_key_flags(command, options);
  add_device_flag(command, options);
  add_json_flag(command, options);
  add_input_flags(command, options);
}

namespace {

// What --timings adds up for its total line: the command's own thread only
// (files loaded or parts computed on other threads overlap with it).
struct TimingLedger {
  std::mutex mutex;
  bool on = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::thread::id command_thread = std::this_thread::get_id();
  double read = 0;
  double analysis = 0;
};

TimingLedger& ledger() {
  static TimingLedger instance;
  return instance;
}

void add_timing(double TimingLedger::*field, double seconds) {
  TimingLedger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.on = true;
  if (std::this_thread::get_id() == l.command_thread) l.*field += seconds;
}

// Opens one file; with --timings, says how long reading and decoding took.
std::unique_ptr<service::Session> open_timed(const std::string& path, const CommonOptions& options,
                                             bool show_progress, bool walk_beside_read = true) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<service::Session> session =
      service::Session::open(path, session_options(path, options, show_progress, walk_beside_read));
  if (options.timings) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    write_note(fmt::format("timings: {}: read and decode {:.3f} s", path, took.count()));
    add_timing(&TimingLedger::read, took.count());
  }
  return session;
}

}  // namespace

void restart_timings() {
  TimingLedger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.on = false;
  l.start = std::chrono::steady_clock::now();
  l.command_thread = std::this_thread::get_id();
  l.read = 0;
  l.analysis = 0;
}

void note_timings_total() {
  TimingLedger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!l.on) return;
  const std::chrono::duration<double> total = std::chrono::steady_clock::now() - l.start;
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  write_note(fmt::format(
      "timings: total {:.3f} s: read and decode {:.3f} s, analysis {:.3f} s, results, rendering "
      "and writing {:.3f} s; peak RSS {} MiB",
      total.count(), l.read, l.analysis, std::max(0.0, total.count() - l.read - l.analysis),
      usage.ru_maxrss / 1024));
}

std::unique_ptr<service::Session> open_session(const std::string& path,
                                               const CommonOptions& options) {
  return open_timed(path, options, true);
}

void note_device_choice(const std::string& path, const DeviceChoice& choice) {
  if (choice.reason == DeviceReason::kRequested || !choice.others()) return;
  defer_note(printable(device_choice_note(path, choice)));
}

PartObserver timing_observer(const CommonOptions& options) {
  if (!options.timings) return {};
  return [](const PartTiming& timing) {
    write_note(fmt::format("timings: {} device {}: {} {:.3f} s", timing.file, timing.device,
                           timing.part, timing.seconds));
    add_timing(&TimingLedger::analysis, timing.seconds);
  };
}

const FileAnalysis& analysis_of(const service::Session& session, const CommonOptions& options) {
  const FileAnalysis& file = session.analysis(options.device);
  note_device_choice(session.name(), file.device_choice());
  return file;
}

std::string default_label(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::unique_ptr<service::Session>> open_all(const std::vector<std::string>& paths,
                                                        const CommonOptions& options) {
  refuse_stdin_twice(paths);
  // The files after the first load on a few threads (one per core, never
  // one per file: `plot DIR` of 10,000 files once made 10,000 threads).
  std::vector<std::unique_ptr<service::Session>> loaded(paths.size());
  const bool walk_beside_read = paths.size() <= 2;  // compare A B; not plot DIR
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next{1};
  auto load_rest = [&] {
    for (size_t i = next++; i < paths.size(); i = next++) {
      try {
        // One progress line at a time: the first file reports.
        loaded[i] = open_timed(paths[i], options, false, walk_beside_read);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    const size_t cores = std::max(1U, std::thread::hardware_concurrency());
    std::vector<std::jthread> helpers;  // joined before `loaded` is read
    for (size_t k = 0; k < std::min(cores, paths.size() - 1); ++k) {
      try {
        helpers.emplace_back(load_rest);
      } catch (const std::system_error&) {
        break;  // no thread to be had: this thread loads the rest after the first
      }
    }
    try {
      loaded[0] = open_timed(paths[0], options, true, walk_beside_read);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    load_rest();
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
  }
  return loaded;
}

}  // namespace memsnap::cli
