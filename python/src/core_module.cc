// memsnap._core: the Python package's bridge to the library (python/memsnap
// wraps it in the documented API). The top layer, beside the command line:
// it calls analysis and report exactly as the commands do and hands back
// their JSON documents as text, so that every dict of the API is the CLI's
// --json document; columns come out as numpy arrays over the model's own
// memory. memsnap::Error becomes memsnap.SnapshotError (a usage error:
// ValueError) here, once. The GIL is released around every piece of work.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/core/categories.h"
#include "analysis/core/file_analysis.h"
#include "analysis/core/source_key.h"
#include "analysis/core/sources.h"
#include "analysis/core/steps.h"
#include "analysis/reports/compare.h"
#include "analysis/reports/event_list.h"
#include "analysis/reports/explain.h"
#include "analysis/reports/oom_report.h"
#include "analysis/reports/parse_report.h"
#include "analysis/reports/run_summary.h"
#include "analysis/reports/segment_report.h"
#include "analysis/reports/step_report.h"
#include "analysis/reports/time_report.h"
#include "analysis/reports/timeline.h"
#include "cli/command.h"
#include "cli/output.h"
#include "formats/summary_json.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "memsnap/load.h"
#include "memsnap/replay.h"
#include "memsnap/version.h"
#include "report/check_render.h"
#include "report/compare_render.h"
#include "report/explain_render.h"
#include "report/findings.h"
#include "report/format.h"
#include "report/html_plot.h"
#include "report/oom_render.h"
#include "report/parse_render.h"
#include "report/segment_render.h"
#include "report/step_render.h"
#include "report/text_chart.h"
#include "report/time_render.h"
#include "runs/run_check.h"
#include "runs/run_reports.h"
#include "serve/server.h"
#include "service/parameters.h"
#include "service/report_table.h"
#include "service/session.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace memsnap::python {
namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

// A loaded snapshot and its analyses, one per device asked for: a report
// asked twice (or two reports of one device) share the parts they need.
using Loaded = service::Session;

// --frame-depth, --keys, --group-by, --skip, --keep, --root, --category-rules,
// checked as the command line checks them.
SourceKeyOptions make_keys(int depth, const std::string& rule, const std::string& group,
                           std::vector<std::string> skip, std::vector<std::string> keep,
                           std::vector<std::string> roots,
                           const std::optional<std::string>& category_rules_file) {
  SourceKeyOptions keys;
  if (depth < 1) throw Error(ErrorCode::kBadParameter, "frame_depth must be >= 1");
  keys.depth = depth;
  if (rule != "user" && rule != "reference")
    throw Error(ErrorCode::kBadParameter, "keys must be 'user' or 'reference', not '" + rule + "'");
  keys.rule = rule == "reference" ? KeyRule::kReference : KeyRule::kUserCode;
  const std::optional<GroupBy> grouping = parse_group_by(group);
  if (!grouping) {
    throw Error(ErrorCode::kBadParameter,
                "group_by must be one of source, file, function, stack, category, "
                "annotation, pool, user_metadata, compile_context; not '" +
                    group + "'");
  }
  keys.group = *grouping;
  keys.skip = std::move(skip);
  keys.keep = std::move(keep);
  keys.roots = std::move(roots);
  // Read as the command line reads --category-rules: the same 1 MiB limit and
  // refusals (a rule past a cut would be dropped without a word).
  if (category_rules_file) {
    keys.category_rules = parse_category_rules(
        read_small_file(*category_rules_file, "category_rules"), *category_rules_file);
  }
  check_key_options(
      keys,
      KeyOptionNames{
          .group_by = "group_by", .user_keys = "keys='user'", .skip = "skip", .keep = "keep"});
  return keys;
}

std::string text_of(const nlohmann::ordered_json& document) {
  return cli::json_text(document, -1);
}

// Columns: views of the model's vectors (kept alive by `owner`, the Python
// Loaded object), or vectors of their own (kept alive by a capsule).
template <typename T>
using Column = nb::ndarray<nb::numpy, const T, nb::ndim<1>>;

template <typename T>
Column<T> view(const T* data, size_t count, nb::handle owner) {
  static const T kEmpty{};
  return Column<T>(count == 0 ? &kEmpty : data, {count}, owner);
}

template <typename T>
Column<T> owned(std::vector<T> values) {
  if (values.empty()) values.reserve(1);  // a valid pointer for an empty array
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return Column<T>(heap->data(), {heap->size()}, owner);
}

