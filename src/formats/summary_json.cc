#include "formats/summary_json.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <xxhash.h>

#include "memsnap/error.h"
#include "memsnap/version.h"
#include "report/findings.h"
#include "report/format.h"
#include "report/json_fields.h"
#include "util/utf8.h"

namespace memsnap {

using nlohmann::ordered_json;

namespace {

ordered_json usage_rows(const std::vector<SourceUsage>& rows) {
  ordered_json out = ordered_json::array();
  for (const SourceUsage& row : rows) {
    out.push_back({{"source", row.source},
                   {"bytes", row.bytes},
                   {"count", row.count},
                   {"key_kind", key_kind_name(row.kind)}});
  }
  return out;
}

// A row's key_kind; summaries written before it had none: an allocation site.
KeyKind key_kind_of(const ordered_json& row) {
  auto found = row.find("key_kind");
  if (found == row.end() || !found->is_string()) return KeyKind::kAllocationSite;
  for (KeyKind kind : {KeyKind::kAllocationSite, KeyKind::kFreeSite, KeyKind::kOther}) {
    if (found->get_ref<const std::string&>() == key_kind_name(kind)) return kind;
  }
  return KeyKind::kAllocationSite;
}

// Typed access to a summary document: each accessor names the key's path in
// its error, so a hand-edited or foreign file says exactly what is wrong.
class Reader {
 public:
  explicit Reader(const std::string& where) : where_(where) {}

  [[noreturn]] void fail(const std::string& key, std::string_view what) const {
    throw Error(ErrorCode::kBadSummary,
                fmt::format("{}: not a memsnap summary: {} {}", where_, key, what));
  }
  const ordered_json& field(const ordered_json& object, const std::string& key,
                            const std::string& path) const {
    auto it = object.find(key);
    if (it == object.end()) fail(path + key, "is missing");
    return *it;
  }
  const ordered_json& object(const ordered_json& parent, const std::string& key,
                             const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    if (!value.is_object()) fail(path + key, "is not an object");
    return value;
  }
  const ordered_json& array(const ordered_json& parent, const std::string& key,
                            const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    if (!value.is_array()) fail(path + key, "is not a list");
    return value;
  }
  int64_t integer(const ordered_json& parent, const std::string& key,
                  const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    // Every count and byte total of a real run fits in 2^60 (the bound the
    // pickle reader puts on sizes); within it the reports' differences and
    // sums of a few values cannot overflow (+-2^62 once read "8 EiB below
    // the median" in ranks).
    constexpr int64_t kLimit = int64_t{1} << 60;
    if (value.is_number_unsigned()) {
      if (value.get<uint64_t>() > static_cast<uint64_t>(kLimit))
        fail(path + key, "is out of range");
      return static_cast<int64_t>(value.get<uint64_t>());
    }
    if (!value.is_number_integer()) fail(path + key, "is not a whole number");
    if (value.get<int64_t>() < -kLimit) fail(path + key, "is out of range");
    return value.get<int64_t>();
  }
  uint64_t count(const ordered_json& parent, const std::string& key,
                 const std::string& path) const {
    const int64_t value = integer(parent, key, path);
    if (value < 0) fail(path + key, "is negative");
    return static_cast<uint64_t>(value);
  }
  std::optional<int64_t> optional_integer(const ordered_json& parent, const std::string& key,
                                          const std::string& path) const {
    if (field(parent, key, path).is_null()) return std::nullopt;
    return integer(parent, key, path);
  }
  double number(const ordered_json& parent, const std::string& key, const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      fail(path + key, "is not a finite number");
    return value.get<double>();
  }
  std::optional<double> optional_number(const ordered_json& parent, const std::string& key,
                                        const std::string& path) const {
    if (field(parent, key, path).is_null()) return std::nullopt;
    return number(parent, key, path);
  }
  bool boolean(const ordered_json& parent, const std::string& key, const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    if (!value.is_boolean()) fail(path + key, "is not true or false");
    return value.get<bool>();
  }
  std::string string(const ordered_json& parent, const std::string& key,
                     const std::string& path) const {
    const ordered_json& value = field(parent, key, path);
    if (!value.is_string()) fail(path + key, "is not a string");
    if (value.get_ref<const std::string&>().size() > kMaxSummaryString) {
      fail(path + key, fmt::format("is longer than {} bytes", kMaxSummaryString));
    }
    return value.get<std::string>();
  }
  // A list of at most `most` items (what summarize writes).
  const ordered_json& array(const ordered_json& parent, const std::string& key,
                            const std::string& path, size_t most) const {
    const ordered_json& list = array(parent, key, path);
    if (list.size() > most) {
      fail(path + key, fmt::format("has {} items; summarize writes at most {}", list.size(), most));
    }
    return list;
  }
  std::vector<SourceUsage> usage(const ordered_json& parent, const std::string& key,
                                 const std::string& path) const {
    std::vector<SourceUsage> rows;
    const ordered_json& list = array(parent, key, path, kSummarySources);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = fmt::format("{}{}[{}].", path, key, i);
      if (!list[i].is_object()) fail(at, "is not an object");
      rows.push_back({string(list[i], "source", at), count(list[i], "bytes", at),
                      count(list[i], "count", at), key_kind_of(list[i])});
    }
    return rows;
  }

