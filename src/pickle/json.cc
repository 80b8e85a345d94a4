#include "pickle/json.h"

#include <absl/container/flat_hash_map.h>

#include <fmt/format.h>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "memsnap/error.h"
#include "util/utf8.h"

namespace memsnap::pickle {
namespace {

using nlohmann::ordered_json;

[[noreturn]] void fail_nesting() {
  throw Error(ErrorCode::kLimitExceeded,
              fmt::format("nesting deeper than {} levels (or a reference cycle) in the pickle",
                          kMaxNesting));
}

void check_depth(int depth) {
  if (depth > kMaxNesting) fail_nesting();
}

std::string hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<uint8_t>(c));
  return out;
}

double as_double(const Value& value) {
  return std::bit_cast<double>(value.payload);
}

// Python's dict/set identity of a key: equal keys (1 == True == 1.0) collide.
std::string key_identity(const Vm& vm, const Value& raw, int depth) {
  check_depth(depth);
  Value value = vm.resolve(raw);
  switch (value.kind) {
    case Kind::kNone: return "n";
    case Kind::kBool:
    case Kind::kInt: return "i" + std::to_string(static_cast<int64_t>(value.payload));
    case Kind::kUInt: return "i" + std::to_string(value.payload);
    case Kind::kBigInt: return "i" + big_int_decimal(vm, value);
    case Kind::kFloat: {
      double d = as_double(value);
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
        return "i" + std::to_string(static_cast<int64_t>(d));
      }
      return "f" + fmt::format("{}", d);
    }
    case Kind::kStr: return "s" + std::string(vm.view(value));
    case Kind::kBytes: return "b" + std::string(vm.view(value));
    case Kind::kObject: return "o" + std::to_string(value.payload);
    case Kind::kTuple:
    case Kind::kFrozenSet: {
      std::string out = value.kind == Kind::kTuple ? "t(" : "F(";
      for (const Value& item : vm.items(value)) out += key_identity(vm, item, depth + 1) + ",";
      return out + ")";
    }
    default:
      throw Error(
          ErrorCode::kBadPickle,
          fmt::format("unhashable {} used as a dict key or set member", kind_name(value.kind)));
  }
}

// Python dict semantics: a repeated key keeps its first position, last value.
std::vector<std::pair<Value, Value>> dict_entries(const Vm& vm, const Value& dict, int depth) {
  std::span<const Value> items = vm.items(dict);
  std::vector<std::pair<Value, Value>> entries;
  entries.reserve(items.size() / 2);
  absl::flat_hash_map<std::string, size_t> position;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    auto [it, inserted] =
        position.try_emplace(key_identity(vm, items[i], depth + 1), entries.size());
    if (inserted) {
      entries.emplace_back(items[i], items[i + 1]);
    } else {
      entries[it->second].second = items[i + 1];
    }
  }
  return entries;
}

std::vector<Value> set_members(const Vm& vm, const Value& set, int depth) {
  std::vector<Value> members;
  absl::flat_hash_map<std::string, size_t> seen;
  for (const Value& item : vm.items(set)) {
    if (seen.try_emplace(key_identity(vm, item, depth + 1), members.size()).second) {
      members.push_back(item);
    }
  }
  return members;
}

// The text of strings (and bytes as hex) a plain tree may hold in all; what
// is beyond it is cut and counted.
struct TextBudget {
  uint64_t left = 0;
  uint64_t cut = 0;

  std::string take(std::string_view text, bool utf8) {
    if (text.size() <= left) {
      left -= text.size();
      return std::string(text);
    }
    ++cut;
    const std::string_view kept = utf8 ? utf8_prefix(text, left) : text.substr(0, left);
    left -= kept.size();
    return std::string(kept);
  }
};

ordered_json plain(const Vm& vm, const Value& raw, int depth, TextBudget& text) {
  check_depth(depth);
  Value value = vm.resolve(raw);
  switch (value.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return nullptr;
    case Kind::kBool: return value.payload != 0;
    case Kind::kInt: return static_cast<int64_t>(value.payload);
    case Kind::kUInt: return value.payload;
    case Kind::kBigInt: return big_int_decimal(vm, value);
    case Kind::kFloat: {
      // JSON has no inf or nan (nlohmann would write null): the string
      // Python's repr gives, as the tagged form's "__float__" has it.
      const double d = as_double(value);
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      return d;
    }
    case Kind::kStr: return text.take(vm.view(value), true);
    case Kind::kBytes:
    case Kind::kByteArray: return text.take(hex(vm.view(value)), false);
    case Kind::kObject: return "<object " + text.take(vm.view(value), true) + ">";
    case Kind::kList:
    case Kind::kTuple: {
      ordered_json out = ordered_json::array();
      for (const Value& item : vm.items(value)) out.push_back(plain(vm, item, depth + 1, text));
      return out;
    }
    case Kind::kSet:
    case Kind::kFrozenSet: {
      ordered_json out = ordered_json::array();
      for (const Value& item : set_members(vm, value, depth))
        out.push_back(plain(vm, item, depth + 1, text));
      return out;
    }
    case Kind::kDict: {
      ordered_json out = ordered_json::object();
      for (const auto& [key, item] : dict_entries(vm, value, depth)) {
        Value k = vm.resolve(key);
        std::string name = k.kind == Kind::kStr
                               ? text.take(vm.view(k), true)
                               : plain(vm, k, depth + 1, text)
                                     .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        out[name] = plain(vm, item, depth + 1, text);
      }
      return out;
    }
    case Kind::kExternal:
    case Kind::kExternalRange: return "<decoded>";
  }
  return nullptr;
}