// One device's trace entries as columns, without copying.
nb::dict event_columns(Loaded& self, std::optional<int> device) {
  const FileAnalysis& file = self.analysis(device);
  const EventColumns& events = self.snapshot().events;
  const DeviceTrace& trace = file.trace();
  const nb::handle owner = nb::find(&self);
  const auto begin = static_cast<size_t>(trace.begin);
  const auto count = static_cast<size_t>(trace.count());
  static_assert(sizeof(Action) == 1 && sizeof(StackId) == 4, "columns are viewed as raw ints");
  nb::dict columns;
  columns["action"] =
      view(reinterpret_cast<const uint8_t*>(events.action.data()) + begin, count, owner);
  // Addresses and sizes as signed 64-bit ints, so that arithmetic on them
  // (-size, differences of addresses) means what it says: sizes stay below
  // 2^61 (the decoder's byte budget), and CUDA addresses below 2^63.
  static_assert(sizeof(uint64_t) == sizeof(int64_t));
  columns["address"] =
      view(reinterpret_cast<const int64_t*>(events.addr.data()) + begin, count, owner);
  columns["size"] =
      view(reinterpret_cast<const int64_t*>(events.size.data()) + begin, count, owner);
  columns["stream"] = view(events.stream.data() + begin, count, owner);
  columns["time_us"] = view(events.time_us.data() + begin, count, owner);
  // Seconds from the device's first timed entry, as --time and replay_to_time
  // take them; NaN for an entry without a time.
  const int64_t origin = trace_start_us(self.snapshot(), trace);
  std::vector<double> seconds(count);
  for (size_t i = 0; i < count; ++i) {
    const int64_t t = events.time_us[begin + i];
    seconds[i] =
        t == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(t - origin) / 1e6;
  }
  columns["time_s"] = owned(std::move(seconds));
  columns["stack"] =
      view(reinterpret_cast<const uint32_t*>(events.stack.data()) + begin, count, owner);
  nb::dict other;
  for (const auto& [index, name] : events.other_action) {
    if (index < trace.begin || index >= trace.end) continue;
    const std::string_view label = self.snapshot().strings.get(name);
    other[nb::int_(index - trace.begin)] = nb::str(label.data(), label.size());
  }
  columns["other_action"] = other;
  return columns;
}

// Each entry's group (the source tables' rows) and category, as codes into
// name lists: what the reports sum, entry by entry.
struct EntryGroups {
  std::vector<uint32_t> source;
  std::vector<std::string> source_names;
  std::vector<uint8_t> category;
};

EntryGroups entry_groups(Loaded& self, std::optional<int> device, const SourceKeyOptions& keys) {
  const FileAnalysis& file = self.analysis(device);
  const Snapshot& model = self.snapshot();
  const DeviceTrace& trace = file.trace();
  SourceIndex sources(model, keys);
  Categorizer categories(model, keys.category_rules);
  EntryGroups groups;
  groups.source.reserve(trace.count());
  groups.category.reserve(trace.count());
  name_entries(model, trace, file.trace_analysis().counts.free_frames.kind(), sources, categories,
               [&groups](uint64_t /*event*/, uint32_t source, Category category) {
                 groups.source.push_back(source);
                 groups.category.push_back(static_cast<uint8_t>(category));
               });
  groups.source_names.reserve(sources.size());
  for (uint32_t i = 0; i < sources.size(); ++i) groups.source_names.push_back(sources.name(i));
  return groups;
}

std::vector<std::string> category_names() {
  std::vector<std::string> names;
  names.reserve(kCategoryCount);
  for (size_t i = 0; i < kCategoryCount; ++i)
    names.emplace_back(category_name(static_cast<Category>(i)));
  return names;
}

std::vector<std::string> action_names() {
  std::vector<std::string> names;
  names.reserve(kActionCount);
  for (int i = 0; i < kActionCount; ++i) names.emplace_back(action_name(static_cast<Action>(i)));
  return names;
}