 private:
  const std::string& where_;
};

GroupBy group_named(const Reader& reader, const std::string& name) {
  constexpr std::array kGroups = {
      GroupBy::kSource,         GroupBy::kFile,       GroupBy::kFunction,
      GroupBy::kStack,          GroupBy::kCategory,   GroupBy::kUserMetadata,
      GroupBy::kCompileContext, GroupBy::kAnnotation, GroupBy::kPool};
  for (GroupBy group : kGroups) {
    if (group_label(group) == name) return group;
  }
  reader.fail("group", fmt::format("names no grouping ('{}')", name));
}

// The file, its rank, device and devices, the grouping and the settings.
void read_identity(const Reader& r, const ordered_json& doc, RunSummary& s) {
  const ordered_json& file = r.object(doc, "file", "");
  s.path = r.string(file, "path", "file.");
  s.size_bytes = r.count(file, "size_bytes", "file.");
  s.head_hash = r.string(file, "head_xxh3_128", "file.");
  s.compression = r.string(file, "compression", "file.");
  s.rank = r.optional_integer(doc, "rank", "");
  const int64_t device = r.integer(doc, "device", "");
  if (device < 0 || device > std::numeric_limits<int>::max()) r.fail("device", "is out of range");
  s.device = static_cast<int>(device);
  const ordered_json& devices = r.array(doc, "devices", "");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].is_number_integer() || devices[i].get<int64_t>() < 0 ||
        devices[i].get<int64_t>() > std::numeric_limits<int>::max()) {
      r.fail(fmt::format("devices[{}]", i), "is not a device ordinal");
    }
    s.devices.push_back(devices[i].get<int>());
  }
  s.group = group_named(r, r.string(doc, "group", ""));
  s.allocator_settings = r.field(doc, "allocator_settings", "");
}

// The segments at the dump.
void read_segments(const Reader& r, const ordered_json& doc, RunSummary& s) {
  const ordered_json& seg = r.object(doc, "segments", "");
  s.segments.count = r.count(seg, "count", "segments.");
  s.segments.total_size = r.count(seg, "total_size", "segments.");
  s.segments.allocated_size = r.count(seg, "allocated_size", "segments.");
  s.segments.active_size = r.count(seg, "active_size", "segments.");
  s.segments.awaiting_free_size = r.count(seg, "awaiting_free_size", "segments.");
  s.segments.inactive_size = r.count(seg, "inactive_size", "segments.");
  s.segments.fragmentation = r.number(seg, "fragmentation", "segments.");
  s.segments.expandable_count = r.count(seg, "expandable_count", "segments.");
  s.segments.private_pool_count = r.count(seg, "private_pool_count", "segments.");
  s.segments.block_count = r.count(seg, "block_count", "segments.");
}