// How often each container is reached from `root` (index: the container's
// payload; 0, 1, or 2 for twice or more). Each container is expanded once,
// so the walk is linear in the tree's distinct values, cycles included.
// Strings, bytes and object names at least this long that the pickle
// shares (the memo hands one to every place that names it) are written once
// too: one 1 MiB string named a million times was a terabyte of JSON.
constexpr uint32_t kSharedTextBytes = 256;

bool is_long_text(const Value& value) {
  return (value.kind == Kind::kStr || value.kind == Kind::kBytes ||
          value.kind == Kind::kByteArray || value.kind == Kind::kObject) &&
         value.size >= kSharedTextBytes;
}

// A text value's place in the input (or the VM's own bytes): the same key,
// the same bytes.
std::pair<uint64_t, uint64_t> text_key(const Value& value) {
  return {value.payload, (uint64_t{value.flags} << 40) |
                             (uint64_t{static_cast<uint8_t>(value.kind)} << 32) | value.size};
}

// How often each container (by index) and each long text (by place) is
// reached from the root, counted to 2.
struct Reaches {
  std::vector<uint8_t> containers;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint8_t> texts;
};

Reaches count_reaches(const Vm& vm, const Value& root) {
  Reaches reached{std::vector<uint8_t>(vm.container_count(), 0), {}};
  std::vector<Value> pending{root};
  while (!pending.empty()) {
    const Value value = vm.resolve(pending.back());
    pending.pop_back();
    if (is_long_text(value)) {
      uint8_t& count = reached.texts[text_key(value)];
      count = static_cast<uint8_t>(std::min(count + 1, 2));
      continue;
    }
    if (!value.is_container()) continue;
    uint8_t& count = reached.containers[value.payload];
    if (count == 2) continue;
    if (++count == 2) continue;
    for (const Value& item : vm.items(value)) pending.push_back(item);
  }
  return reached;
}

class TaggedWriter {
 public:
  TaggedWriter(const Vm& vm, const TextSink& sink, SharedObjects shared)
      : vm_(vm), sink_(sink), mark_shared_(shared == SharedObjects::kOnce) {}
  TaggedWriter(const TaggedWriter&) = delete;
  TaggedWriter& operator=(const TaggedWriter&) = delete;

  void start(const Value& root) {
    if (mark_shared_) reached_ = count_reaches(vm_, root);
    write(root, 0);
  }

  void flush() {
    if (!buffer_.empty()) sink_(buffer_);
    buffer_.clear();
  }

  void write(const Value& raw, int depth) {
    check_depth(depth);
    Value value = vm_.resolve(raw);
    if (mark_shared_ && value.is_container() && reached_.containers[value.payload] == 2) {
      shared(value, depth);
      return;
    }
    if (shared_long_text(value)) {
      shared_text(value, text_key(value), depth);
      return;
    }
    body(value, depth);
  }

 private:
  [[nodiscard]] bool shared_long_text(const Value& value) const {
    if (!mark_shared_ || !is_long_text(value)) return false;
    const auto count = reached_.texts.find(text_key(value));
    return count != reached_.texts.end() && count->second == 2;
  }

  // A long text reached more than once: in full the first time, by number after.
  void shared_text(const Value& value, std::pair<uint64_t, uint64_t> key, int depth) {
    const auto [it, first] = shared_texts_.try_emplace(key, next_shared_);
    if (!first) {
      put("{\"__ref__\": ");
      put(std::to_string(it->second));
      put("}");
      return;
    }
    ++next_shared_;
    put("{\"__shared__\": ");
    put(std::to_string(it->second));
    put(", \"__value__\": ");
    body(value, depth);
    put("}");
  }