nb::dict segment_columns(const Loaded& self) {
  const Snapshot& model = self.snapshot();
  std::vector<int32_t> device;
  std::vector<uint64_t> address, total, allocated, active, requested, stream, blocks_begin, blocks;
  std::vector<int64_t> pool_first, pool_second;
  std::vector<uint8_t> expandable;
  std::vector<uint32_t> stack;
  std::vector<std::string> type;
  for (const Segment& segment : model.segments) {
    device.push_back(segment.device);
    address.push_back(segment.address);
    total.push_back(segment.total_size);
    allocated.push_back(segment.allocated_size);
    active.push_back(segment.active_size);
    requested.push_back(segment.requested_size);
    stream.push_back(segment.stream);
    pool_first.push_back(segment.pool_id_first);
    pool_second.push_back(segment.pool_id_second);
    expandable.push_back(segment.is_expandable ? 1 : 0);
    stack.push_back(segment.stack.value);
    blocks_begin.push_back(segment.first_block);
    blocks.push_back(segment.block_count);
    type.emplace_back(model.strings.get(segment.segment_type));
  }
  nb::dict columns;
  columns["device"] = owned(std::move(device));
  columns["address"] = owned(std::move(address));
  columns["total_size"] = owned(std::move(total));
  columns["allocated_size"] = owned(std::move(allocated));
  columns["active_size"] = owned(std::move(active));
  columns["requested_size"] = owned(std::move(requested));
  columns["stream"] = owned(std::move(stream));
  columns["segment_type"] = type;
  columns["pool_id_first"] = owned(std::move(pool_first));
  columns["pool_id_second"] = owned(std::move(pool_second));
  columns["is_expandable"] = owned(std::move(expandable));
  columns["stack"] = owned(std::move(stack));
  columns["first_block"] = owned(std::move(blocks_begin));
  columns["block_count"] = owned(std::move(blocks));
  return columns;
}

nb::dict block_columns(const Loaded& self) {
  const Snapshot& model = self.snapshot();
  std::vector<uint32_t> segment_index, stack;
  std::vector<uint64_t> address, size, requested;
  std::vector<uint8_t> state;
  for (size_t s = 0; s < model.segments.size(); ++s) {
    for (const Block& block : model.blocks_of(model.segments[s])) {
      segment_index.push_back(static_cast<uint32_t>(s));
      address.push_back(block.address);
      size.push_back(block.size);
      requested.push_back(block.requested_size);
      state.push_back(static_cast<uint8_t>(block.state));
      stack.push_back(block.stack.value);
    }
  }
  nb::dict columns;
  columns["segment"] = owned(std::move(segment_index));
  columns["address"] = owned(std::move(address));
  columns["size"] = owned(std::move(size));
  columns["requested_size"] = owned(std::move(requested));
  columns["state"] = owned(std::move(state));
  columns["stack"] = owned(std::move(stack));
  return columns;
}

// Frames by id (row 0: "no frame") and stacks as offsets into one frame list.
nb::dict frame_columns(const Loaded& self) {
  const Snapshot& model = self.snapshot();
  std::vector<std::string> name, filename, fx;
  std::vector<int64_t> line;
  std::vector<uint8_t> machinery;
  for (size_t i = 0; i < model.frames.size(); ++i) {
    const Frame& frame = model.frames.get(FrameId{static_cast<uint32_t>(i)});
    name.emplace_back(model.strings.get(frame.name));
    filename.emplace_back(model.strings.get(frame.filename));
    fx.emplace_back(model.strings.get(frame.fx_original_trace));
    line.push_back(frame.line);
    machinery.push_back(i != 0 && is_cpp_frame(filename.back(), frame.line) &&
                        is_capture_machinery(name.back()));
  }
  nb::dict columns;
  columns["name"] = name;
  columns["filename"] = filename;
  columns["line"] = owned(std::move(line));
  columns["machinery"] = owned(std::move(machinery));
  columns["fx_original_trace"] = fx;
  return columns;
}

nb::dict stack_columns(const Loaded& self) {
  const Snapshot& model = self.snapshot();
  // Row 0 is "no stack" (no frames); stack ids run from 1 to size().
  std::vector<uint64_t> offsets{0, 0};
  std::vector<uint32_t> frames;
  for (size_t i = 1; i <= model.stacks.size(); ++i) {
    for (FrameId frame : model.stacks.get(StackId{static_cast<uint32_t>(i)}))
      frames.push_back(frame.value);
    offsets.push_back(frames.size());
  }
  nb::dict columns;
  columns["offsets"] = owned(std::move(offsets));
  columns["frames"] = owned(std::move(frames));
  return columns;
}

std::string kind_name(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::kUsage: return "usage";
    case Error::Kind::kOutput: return "output";
    case Error::Kind::kLimit: return "limit";
    case Error::Kind::kBrokenPipe: return "output";
    case Error::Kind::kInput: break;
  }
  return "input";
}

LoadOptions load_options(bool allow_objects, uint64_t max_input) {
  LoadOptions options;
  options.allow_objects = allow_objects;
  options.max_input_bytes = max_input;
  return options;
}

// One file's session, with the allocator replay walking its trace on another
// core while it is read (as the command line does).
service::SessionOptions session_options(bool allow_objects, uint64_t max_input) {
  service::SessionOptions options;
  options.load = load_options(allow_objects, max_input);
  return options;
}

