#include "pickle/json.h"

#include <absl/container/flat_hash_map.h>

#include <fmt/format.h>
#include <bit>
#include <cmath>
#include <string>

#include "memsnap/error.h"

namespace memsnap::pickle {
namespace {

using nlohmann::ordered_json;

void check_depth(int depth) {
  if (depth > kMaxNesting) {
    throw Error(fmt::format("nesting deeper than {} levels (or a reference cycle) in the pickle",
                            kMaxNesting));
  }
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

ordered_json plain(const Vm& vm, const Value& raw, int depth) {
  check_depth(depth);
  Value value = vm.resolve(raw);
  switch (value.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return nullptr;
    case Kind::kBool: return value.payload != 0;
    case Kind::kInt: return static_cast<int64_t>(value.payload);
    case Kind::kUInt: return value.payload;
    case Kind::kBigInt: return big_int_decimal(vm, value);
    case Kind::kFloat: return as_double(value);
    case Kind::kStr: return std::string(vm.view(value));
    case Kind::kBytes:
    case Kind::kByteArray: return hex(vm.view(value));
    case Kind::kObject: return "<object " + std::string(vm.view(value)) + ">";
    case Kind::kList:
    case Kind::kTuple: {
      ordered_json out = ordered_json::array();
      for (const Value& item : vm.items(value)) out.push_back(plain(vm, item, depth + 1));
      return out;
    }
    case Kind::kSet:
    case Kind::kFrozenSet: {
      ordered_json out = ordered_json::array();
      for (const Value& item : set_members(vm, value, depth))
        out.push_back(plain(vm, item, depth + 1));
      return out;
    }
    case Kind::kDict: {
      ordered_json out = ordered_json::object();
      for (const auto& [key, item] : dict_entries(vm, value, depth)) {
        Value k = vm.resolve(key);
        std::string name = k.kind == Kind::kStr
                               ? std::string(vm.view(k))
                               : plain(vm, k, depth + 1)
                                     .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        out[name] = plain(vm, item, depth + 1);
      }
      return out;
    }
    case Kind::kExternal:
    case Kind::kExternalRange: return "<decoded>";
  }
  return nullptr;
}

class TaggedWriter {
 public:
  TaggedWriter(const Vm& vm, std::FILE* out) : vm_(vm), out_(out) {}
  ~TaggedWriter() { flush(); }
  TaggedWriter(const TaggedWriter&) = delete;
  TaggedWriter& operator=(const TaggedWriter&) = delete;

  void write(const Value& raw, int depth) {
    check_depth(depth);
    Value value = vm_.resolve(raw);
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

 private:
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
    bool all_str = true;
    for (const auto& entry : entries)
      all_str = all_str && vm_.resolve(entry.first).kind == Kind::kStr;
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
    if (buffer_.size() > (1u << 20)) flush();
  }
  void flush() {
    if (!buffer_.empty()) std::fwrite(buffer_.data(), 1, buffer_.size(), out_);
    buffer_.clear();
  }

  const Vm& vm_;
  std::FILE* out_;
  std::string buffer_;
};

}  // namespace

ordered_json to_plain_json(const Vm& vm, const Value& value) {
  return plain(vm, value, 0);
}

void write_tagged_json(const Vm& vm, const Value& value, std::FILE* out) {
  TaggedWriter writer(vm, out);
  writer.write(value, 0);
}

}  // namespace memsnap::pickle