  // A container reached more than once: in full the first time, by number after.
  void shared(const Value& value, int depth) {
    auto [it, first] = shared_.try_emplace(value.payload, Shared{next_shared_, false});
    if (first) ++next_shared_;
    if (!first) {
      // Reached again from inside itself: a cycle, which JSON cannot hold.
      if (!it->second.written) fail_nesting();
      put("{\"__ref__\": ");
      put(std::to_string(it->second.number));
      put("}");
      return;
    }
    put("{\"__shared__\": ");
    put(std::to_string(it->second.number));
    put(", \"__value__\": ");
    body(value, depth);
    put("}");
    shared_[value.payload].written = true;  // body() may have rehashed the map
  }

  void body(const Value& value, int depth) {
    switch (value.kind) {
      case Kind::kUndefined:
      case Kind::kNone: put("null"); break;
      case Kind::kBool: put(value.payload != 0 ? "true" : "false"); break;
      case Kind::kInt: put(std::to_string(static_cast<int64_t>(value.payload))); break;
      case Kind::kUInt: put(std::to_string(value.payload)); break;
      case Kind::kBigInt: tagged("__int__", quoted(big_int_decimal(vm_, value))); break;
      case Kind::kFloat: {
        double d = as_double(value);
        if (std::isnan(d)) {
          tagged("__float__", "\"nan\"");
        } else if (std::isinf(d)) {
          tagged("__float__", d > 0 ? "\"inf\"" : "\"-inf\"");
        } else {
          put(ordered_json(d).dump());
        }
        break;
      }
      case Kind::kStr: put(quoted(vm_.view(value))); break;
      case Kind::kBytes: tagged("__bytes__", quoted(hex(vm_.view(value)))); break;
      case Kind::kByteArray: tagged("__bytearray__", quoted(hex(vm_.view(value)))); break;
      case Kind::kObject: tagged("__object__", quoted(vm_.view(value))); break;
      case Kind::kList: sequence(vm_.items(value), depth); break;
      case Kind::kTuple:
        put("{\"__tuple__\": ");
        sequence(vm_.items(value), depth);
        put("}");
        break;
      case Kind::kSet:
      case Kind::kFrozenSet: {
        put(value.kind == Kind::kSet ? "{\"__set__\": " : "{\"__frozenset__\": ");
        std::vector<Value> members = set_members(vm_, value, depth);
        sequence(members, depth);
        put("}");
        break;
      }
      case Kind::kDict: dict(value, depth); break;
      case Kind::kExternal:
      case Kind::kExternalRange: put("null"); break;
    }
  }

  void sequence(std::span<const Value> items, int depth) {
    put("[");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i != 0) put(", ");
      write(items[i], depth + 1);
    }
    put("]");
  }

  void dict(const Value& value, int depth) {
    std::vector<std::pair<Value, Value>> entries = dict_entries(vm_, value, depth);
    // A key the pickle shares long is written once like any long text: in the
    // [key, value] form, where a key may be {"__ref__": N}.
    bool all_str = true;
    for (const auto& entry : entries) {
      const Value key = vm_.resolve(entry.first);
      all_str = all_str && key.kind == Kind::kStr && !shared_long_text(key);
    }
    if (all_str) {
      put("{");
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i != 0) put(", ");
        put(quoted(vm_.view(vm_.resolve(entries[i].first))));
        put(": ");
        write(entries[i].second, depth + 1);
      }
      put("}");
      return;
    }
    put("{\"__dict__\": [");
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i != 0) put(", ");
      put("[");
      write(entries[i].first, depth + 2);
      put(", ");
      write(entries[i].second, depth + 2);
      put("]");
    }
    put("]}");
  }

  void tagged(std::string_view tag, std::string_view json_value) {
    put("{\"");
    put(tag);
    put("\": ");
    put(json_value);
    put("}");
  }

  static std::string quoted(std::string_view text) {
    return ordered_json(std::string(text))
        .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }

  void put(std::string_view text) {
    buffer_.append(text);
    if (buffer_.size() > (1u << 16)) flush();
  }

  struct Shared {
    size_t number = 0;
    bool written = false;  // false while its value is being written
  };

  const Vm& vm_;
  const TextSink& sink_;
  bool mark_shared_;
  Reaches reached_;  // count_reaches of the root, when marking shared objects
  absl::flat_hash_map<uint64_t, Shared> shared_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, size_t> shared_texts_;
  size_t next_shared_ = 0;  // containers and texts numbered together, in order
  std::string buffer_;
};

}  // namespace

ordered_json to_plain_json(const Vm& vm, const Value& value, uint64_t max_text,
                           uint64_t* cut_strings) {
  TextBudget text{max_text, 0};
  ordered_json out = plain(vm, value, 0, text);
  if (cut_strings != nullptr) *cut_strings = text.cut;
  return out;
}

void write_tagged_json(const Vm& vm, const Value& value, const TextSink& sink,
                       SharedObjects shared) {
  TaggedWriter writer(vm, sink, shared);
  writer.start(value);
  writer.flush();
}

}  // namespace memsnap::pickle