std::vector<RunTimeline> plot_runs(const std::vector<Loaded*>& snapshots,
                                   const std::vector<std::string>& labels,
                                   std::optional<int> device, double precision_ms,
                                   uint64_t max_lifetimes, const SourceKeyOptions& keys, bool page,
                                   uint64_t max_entries = kDefaultMaxEntries,
                                   const std::optional<std::string>& whatif = std::nullopt) {
  if (snapshots.empty()) throw Error(ErrorCode::kBadParameter, "plot needs at least one snapshot");
  if (labels.size() != snapshots.size()) {
    throw Error(ErrorCode::kBadParameter, "labels has " + std::to_string(labels.size()) +
                                              " labels for " + std::to_string(snapshots.size()) +
                                              " snapshots; give one per snapshot");
  }
  if (!(precision_ms > 0))
    throw Error(ErrorCode::kBadParameter, "precision must be a positive number of milliseconds");
  if (whatif)
    settings_of_conf(*whatif, SplitRule{});  // a text the model does not read: refused first
  std::vector<RunTimeline> runs;
  for (size_t i = 0; i < snapshots.size(); ++i) {
    runs.push_back(plot_run(snapshots[i]->analysis(device), labels[i], precision_ms, keys,
                            max_lifetimes, page, PagePlace{i, snapshots.size(), max_entries},
                            whatif));
  }
  return runs;
}

// `memsnap serve` in this process (memsnap.serve): the server answers on a
// thread of its own, without the GIL (it reads only the analyses, which
// compute each part once under call_once); the snapshots outlive it (the
// Python object keeps them).
class Serving {
 public:
  Serving(const std::vector<Loaded*>& snapshots, const std::vector<std::string>& labels,
          std::optional<int> device, serve::ServeOptions options, const SourceKeyOptions& keys) {
    serve::require_server();
    if (snapshots.empty())
      throw Error(ErrorCode::kBadParameter, "serve needs at least one snapshot");
    if (labels.size() != snapshots.size()) {
      throw Error(ErrorCode::kBadParameter, "give one label per snapshot");
    }
    std::vector<serve::ServedFile> files;
    for (size_t i = 0; i < snapshots.size(); ++i) {
      files.push_back({snapshots[i]->name(), labels[i], snapshots[i], device});
    }
    auto page = [snapshots, labels, device, keys] {
      if (!html_plot_available()) {
        throw Error(ErrorCode::kUnavailable, "this memsnap was built without the HTML page");
      }
      return render_plot_html(
          plot_runs(snapshots, labels, device, 1.0, kDefaultMaxLifetimes, keys, true, 0), 1.0);
    };
    server_ = std::make_unique<serve::Server>(std::move(files), std::move(options), page);
    url_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    // Answering before the URL is handed out, and so that stop() is never lost.
    for (int waited_ms = 0; !server_->running() && waited_ms < 10'000; ++waited_ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  ~Serving() { stop(); }

  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] bool running() const { return thread_.joinable(); }
  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }

 private:
  std::unique_ptr<serve::Server> server_;
  std::string url_;
  std::thread thread_;
};

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

// The reading of many files (ranks, run folders) as keyword arguments give it.
RunInputs run_inputs_of(std::optional<int> device, const std::string& steps,
                        const SourceKeyOptions& keys, const std::string& rank_from, int jobs,
                        bool allow_objects, uint64_t max_input) {
  const std::optional<StepSource> source = step_source_named(steps);
  if (!source) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("steps must be 'auto', 'profiler', 'optimizer' or 'none', not '{}'",
                            printable(steps)));
  }
  if (jobs < 0)
    throw Error(ErrorCode::kBadParameter, "jobs must be a whole number >= 1 (0: the core count)");
  RunInputs inputs;
  inputs.device = device;
  inputs.steps = *source;
  inputs.keys = keys;
  inputs.load = load_options(allow_objects, max_input);
  inputs.rank_pattern = rank_from.empty() ? std::string(kDefaultRankPattern) : rank_from;
  inputs.jobs = jobs;
  return inputs;
}

// A limit given by keyword (max_peak, ...): its kind; the limits that take
// no amount (no_oom, categories) have keywords of their own.
LimitKind limit_named(const std::string& name) {
  for (const LimitInfo& info : all_limit_infos()) {
    if (info.name == name && info.kind != LimitKind::kNoOom && info.kind != LimitKind::kCategory) {
      return info.kind;
    }
  }
  throw Error(ErrorCode::kBadParameter, fmt::format("'{}' is not a limit", printable(name)));
}

