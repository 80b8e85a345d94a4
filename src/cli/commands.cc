#include "cli/commands.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <future>
#include <new>
#include <optional>
#include <string>

#include "analysis/replay_reports.h"
#include "analysis/source_key.h"
#include "analysis/summary.h"
#include "analysis/timeline.h"
#include "io/error.h"
#include "io/input.h"
#include "pickle/tree.h"
#include "pickle/vm.h"
#include "report/format.h"
#include "report/html_plot.h"
#include "report/parse_report.h"
#include "report/replay_render.h"
#include "report/text_chart.h"
#include "snapshot/decoder.h"

namespace memsnap {
namespace {

using nlohmann::ordered_json;

constexpr uint64_t kProgressThreshold = uint64_t{64} << 20;

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

void print_json(const ordered_json& value) {
  print(value.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n");
}

// Progress on stderr, only for a person watching a large file load.
LoadOptions load_options(const std::string& path, bool allow_objects) {
  LoadOptions options;
  options.allow_objects = allow_objects;
  if (::isatty(STDERR_FILENO) != 0) {
    options.on_progress = [path, last_percent = -1](uint64_t done, uint64_t total) mutable {
      if (total < kProgressThreshold) return;
      int percent = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
      if (percent == last_percent) return;  // at most 101 updates, whatever the size
      last_percent = percent;
      std::fprintf(stderr, "\rmemsnap: reading %s %3d%% (%s of %s)", path.c_str(), percent,
                   format_bytes(done).c_str(), format_bytes(total).c_str());
      if (done >= total) std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    };
  }
  return options;
}

struct CommonFlags {
  std::optional<int> device;
  bool json = false;
  bool allow_objects = false;
  int top = 10;
  int frame_depth = 1;
};

void add_device_flag(CLI::App* command, CommonFlags& flags) {
  command->add_option("--device", flags.device,
                      "CUDA device ordinal to analyse (default: the first device with trace "
                      "events, else the first with segments)");
}
void add_json_flag(CLI::App* command, CommonFlags& flags) {
  command->add_flag("--json", flags.json, "Print JSON instead of text (report on stdout only)");
}
void add_objects_flag(CLI::App* command, CommonFlags& flags) {
  command->add_flag("--allow-objects", flags.allow_objects,
                    "Read opcodes that would import or call code as inert placeholders "
                    "instead of refusing the file (nothing is ever executed)");
}

int run_parse(const std::string& path, const CommonFlags& flags) {
  Snapshot snapshot = load_snapshot(path, load_options(path, flags.allow_objects));
  ParseOptions options{flags.device, flags.top, flags.frame_depth};
  ParseResult result = summarize(snapshot, path, options);
  if (flags.json) {
    print_json(render_parse_json(result));
  } else {
    print(render_parse_text(result));
  }
  return 0;
}

int run_dump(const std::string& path, const CommonFlags& flags) {
  try {
    InputBuffer input = open_input(path);
    pickle::VmOptions options;
    options.allow_objects = flags.allow_objects;
    pickle::Vm vm(input.bytes(), options);
    pickle::Value root = vm.run();
    pickle::write_tagged_json(vm, root, stdout);
    std::fputc('\n', stdout);
  } catch (const Error& error) {
    throw Error((path == "-" ? std::string("<stdin>") : path) + ": " + error.what());
  }
  return 0;
}

ordered_json frames_json(const Snapshot& snapshot, StackId stack) {
  ordered_json frames = ordered_json::array();
  for (FrameId id : snapshot.stacks.get(stack)) {
    const Frame& frame = snapshot.frames.get(id);
    frames.push_back({{"name", snapshot.strings.get(frame.name)},
                      {"filename", snapshot.strings.get(frame.filename)},
                      {"line", frame.line}});
  }
  return frames;
}

int run_events(const std::string& path, const CommonFlags& flags, uint64_t stride) {
  Snapshot snapshot = load_snapshot(path, load_options(path, flags.allow_objects));
  int device = choose_device(snapshot, flags.device);
  const DeviceTrace* trace = snapshot.trace_of(device);
  DeviceTrace empty{device, 0, 0};
  if (trace == nullptr) trace = &empty;
  if (stride == 0) stride = 1;
  std::vector<uint64_t> picked;
  for (uint64_t i = 0; i < trace->count(); i += stride) picked.push_back(i);
  if (trace->count() > 0 && (picked.empty() || picked.back() != trace->count() - 1)) {
    picked.push_back(trace->count() - 1);
  }
  const EventColumns& events = snapshot.events;
  if (flags.json) {
    ordered_json list = ordered_json::array();
    for (uint64_t i : picked) {
      uint64_t at = trace->begin + i;
      list.push_back({{"index", i},
                      {"action", snapshot.action_label(at)},
                      {"addr", events.without_addr.contains(at) ? ordered_json(nullptr)
                                                                : ordered_json(events.addr[at])},
                      {"size", events.size[at]},
                      {"stream", events.stream[at]},
                      {"time_us", events.time_us[at] != 0 ? ordered_json(events.time_us[at])
                                                          : ordered_json(nullptr)},
                      {"frames", frames_json(snapshot, events.stack[at])}});
    }
    print_json({{"device", device}, {"event_count", trace->count()}, {"events", list}});
    return 0;
  }
  SourceKeys keys(snapshot, flags.frame_depth);
  int64_t origin = 0;
  for (uint64_t i = trace->begin; i < trace->end && origin == 0; ++i) origin = events.time_us[i];
  TextTable table({"index", "time (s)", "action", "addr", "size", "source"},
                  {true, true, false, true, true, false});
  for (uint64_t i : picked) {
    uint64_t at = trace->begin + i;
    table.add_row(
        {std::to_string(i),
         events.time_us[at] != 0
             ? fmt::format("{:.6f}", static_cast<double>(events.time_us[at] - origin) / 1e6)
             : "-",
         std::string(snapshot.action_label(at)),
         events.without_addr.contains(at) ? "-" : fmt::format("0x{:x}", events.addr[at]),
         format_bytes(events.size[at]), keys.key(events.stack[at])});
  }
  print(fmt::format("{}: device {}, {} events{}\n", path, device, format_count(trace->count()),
                    stride > 1 ? fmt::format(", every {}th shown", stride) : ""));
  print(table.render());
  return 0;
}

// Loads several files at once: each file after the first on its own thread.
std::vector<Snapshot> load_all(const std::vector<std::string>& paths, bool allow_objects) {
  std::vector<std::future<Snapshot>> others;
  for (size_t i = 1; i < paths.size(); ++i) {
    others.push_back(std::async(std::launch::async, [&paths, i, allow_objects]() {
      LoadOptions quiet;  // one progress line at a time: the first file reports
      quiet.allow_objects = allow_objects;
      return load_snapshot(paths[i], quiet);
    }));
  }
  std::vector<Snapshot> snapshots;
  snapshots.push_back(load_snapshot(paths[0], load_options(paths[0], allow_objects)));
  for (auto& other : others) snapshots.push_back(other.get());
  return snapshots;
}

struct PlotFlags {
  std::vector<std::string> labels;
  std::string output = "memsnap_timeline.html";
  double precision_ms = 1.0;
  bool text = false;
  bool absolute = true;
  int width = 100;
  int height = 20;
};

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int run_plot(const std::vector<std::string>& paths, const CommonFlags& flags,
             const PlotFlags& plot) {
  if (!plot.labels.empty() && plot.labels.size() != paths.size()) {
    std::fprintf(stderr,
                 "memsnap: --labels has %zu labels for %zu files; give one label per file\n",
                 plot.labels.size(), paths.size());
    return 2;
  }
  if (plot.precision_ms <= 0) throw Error("--precision must be a positive number of milliseconds");
  std::vector<Snapshot> snapshots = load_all(paths, flags.allow_objects);
  std::vector<RunTimeline> runs;
  for (size_t i = 0; i < paths.size(); ++i) {
    FileAnalysis file = analyze_file(paths[i], snapshots[i], flags.device);
    std::string label = plot.labels.empty() ? basename_of(paths[i]) : plot.labels[i];
    runs.push_back(build_timeline(file, label, plot.precision_ms, flags.frame_depth));
  }
  if (plot.text) {
    TextChartOptions options;
    options.width = plot.width;
    options.height = plot.height;
    options.absolute = plot.absolute;
    options.color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
    print(render_text_chart(runs, options));
    return 0;
  }
  std::string page = render_plot_html(runs, plot.precision_ms);
  std::FILE* out = std::fopen(plot.output.c_str(), "wb");
  if (out == nullptr)
    throw Error(fmt::format("{}: cannot write: {}", plot.output, std::strerror(errno)));
  size_t written = std::fwrite(page.data(), 1, page.size(), out);
  bool ok = written == page.size() && std::fclose(out) == 0;
  if (!ok) throw Error(fmt::format("{}: write failed", plot.output));
  std::fprintf(stderr, "memsnap: wrote %s (%s, %zu run%s)\n", plot.output.c_str(),
               format_bytes(page.size()).c_str(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}

int run_compare(const std::string& path_a, const std::string& path_b, const CommonFlags& flags,
                std::optional<int64_t> step) {
  std::vector<Snapshot> snapshots = load_all({path_a, path_b}, flags.allow_objects);
  FileAnalysis a = analyze_file(path_a, snapshots[0], flags.device);
  FileAnalysis b = analyze_file(path_b, snapshots[1], flags.device);
  CompareResult result = compare_files(a, b, step, flags.frame_depth);
  if (flags.json) {
    print_json(render_compare_json(result, flags.top));
  } else {
    print(render_compare_text(result, flags.top));
  }
  return 0;
}

int run_replay_to_time(const std::vector<std::string>& paths, const CommonFlags& flags,
                       double seconds) {
  if (seconds < 0) throw Error("--time must be >= 0 (seconds from the start of the trace)");
  std::vector<Snapshot> snapshots = load_all(paths, flags.allow_objects);
  std::vector<TimeSide> sides;
  for (size_t i = 0; i < paths.size(); ++i) {
    FileAnalysis file = analyze_file(paths[i], snapshots[i], flags.device);
    sides.push_back(replay_to_time(file, seconds, flags.frame_depth));
  }
  for (const TimeSide& side : sides) {
    if (side.clamped) {
      std::fprintf(
          stderr,
          "memsnap: note: %s: --time %.6f is past the end of the trace; clamped to %.6f s\n",
          side.file.c_str(), seconds, side.time_s);
    }
  }
  if (sides.size() == 1) {
    if (flags.json) {
      print_json(render_time_json(sides[0], flags.top));
    } else {
      print(render_time_text(sides[0], flags.top));
    }
  } else if (flags.json) {
    print_json(render_time_pair_json(sides[0], sides[1], flags.top));
  } else {
    print(render_time_pair_text(sides[0], sides[1], flags.top));
  }
  return 0;
}

int run_replay_step(const std::string& path, const CommonFlags& flags,
                    std::optional<int64_t> step) {
  Snapshot snapshot = load_snapshot(path, load_options(path, flags.allow_objects));
  FileAnalysis file = analyze_file(path, snapshot, flags.device);
  ReplayStepResult result = replay_steps(file, step, flags.top, flags.frame_depth);
  if (flags.json) {
    print_json(render_steps_json(result));
  } else {
    print(render_steps_text(result));
  }
  return 0;
}

void add_analysis_flags(CLI::App* command, CommonFlags& flags) {
  command->add_option("--top", flags.top, "Number of source rows to show (default 10)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--frame-depth", flags.frame_depth,
                   "Frames per source key, joined with ' -> ' (default 1)")
      ->check(CLI::PositiveNumber);
  add_device_flag(command, flags);
  add_json_flag(command, flags);
  add_objects_flag(command, flags);
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{
      "memsnap: read PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles) "
      "safely and fast.\nThe file is never executed. .gz and .zst inputs are decompressed; "
      "'-' reads stdin."};
  app.name("memsnap");
  app.footer(
      "Examples:\n"
      "  memsnap parse rank0.pickle                      what is in the file\n"
      "  memsnap compare before.pickle after.pickle      why does after peak higher\n"
      "  memsnap replay-to-time run.pickle --time 12.5   what was live at 12.5 s\n"
      "  memsnap replay-step run.pickle --all-steps      every profiler step\n"
      "  memsnap plot a.pickle b.pickle -o t.html        both runs on one timeline\n"
      "Reports go to stdout (--json for tools); errors and progress to stderr.\n"
      "Exit status: 0 ok, 1 unreadable or refused input, 2 usage error.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "memsnap 0.1.0");

  CommonFlags flags;
  std::string file;
  uint64_t stride = 1;

  CLI::App* parse = app.add_subcommand(
      "parse", "What is in this file: settings, segments, baseline, steps, events, top sources");
  parse->add_option("FILE", file, "Snapshot pickle (.pickle, .gz, .zst, or - for stdin)")
      ->required();
  add_json_flag(parse, flags);
  add_device_flag(parse, flags);
  parse->add_option("--top", flags.top, "Number of sources to list (default 10)")
      ->check(CLI::NonNegativeNumber);
  parse
      ->add_option("--frame-depth", flags.frame_depth,
                   "Frames per source key, joined with ' -> ' (default 1)")
      ->check(CLI::PositiveNumber);
  add_objects_flag(parse, flags);

  CLI::App* dump = app.add_subcommand(
      "dump", "Print the whole pickle as JSON (tuples, sets, bytes and wide ints tagged)");
  dump->add_option("FILE", file, "Pickle file (.gz, .zst, or - for stdin)")->required();
  add_objects_flag(dump, flags);

  CLI::App* events = app.add_subcommand("events", "List one device's trace entries");
  events->add_option("FILE", file, "Snapshot pickle")->required();
  add_device_flag(events, flags);
  events->add_option("--stride", stride, "Show every Kth entry (the last is always shown)")
      ->check(CLI::PositiveNumber);
  events->add_option("--frame-depth", flags.frame_depth, "Frames per source key (default 1)")
      ->check(CLI::PositiveNumber);
  add_json_flag(events, flags);
  add_objects_flag(events, flags);

  std::vector<std::string> files;
  std::optional<int64_t> step;
  bool all_steps = false;
  double seconds = 0;

  CLI::App* compare = app.add_subcommand(
      "compare", "Why does B peak higher than A: settings, segments, steps, sources at the peak");
  compare->add_option("A", files, "Two snapshot files: A (before) and B (after); deltas are B - A")
      ->required()
      ->expected(2);
  compare->add_option("--step", step,
                      "Drill into this step (default: the step whose absolute peaks differ most, "
                      "else the full trace)");
  add_analysis_flags(compare, flags);

  CLI::App* to_time = app.add_subcommand(
      "replay-to-time", "What was live T seconds after the trace start (one file, or A vs B)");
  to_time->add_option("FILE", files, "One or two snapshot files")->required()->expected(1, 2);
  to_time->add_option("--time", seconds, "Seconds after the first event of the device's trace")
      ->required();
  add_analysis_flags(to_time, flags);

  CLI::App* replay_step = app.add_subcommand(
      "replay-step", "What happened in profiler step N: throughput, peaks, sources at the peak");
  replay_step->add_option("FILE", file, "Snapshot file recorded with the PyTorch profiler")
      ->required();
  auto* step_option = replay_step->add_option("--step", step, "The ProfilerStep#N to replay");
  auto* all_option =
      replay_step->add_flag("--all-steps", all_steps, "Replay every step (one table)");
  step_option->excludes(all_option);
  add_analysis_flags(replay_step, flags);

  PlotFlags plot_flags;
  CLI::App* plot = app.add_subcommand(
      "plot", "Memory over time, one run or several overlaid: one offline HTML file (or --text)");
  plot->add_option("FILE", files, "Snapshot files; each becomes one line on the same axis")
      ->required()
      ->expected(1, -1);
  plot->add_option("--labels", plot_flags.labels, "One label per file (default: file names)")
      ->expected(1, -1);
  plot->add_option("-o,--output", plot_flags.output,
                   "HTML file to write (default memsnap_timeline.html)");
  plot->add_option("--precision", plot_flags.precision_ms,
                   "Finest time bucket of the wall-clock view, in ms (default 1.0); the page can "
                   "coarsen it");
  plot->add_flag("--text", plot_flags.text,
                 "Draw the overlay in the terminal instead of writing HTML");
  plot->add_flag("!--delta", plot_flags.absolute,
                 "--text: plot the delta from the trace start, not baseline + delta");
  plot->add_option("--width", plot_flags.width, "--text: chart columns (default 100)");
  plot->add_option("--height", plot_flags.height, "--text: chart rows (default 20)");
  plot->add_option("--frame-depth", flags.frame_depth, "Frames per source key (default 1)")
      ->check(CLI::PositiveNumber);
  add_device_flag(plot, flags);
  add_objects_flag(plot, flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int status = app.exit(error);
    return status == 0 ? 0 : 2;
  }

  try {
    if (parse->parsed()) return run_parse(file, flags);
    if (dump->parsed()) return run_dump(file, flags);
    if (events->parsed()) return run_events(file, flags, stride);
    if (plot->parsed()) return run_plot(files, flags, plot_flags);
    if (compare->parsed()) return run_compare(files[0], files[1], flags, step);
    if (to_time->parsed()) return run_replay_to_time(files, flags, seconds);
    if (replay_step->parsed() && !step && !all_steps) {
      std::fprintf(stderr, "memsnap: replay-step needs --step N or --all-steps\n");
      return 2;
    }
    if (replay_step->parsed()) return run_replay_step(file, flags, all_steps ? std::nullopt : step);
  } catch (const Error& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "memsnap: %s\n", error.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "memsnap: out of memory\n");
    return 1;
  }
  return 0;
}

}  // namespace memsnap