// Peaks, baseline, counts and the trace's time.
void read_peaks(const Reader& r, const ordered_json& doc, RunSummary& s) {
  s.facts.reserved_peak = r.count(doc, "reserved_peak", "");
  s.facts.reserved_peak_time_s = r.optional_number(doc, "reserved_peak_time_s", "");
  s.facts.baseline = r.integer(doc, "baseline", "");
  s.facts.peak_delta = r.integer(doc, "peak_delta", "");
  s.facts.absolute_peak = r.integer(doc, "absolute_peak", "");
  s.facts.peak_time_s = r.optional_number(doc, "peak_time_s", "");
  if (auto event = r.optional_integer(doc, "peak_event", "")) {
    if (*event < 0) r.fail("peak_event", "is negative");
    s.facts.peak_event = static_cast<uint64_t>(*event);
  }
  s.facts.event_count = r.count(doc, "event_count", "");
  s.facts.alloc_count = r.count(doc, "alloc_count", "");
  const ordered_json& unmatched = r.object(doc, "unmatched_frees", "");
  s.facts.unmatched_free_count = r.count(unmatched, "count", "unmatched_frees.");
  s.facts.unmatched_free_bytes = r.count(unmatched, "bytes", "unmatched_frees.");
  s.facts.has_time = r.boolean(doc, "has_time", "");
  s.facts.trace_duration_s = r.number(doc, "trace_duration_s", "");
}

// The steps, and where they came from.
void read_steps(const Reader& r, const ordered_json& doc, RunSummary& s) {
  s.step_count = r.count(doc, "step_count", "");
  // Summaries written before steps could be inferred lack steps_source: their
  // steps are ProfilerStep marks.
  s.steps_origin.origin = StepOrigin::kProfiler;
  if (doc.contains("steps_source")) {
    const ordered_json& source = r.object(doc, "steps_source", "");
    const std::string kind = r.string(source, "kind", "steps_source.");
    const std::optional<StepOrigin> origin = step_origin_from_name(kind);
    if (!origin) r.fail("steps_source.kind", fmt::format("names no step source ('{}')", kind));
    s.steps_origin = {*origin, r.string(source, "from", "steps_source.")};
  }
  const ordered_json& steps = r.array(doc, "steps", "", kSummarySteps);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at = fmt::format("steps[{}].", i);
    if (!steps[i].is_object()) r.fail(at, "is not an object");
    s.steps.push_back({r.integer(steps[i], "step", at), r.boolean(steps[i], "complete", at),
                       r.number(steps[i], "duration_ms", at),
                       r.integer(steps[i], "absolute_peak", at),
                       r.integer(steps[i], "peak_delta", at)});
  }
}

// Live at the peak by source and category; throughput by source.
void read_sources(const Reader& r, const ordered_json& doc, RunSummary& s) {
  const ordered_json& live = r.object(doc, "live_at_peak", "");
  s.live_at_peak_sources = r.count(live, "sources", "live_at_peak.");
  s.live_at_peak_bytes = r.count(live, "bytes", "live_at_peak.");
  s.live_at_peak = r.usage(live, "by_source", "live_at_peak.");
  s.live_at_peak_by_category = r.usage(live, "by_category", "live_at_peak.");
  const ordered_json& throughput = r.object(doc, "throughput", "");
  s.throughput_sources = r.count(throughput, "sources", "throughput.");
  const ordered_json& rows = r.array(throughput, "by_source", "throughput.", kSummarySources);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at = fmt::format("throughput.by_source[{}].", i);
    if (!rows[i].is_object()) r.fail(at, "is not an object");
    s.throughput.push_back({r.string(rows[i], "source", at),
                            r.count(rows[i], "throughput_bytes", at),
                            r.count(rows[i], "alloc_count", at)});
  }
}

// The oom entries.
void read_ooms(const Reader& r, const ordered_json& doc, RunSummary& s) {
  const ordered_json& ooms = r.array(doc, "ooms", "");
  for (size_t i = 0; i < ooms.size(); ++i) {
    const std::string at = fmt::format("ooms[{}].", i);
    if (!ooms[i].is_object()) r.fail(at, "is not an object");
    SummaryOom oom;
    oom.event = r.count(ooms[i], "event", at);
    oom.requested = r.count(ooms[i], "requested", at);
    if (auto free = r.optional_integer(ooms[i], "device_free", at)) {
      if (*free < 0) r.fail(at + "device_free", "is negative");
      oom.device_free = static_cast<uint64_t>(*free);
    }
    oom.time_s = r.optional_number(ooms[i], "time_s", at);
    s.ooms.push_back(oom);
  }
  // Summaries before oom_count listed every entry; later ones list the first few.
  s.oom_count = ooms.size();
  if (doc.contains("oom_count")) {
    s.oom_count = r.count(doc, "oom_count", "");
    if (s.oom_count < ooms.size()) r.fail("oom_count", "is less than the oom entries listed");
  }
}