// What a run over many files said besides its report: the notes become
// Python warnings, in the order they came; no output stream is touched.
class Heard {
 public:
  RunListener listener() {
    RunListener out;
    out.note = [this](const std::string& note) {
      const std::lock_guard<std::mutex> lock(mutex_);
      notes_.push_back(note);
    };
    return out;
  }
  // (the report as JSON text, the notes, and the error to raise after
  // warning them: empty when every file was read).
  std::tuple<std::string, std::vector<std::string>, std::string> answer(
      const nlohmann::ordered_json& report, size_t unread, size_t files) {
    const std::lock_guard<std::mutex> lock(mutex_);
    return {text_of(report), std::move(notes_),
            unread == 0 ? std::string() : unread_files_message(unread, files)};
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> notes_;
};

// memsnap::Error becomes ValueError (usage) or memsnap.SnapshotError, with path, offset and kind,
// once for every function; both carry the error's stable code as `code`.
void translate_errors() {
  nb::register_exception_translator([](const std::exception_ptr& thrown, void*) {
    try {
      std::rethrow_exception(thrown);
    } catch (const Error& error) {
      nb::str code(error.code_name().data(), error.code_name().size());
      if (error.kind() == Error::Kind::kUsage) {
        nb::object value = nb::handle(PyExc_ValueError)(error.what());
        nb::setattr(value, "code", code);
        PyErr_SetObject(PyExc_ValueError, value.ptr());
        return;
      }
      nb::object type = nb::module_::import_("memsnap._errors").attr("SnapshotError");
      nb::object path = error.file().empty() ? nb::none() : nb::cast(error.file());
      nb::object offset = error.byte_offset() ? nb::cast(*error.byte_offset()) : nb::none();
      nb::object value = type(error.what(), "path"_a = path, "offset"_a = offset,
                              "kind"_a = kind_name(error.kind()), "code"_a = code);
      PyErr_SetObject(type.ptr(), value.ptr());
    }
  });
}

// The table of error codes: (code, kind, meaning) in the table's order.
std::vector<std::tuple<std::string, std::string, std::string>> error_code_table() {
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  for (const ErrorCodeInfo& info : error_codes()) {
    rows.emplace_back(info.name, kind_name(info.kind), info.meaning);
  }
  return rows;
}

// Keys: how allocations are named (Snapshot.with_keys).
void bind_keys(nb::module_& m) {
  nb::class_<SourceKeyOptions>(m, "Keys", "How allocations are named (with_keys' options)")
      .def(
          "__init__",
          [](SourceKeyOptions* self, int depth, const std::string& rule, const std::string& group,
             std::vector<std::string> skip, std::vector<std::string> keep,
             std::vector<std::string> roots,
             const std::optional<std::string>& category_rules_file) {
            new (self)
                SourceKeyOptions(make_keys(depth, rule, group, std::move(skip), std::move(keep),
                                           std::move(roots), category_rules_file));
          },
          "frame_depth"_a = 1, "keys"_a = "user", "group_by"_a = "source",
          "skip"_a = std::vector<std::string>{}, "keep"_a = std::vector<std::string>{},
          "root"_a = std::vector<std::string>{}, "category_rules_file"_a = nb::none());
}

// A loaded snapshot: its devices, settings and columns (numpy views).
void bind_loaded_columns(nb::class_<Loaded>& loaded) {
  loaded.def_prop_ro("name", &Loaded::name)
      .def("devices", [](const Loaded& self) { return self.snapshot().devices_in_use(); })
      .def(
          "step_count",
          [](Loaded& self, std::optional<int> device) {
            return self.analysis(device).steps().size();
          },
          "device"_a.none())
      .def(
          "device",
          [](Loaded& self, std::optional<int> device) { return self.analysis(device).device(); },
          "device"_a.none(), Release())
      // The CLI's stderr line when a report leaves devices out ("" when none
      // or when the device was asked for).
      .def(
          "device_note",
          [](Loaded& self, std::optional<int> device) {
            const DeviceChoice& choice = self.analysis(device).device_choice();
            if (choice.reason == DeviceReason::kRequested || !choice.others()) return std::string();
            return device_choice_note(
                self.name(), choice,
                ChooseDevice{"load(..., device=N) or .on_device(N)", ".on_device(", ")"});
          },
          "device"_a.none(), Release())
      .def("allocator_settings",
           [](const Loaded& self) { return self.snapshot().allocator_settings.json; })
      .def("info",
           [](const Loaded& self) {
             const Snapshot& model = self.snapshot();
             return std::make_tuple(model.file_size, model.pickle_size, model.compression,
                                    model.pickle_protocol);
           })
      .def("events", &event_columns, "device"_a.none())
      .def(
          "entry_groups",
          [](Loaded& self, std::optional<int> device, const SourceKeyOptions& keys) {
            EntryGroups groups;
            {
              nb::gil_scoped_release release;
              groups = entry_groups(self, device, keys);
            }
            return std::make_tuple(owned(std::move(groups.source)), groups.source_names,
                                   owned(std::move(groups.category)));
          },
          "device"_a.none(), "keys"_a)
      .def("segments", &segment_columns)
      .def("blocks", &block_columns)
      .def("frames", &frame_columns)
      .def("stacks", &stack_columns);
}

// A report's parameter from a Python object: None is "not given"; a value
// of a type the parameter's kind takes goes to the table to be checked
// (service/parameters.h: ranges, sizes' text); any other type is a
// TypeError that says what the parameter takes.
service::Value value_of_object(const service::Parameter& parameter, nb::handle object) {
  using Kind = service::ParameterKind;
  if (object.is_none()) return std::monostate{};
  PyObject* value = object.ptr();
  const Kind kind = parameter.kind;
  // The Python types each kind takes (a bool is no number here).
  const bool is_bool = PyBool_Check(value);
  const bool is_int = PyLong_Check(value) && !is_bool;
  const bool is_float = PyFloat_Check(value);
  const bool is_text = PyUnicode_Check(value);
  if (kind == Kind::kSwitch && is_bool) return value == Py_True;
  if (kind == Kind::kSeconds && is_float) return nb::cast<double>(object);
  if ((kind == Kind::kSize || kind == Kind::kWholeOrWord || kind == Kind::kText) && is_text) {
    return nb::cast<std::string>(object);
  }
  if (kind != Kind::kSwitch && kind != Kind::kText && is_int) {
    int64_t whole = 0;
    if (!nb::try_cast(object, whole)) {
      throw Error(ErrorCode::kBadParameter, fmt::format("{} is out of range", parameter.id));
    }
    return whole;
  }
  throw nb::type_error(fmt::format("{} must be {}, not {}", parameter.id,
                                   service::kind_description(parameter),
                                   nb::inst_name(object).c_str())
                           .c_str());
}

// The request for a report from keyword arguments (top among them).
service::ReportRequest request_of(const service::ReportEntry& entry, const nb::dict& arguments,
                                  const SourceKeyOptions& keys) {
  std::vector<std::pair<std::string, service::Value>> given;
  for (auto [key, object] : arguments) {
    const std::string id = nb::cast<std::string>(key);
    const service::Parameter* parameter = service::find_parameter(entry, id);
    if (parameter == nullptr) {
      throw nb::type_error(
          fmt::format("{}() got an unexpected keyword argument '{}'", entry.name, id).c_str());
    }
    given.emplace_back(id, value_of_object(*parameter, object));
  }
  return service::request_for(entry, given, keys, service::Spelling::kKeyword);
}

const service::ReportEntry& entry_named(const std::string& name) {
  const service::ReportEntry* entry = service::find_report(name);
  if (entry == nullptr)
    throw Error(ErrorCode::kBadParameter, fmt::format("no report named '{}'", printable(name)));
  return *entry;
}

// The report table for the package's docstrings and the docs: per entry its
// names, what it shows, an example, its parameters.
nb::list report_table_description() {
  nb::list out;
  for (const service::ReportEntry& entry : service::report_table()) {
    nb::list parameters;
    for (const service::Parameter& parameter : entry.parameters) {
      nb::dict item;
      item["id"] = std::string(parameter.id);
      item["flag"] = service::spelled(parameter, service::Spelling::kFlag);
      item["takes"] = service::kind_description(parameter);
      item["value_name"] = std::string(parameter.value_name);
      item["help"] = std::string(parameter.help);
      item["required"] = parameter.required;
      parameters.append(item);
    }
    nb::dict item;
    item["name"] = std::string(entry.name);
    item["summary"] = std::string(entry.summary);
    item["description"] = std::string(entry.description);
    item["example"] = std::string(entry.example);
    item["default_top"] = entry.default_top;
    item["top_rows"] = std::string(entry.top_rows);
    item["schema"] = std::string(entry.schema);
    item["parameters"] = parameters;
    out.append(item);
  }
  return out;
}

// A loaded snapshot's reports: any entry of the report table, as the JSON
// its command writes, with its notes; and the summary `summarize` writes.
void bind_loaded_reports(nb::class_<Loaded>& loaded) {
  loaded
      .def(
          "report",
          [](Loaded& self, const std::string& name, std::optional<int> device,
             const nb::dict& arguments, const SourceKeyOptions& keys) {
            const service::ReportEntry& entry = entry_named(name);
            const service::ReportRequest request = request_of(entry, arguments, keys);
            nb::gil_scoped_release release;
            service::Answer answer =
                entry.answer(self.analysis(device), request, service::Format::kJson);
            return std::make_pair(text_of(answer.json), std::move(answer.notes));
          },
          "name"_a, "device"_a.none(), "arguments"_a, "keys"_a)
      .def(
          "summarize",
          [](Loaded& self, std::optional<int> device, const SourceKeyOptions& keys,
             std::optional<int64_t> rank, const nb::bytes& head) {
            // What `summarize` hashes: the file's first MiB on disk.
            const std::string head_bytes(static_cast<const char*>(head.data()), head.size());
            nb::gil_scoped_release release;
            if (!rank) rank = rank_from_name(self.name(), kDefaultRankPattern);
            RunSummary summary = run_summary(self.analysis(device), SummaryOptions{keys, rank});
            summary.head_hash = head_hash(std::span<const uint8_t>(
                reinterpret_cast<const uint8_t*>(head_bytes.data()), head_bytes.size()));
            return text_of(render_summary_json(summary));
          },
          "device"_a.none(), "keys"_a, "rank"_a.none(), "head"_a);
}

// Loading a file or bytes, and what takes several loaded snapshots (compare, plot).
void bind_loading(nb::module_& m) {
  m.def(
      "load_path",
      [](const std::string& path, bool allow_objects, uint64_t max_input) {
        return Loaded::open(path, session_options(allow_objects, max_input)).release();
      },
      "path"_a, "allow_objects"_a, "max_input"_a, Release());
  m.def(
      "load_bytes",
      [](const nb::bytes& data, const std::string& name, bool allow_objects, uint64_t max_input) {
        const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data.data()), data.size());
        nb::gil_scoped_release release;  // `data` is immutable and held by the caller
        return Loaded::open_bytes(bytes, name, session_options(allow_objects, max_input)).release();
      },
      "data"_a, "name"_a, "allow_objects"_a, "max_input"_a);
  m.def(
      "compare",
      [](Loaded& a, Loaded& b, std::optional<int> device_a, std::optional<int> device_b,
         std::optional<int64_t> step, int top, const SourceKeyOptions& keys) {
        return text_of(render_compare_json(
            compare_files(a.analysis(device_a), b.analysis(device_b), step, keys), top));
      },
      "a"_a, "b"_a, "device_a"_a.none(), "device_b"_a.none(), "step"_a.none(), "top"_a, "keys"_a,
      Release());
  m.def(
      "plot_html",
      [](const std::vector<Loaded*>& snapshots, const std::vector<std::string>& labels,
         std::optional<int> device, double precision_ms, uint64_t max_lifetimes,
         const SourceKeyOptions& keys, const std::optional<std::string>& whatif) {
        if (!html_plot_available())
          throw Error(ErrorCode::kUnavailable,
                      "this memsnap was built without the HTML plot; use text()");
        return render_plot_html(plot_runs(snapshots, labels, device, precision_ms, max_lifetimes,
                                          keys, true, kDefaultMaxEntries, whatif),
                                precision_ms);
      },
      "snapshots"_a, "labels"_a, "device"_a.none(), "precision_ms"_a, "max_lifetimes"_a, "keys"_a,
      "whatif"_a.none() = nb::none(), Release());
  m.def(
      "plot_text",
      [](const std::vector<Loaded*>& snapshots, const std::vector<std::string>& labels,
         std::optional<int> device, int width, int height, bool delta, bool color,
         const SourceKeyOptions& keys) {
        if (width < 20 || width > 1000 || height < 5 || height > 500)
          throw Error(ErrorCode::kBadParameter,
                      "width must be 20 to 1000 columns and height 5 to 500 rows");
        TextChartOptions options;
        options.width = width;
        options.height = height;
        options.absolute = !delta;
        options.color = color;
        return render_text_chart(
            plot_runs(snapshots, labels, device, 1.0, kDefaultMaxLifetimes, keys, false), options);
      },
      "snapshots"_a, "labels"_a, "device"_a.none(), "width"_a, "height"_a, "delta"_a, "color"_a,
      "keys"_a, Release());
}

// Reports over many files by path (runs/): ranks, run folders compared, check.
void bind_many_files(nb::module_& m) {
  m.def(
      "ranks",
      [](const std::vector<std::string>& inputs, std::optional<int> device,
         const std::string& steps, const SourceKeyOptions& keys, const std::string& rank_from,
         int jobs, bool allow_objects, uint64_t max_input) {
        Heard heard;
        const RanksRun run = ranks_of(
            inputs, run_inputs_of(device, steps, keys, rank_from, jobs, allow_objects, max_input),
            heard.listener());
        return heard.answer(render_ranks_json(run.report, run.unread), run.unread.size(),
                            run.files);
      },
      "inputs"_a, "device"_a.none(), "steps"_a, "keys"_a, "rank_from"_a, "jobs"_a,
      "allow_objects"_a, "max_input"_a, Release());
  m.def(
      "compare_runs",
      [](const std::string& dir_a, const std::string& dir_b, std::optional<int> device,
         const std::string& steps, std::optional<int64_t> step, int top,
         const SourceKeyOptions& keys, const std::string& rank_from, int jobs, bool allow_objects,
         uint64_t max_input) {
        Heard heard;
        const RunFoldersComparison run = compare_run_folders(
            dir_a, dir_b,
            run_inputs_of(device, steps, keys, rank_from, jobs, allow_objects, max_input), step,
            heard.listener());
        return heard.answer(render_run_compare_json(run.view(), top), run.unread.size(), run.files);
      },
      "dir_a"_a, "dir_b"_a, "device"_a.none(), "steps"_a, "step"_a.none(), "top"_a, "keys"_a,
      "rank_from"_a, "jobs"_a, "allow_objects"_a, "max_input"_a, Release());
  m.def(
      "check",
      [](const std::string& current, const std::string& baseline, const std::string& budget,
         const std::map<std::string, std::string>& amounts,
         const std::vector<std::pair<std::string, std::string>>& categories, bool no_oom,
         bool allow_unmeasured, int top, std::optional<int> device, const std::string& steps,
         const SourceKeyOptions& keys, const std::string& rank_from, int jobs, bool allow_objects,
         uint64_t max_input) {
        CheckRequest request{current, baseline, budget, {}, categories, no_oom, allow_unmeasured};
        for (const auto& [name, text] : amounts) request.amounts[limit_named(name)] = text;
        Heard heard;
        const CheckRun run = check_run(
            request, run_inputs_of(device, steps, keys, rank_from, jobs, allow_objects, max_input),
            heard.listener());
        auto [report, notes, error] = heard.answer(
            run.ranked ? render_check_json(*run.ranked, top) : render_check_json(*run.single, top),
            0, 0);
        return std::make_tuple(std::move(report), std::move(notes), run.passed());
      },
      "current"_a, "baseline"_a, "budget"_a, "amounts"_a, "categories"_a, "no_oom"_a,
      "allow_unmeasured"_a, "top"_a, "device"_a.none(), "steps"_a, "keys"_a, "rank_from"_a,
      "jobs"_a, "allow_objects"_a, "max_input"_a, Release());
}