// What summaries written after version 1 was first written add: warnings, and what could not be
// measured.
void read_warnings_and_doubts(const Reader& r, const ordered_json& doc, RunSummary& s) {
  // Added after version 1 was first written: absent in older summaries.
  if (doc.contains("warnings")) {
    const ordered_json& warnings = r.array(doc, "warnings", "", kMaxSummaryWarnings);
    for (size_t i = 0; i < warnings.size(); ++i) {
      const std::string at = fmt::format("warnings[{}]", i);
      if (!warnings[i].is_string()) r.fail(at, "is not a string");
      if (warnings[i].get_ref<const std::string&>().size() > kMaxSummaryString) {
        r.fail(at, fmt::format("is longer than {} bytes", kMaxSummaryString));
      }
      s.warnings.push_back(warnings[i].get<std::string>());
    }
  }
  if (doc.contains("unmeasurable")) {
    const ordered_json& doubts = r.object(doc, "unmeasurable", "");
    // Kept in the words they were written with; an empty one is no doubt.
    const auto reason = [&](const char* key) -> Doubt {
      if (!doubts.contains(key) || doubts[key].is_null()) return {};
      std::string words = r.string(doubts, key, "unmeasurable.");
      if (words.empty()) return {};
      return doubt::InWords{std::move(words)};
    };
    s.doubts = SummaryDoubts{reason("absolute"), reason("reserved"), reason("fragmentation"),
                             reason("trace")};
  }
}

}  // namespace

std::string head_hash(std::span<const uint8_t> head) {
  const XXH128_hash_t hash = XXH3_128bits(head.data(), head.size());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

int text_nesting(std::string_view text, bool toml, int limit) {
  std::string open;  // the brackets open now, innermost last
  int deepest = 0;
  int key_parts = 1;   // TOML: parts of the key being read
  bool in_key = toml;  // TOML: a line starts with a key (or a [table] header)
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (c == '"' || (toml && c == '\'')) {  // a string: skip it (escapes in "..." only)
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (c == '"' && text[i] == '\\') ++i;
      }
      continue;
    }
    if (toml && c == '#') {  // a comment: skip to its end (the newline is read next)
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      in_key = toml && open.empty();
      key_parts = 1;
      continue;
    }
    const bool table = c == '{';
    if (c == '{' || c == '[') {
      open.push_back(c);
      deepest = std::max(deepest, static_cast<int>(open.size()));
      if (toml && table) {
        in_key = true;
        key_parts = 1;
      }
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (toml && c == '=') {
      in_key = false;
    } else if (toml && c == ',' && !open.empty() && open.back() == '{') {
      in_key = true;
      key_parts = 1;
    } else if (toml && in_key && c == '.') {
      ++key_parts;
      deepest = std::max(deepest, static_cast<int>(open.size()) + key_parts);
    }
  }
  return deepest;
}

bool looks_like_json(std::string_view head) {
  if (head.starts_with("\xef\xbb\xbf")) head.remove_prefix(3);  // a UTF-8 byte order mark
  const size_t first = head.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && head[first] == '{';
}