// Names the package lists, and the console script.
void bind_names_and_cli(nb::module_& m) {
  m.def("server_available", &serve::server_available);
  nb::class_<Serving>(m, "Serving", "memsnap serve on a thread of this process")
      .def(nb::init<const std::vector<Loaded*>&, const std::vector<std::string>&,
                    std::optional<int>, serve::ServeOptions, const SourceKeyOptions&>(),
           "snapshots"_a, "labels"_a, "device"_a.none(), "options"_a, "keys"_a,
           nb::keep_alive<1, 2>(), Release())
      .def_prop_ro("url", &Serving::url)
      .def_prop_ro("running", &Serving::running)
      .def("stop", &Serving::stop, Release());
  nb::class_<serve::ServeOptions>(m, "ServeOptions", "Where memsnap serve listens")
      .def(
          "__init__",
          [](serve::ServeOptions* options, std::string host, uint16_t port, std::string token) {
            new (options) serve::ServeOptions{std::move(host), port, std::move(token)};
          },
          "host"_a, "port"_a, "token"_a);
  m.def("report_table", &report_table_description);
  m.def("category_names", &category_names);
  m.def("action_names", &action_names);
  m.def("error_codes", &error_code_table);
  m.def("html_plot_available", &html_plot_available);
  m.def(
      "run_cli",
      [](std::vector<std::string> args) {
        std::vector<char*> argv = argv_of(args);
        return cli::run_cli(static_cast<int>(args.size()), argv.data());
      },
      "argv"_a, Release());
}

}  // namespace
}  // namespace memsnap::python

NB_MODULE(_core, m) {
  using namespace memsnap;
  using namespace memsnap::python;
  m.doc() = "memsnap's C++ core (use the memsnap package, not this module)";
  m.attr("__version__") = std::string(kVersion);

  translate_errors();
  bind_keys(m);
  nb::class_<Loaded> loaded =
      nb::class_<Loaded>(m, "Loaded", "A decoded snapshot and its analyses");
  bind_loaded_columns(loaded);
  bind_loaded_reports(loaded);
  bind_loading(m);
  bind_many_files(m);
  bind_names_and_cli(m);
}