ordered_json render_summary_json(const RunSummary& s) {
  ordered_json steps = ordered_json::array();
  for (const SummaryStep& step : s.steps) {
    steps.push_back({{"step", step.number},
                     {"complete", step.complete},
                     {"duration_ms", step.duration_ms},
                     {"absolute_peak", step.absolute_peak},
                     {"peak_delta", step.peak_delta}});
  }
  ordered_json ooms = ordered_json::array();
  for (const SummaryOom& oom : s.ooms) {
    ooms.push_back(
        {{"event", oom.event},
         {"requested", oom.requested},
         {"device_free", oom.device_free ? ordered_json(*oom.device_free) : ordered_json(nullptr)},
         {"time_s", number_or_null(oom.time_s)}});
  }
  std::vector<std::string> warnings = phrase_all(s.findings);
  warnings.insert(warnings.end(), s.warnings.begin(), s.warnings.end());
  if (warnings.size() > kMaxSummaryWarnings) warnings.resize(kMaxSummaryWarnings);
  for (std::string& warning : warnings) {
    if (warning.size() > kMaxSummaryString) {
      warning = std::string(utf8_prefix(warning, kMaxSummaryString - 3)) + "...";
    }
  }
  const auto doubt = [](const Doubt& why) { return text_or_null(phrase(why)); };
  ordered_json throughput = ordered_json::array();
  for (const SummaryThroughput& row : s.throughput) {
    throughput.push_back(
        {{"source", row.source}, {"throughput_bytes", row.bytes}, {"alloc_count", row.count}});
  }
  return ordered_json{
      {"kind", kSummaryKind},
      {"version", kSummaryVersion},
      {"generated_by", fmt::format("memsnap {}", kVersion)},
      {"file",
       {{"path", s.path},
        {"size_bytes", s.size_bytes},
        {"head_xxh3_128", s.head_hash},
        {"compression", s.compression}}},
      {"rank", s.rank ? ordered_json(*s.rank) : ordered_json(nullptr)},
      {"device", s.device},
      {"devices", s.devices},
      {"group", group_label(s.group)},
      {"allocator_settings", s.allocator_settings},
      {"segments", segments_json(s.segments)},
      {"reserved_peak", s.facts.reserved_peak},
      {"reserved_peak_time_s", number_or_null(s.facts.reserved_peak_time_s)},
      {"baseline", s.facts.baseline},
      {"peak_delta", s.facts.peak_delta},
      {"absolute_peak", s.facts.absolute_peak},
      {"peak_time_s", number_or_null(s.facts.peak_time_s)},
      {"peak_event",
       s.facts.peak_event ? ordered_json(*s.facts.peak_event) : ordered_json(nullptr)},
      {"event_count", s.facts.event_count},
      {"alloc_count", s.facts.alloc_count},
      {"unmatched_frees",
       {{"count", s.facts.unmatched_free_count}, {"bytes", s.facts.unmatched_free_bytes}}},
      {"has_time", s.facts.has_time},
      {"trace_duration_s", s.facts.trace_duration_s},
      {"step_count", s.step_count},
      {"steps_source", steps_source_json(s.steps_origin)},
      {"steps", steps},
      {"live_at_peak",
       {{"sources", s.live_at_peak_sources},
        {"bytes", s.live_at_peak_bytes},
        {"by_source", usage_rows(s.live_at_peak)},
        {"by_category", usage_rows(s.live_at_peak_by_category)}}},
      {"throughput", {{"sources", s.throughput_sources}, {"by_source", throughput}}},
      {"oom_count", s.oom_count},
      {"ooms", ooms},
      {"unmeasurable",
       {{"absolute", doubt(s.doubts.absolute)},
        {"reserved", doubt(s.doubts.reserved)},
        {"fragmentation", doubt(s.doubts.fragmentation)},
        {"trace", doubt(s.doubts.trace)}}},
      {"warnings", warnings}};
}

RunSummary read_summary_json(std::string_view text, const std::string& where) {
  if (text.size() > kMaxSummaryBytes) {
    throw Error(ErrorCode::kLimitExceeded,
                fmt::format("{}: {} bytes is too large for a memsnap summary (at most {} MiB)",
                            where, text.size(), kMaxSummaryBytes >> 20));
  }
  if (text_nesting(text, false) > kMaxFileNesting) {
    throw Error(ErrorCode::kLimitExceeded,
                fmt::format("{}: nests deeper than {} levels; a memsnap summary has a few", where,
                            kMaxFileNesting));
  }
  ordered_json doc = ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded())
    throw Error(ErrorCode::kBadSummary, fmt::format("{}: not valid JSON", where));
  const Reader r(where);
  if (!doc.is_object()) r.fail("the document", "is not an object");
  if (!doc.contains("kind") || doc["kind"] != kSummaryKind) {
    r.fail("kind", fmt::format("is not \"{}\" (write one with memsnap summarize)", kSummaryKind));
  }
  if (r.integer(doc, "version", "") != kSummaryVersion) {
    r.fail("version", fmt::format("is not {} (this memsnap reads version {})", kSummaryVersion,
                                  kSummaryVersion));
  }
  RunSummary s;
  read_identity(r, doc, s);
  read_segments(r, doc, s);
  read_peaks(r, doc, s);
  read_steps(r, doc, s);
  read_sources(r, doc, s);
  read_ooms(r, doc, s);
  read_warnings_and_doubts(r, doc, s);
  return s;
}

}  // namespace memsnap
