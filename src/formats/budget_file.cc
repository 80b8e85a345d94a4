#include "formats/budget_file.h"

#include <fmt/format.h>
#include <cmath>
#include <sstream>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "formats/summary_json.h"
#include "memsnap/error.h"

namespace memsnap {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::optional<LimitKind> kind_named(std::string_view name) {
  for (const LimitInfo& info : all_limit_infos()) {
    if (info.kind != LimitKind::kCategory && info.name == name) return info.kind;
  }
  return std::nullopt;
}

bool is_count(LimitKind kind) {
  return kind == LimitKind::kMaxUnmatchedFrees;
}

// One key of the file: a string with a unit, a number, or (no_oom) a boolean.
struct Value {
  std::optional<std::string> text;
  std::optional<double> number;
  std::optional<bool> flag;
};

Limit limit_of(LimitKind kind, const std::string& category, const Value& value,
               const std::string& where) {
  const LimitInfo& info = limit_info(kind);
  Limit limit{kind, {}, category, true};
  if (kind == LimitKind::kNoOom) {
    if (!value.flag)
      throw Error(ErrorCode::kBadConfigFile,
                  fmt::format("{}: no_oom must be true or false", where));
    return limit;
  }
  if (value.flag)
    throw Error(ErrorCode::kBadConfigFile,
                fmt::format("{}: {} takes a number, not a boolean", where, limit.name()));
  if (value.text) {
    limit.amount = parse_amount(*value.text, where + ": " + limit.name(), info.takes_percent);
  } else if (!value.number || !std::isfinite(*value.number) || *value.number < 0) {
    throw Error(ErrorCode::kBadConfigFile,
                fmt::format("{}: {} must be a non-negative number", where, limit.name()));
  } else {
    limit.amount = Amount{*value.number, false};
  }
  if (kind == LimitKind::kMaxFragmentation && !limit.amount.percent && limit.amount.value > 1) {
    throw Error(ErrorCode::kBadConfigFile,
                fmt::format("{}: max_fragmentation is more than 1: give a fraction (0.3) "
                            "or a percent ('30%')",
                            where));
  }
  return limit;
}

Value toml_value(const toml::node& node) {
  Value value;
  if (auto s = node.value<std::string>())
    value.text = *s;
  else if (node.is_boolean())
    value.flag = node.value<bool>();
  else if (auto d = node.value<double>())
    value.number = *d;
  return value;
}

Value json_value(const nlohmann::json& node) {
  Value value;
  if (node.is_string())
    value.text = node.get<std::string>();
  else if (node.is_boolean())
    value.flag = node.get<bool>();
  else if (node.is_number())
    value.number = node.get<double>();
  return value;
}

// A budget's keys, whichever the format: the limits, and [category].
template <typename Object, typename ValueOf, typename ForEach>
std::vector<Limit> limits_from(const Object& root, const std::string& path, ValueOf value_of,
                               ForEach for_each) {
  std::vector<Limit> limits;
  for_each(root, [&](const std::string& key, const auto& node, bool is_table) {
    const std::string where = fmt::format("budget {}", path);
    if (key == "category") {
      if (!is_table)
        throw Error(ErrorCode::kBadConfigFile,
                    fmt::format("{}: [category] must be a table", where));
      for_each(node, [&](const std::string& name, const auto& inner, bool inner_table) {
        if (inner_table || name.empty()) {
          throw Error(ErrorCode::kBadConfigFile,
                      fmt::format("{}: category.{} must be a size", where, name));
        }
        require_category(name, where + ": [category]");
        limits.push_back(limit_of(LimitKind::kCategory, name, value_of(inner), where));
      });
      return;
    }
    auto kind = kind_named(key);
    if (!kind) {
      std::string known;
      for (const LimitInfo& info : all_limit_infos()) {
        known += (known.empty() ? "" : ", ") + std::string(info.name);
      }
      throw Error(ErrorCode::kBadConfigFile,
                  fmt::format("{}: unknown key '{}' (known: {})", where, key, known));
    }
    if (is_table)
      throw Error(ErrorCode::kBadConfigFile, fmt::format("{}: {} must be a value", where, key));
    limits.push_back(limit_of(*kind, "", value_of(node), where));
  });
  return limits;
}

std::vector<Limit> budget_limits(std::string_view text, const std::string& path) {
  const bool json = looks_like_json(text);
  if (text_nesting(text, !json) > kMaxFileNesting) {
    throw Error(ErrorCode::kBadConfigFile,
                fmt::format("budget {}: nests deeper than {} levels (tables in tables, or keys of "
                            "that many parts); "
                            "a budget has two",
                            path, kMaxFileNesting));
  }
  if (json) {
    const nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
    if (root.is_discarded() || !root.is_object()) {
      throw Error(ErrorCode::kBadConfigFile, fmt::format("budget {}: not a JSON object", path));
    }
    auto for_each = [](const nlohmann::json& object, auto&& visit) {
      if (!object.is_object()) return;
      for (const auto& [key, node] : object.items()) visit(key, node, node.is_object());
    };
    return limits_from(root, path, json_value, for_each);
  }
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    throw Error(ErrorCode::kBadConfigFile,
                fmt::format("budget {}: not valid TOML or JSON: {} (line {})", path,
                            error.description(), error.source().begin.line));
  }
  auto for_each = [](const auto& table_or_node, auto&& visit) {
    const toml::table* table = nullptr;
    if constexpr (std::is_same_v<std::decay_t<decltype(table_or_node)>, toml::table>) {
      table = &table_or_node;
    } else {
      table = table_or_node.as_table();
    }
    if (table == nullptr) return;
    for (const auto& [key, node] : *table) visit(std::string(key.str()), node, node.is_table());
  };
  return limits_from(root, path, toml_value, for_each);
}

}  // namespace

std::vector<Limit> read_budget(std::string_view text, const std::string& path) {
  try {
    return budget_limits(text, path);
  } catch (const Error& error) {
    // An amount or a category the budget gives (parse_amount,
    // require_category): the file's fault, as the rest of its refusals.
    if (error.code() != ErrorCode::kBadParameter) throw;
    throw Error(ErrorCode::kBadConfigFile, error.message());
  }
}

std::string amount_text(const Limit& limit) {
  if (limit.kind == LimitKind::kNoOom) return "true";
  if (limit.amount.percent) return fmt::format("{:g}%", limit.amount.value);
  if (limit.kind == LimitKind::kMaxFragmentation) {
    return fmt::format("{:g}%", std::round(limit.amount.value * 1000) / 10);
  }
  if (is_count(limit.kind)) return fmt::format("{:.0f}", limit.amount.value);
  const double mib = limit.amount.value / kMiB;
  if (mib == std::floor(mib)) return fmt::format("{:.0f}MiB", mib);
  return fmt::format("{:.0f}", limit.amount.value);
}

std::string write_budget_toml(const std::vector<Limit>& limits, const std::string& comment) {
  toml::table root;
  toml::table categories;
  for (const Limit& limit : limits) {
    const std::string text = amount_text(limit);
    if (limit.kind == LimitKind::kCategory) {
      categories.insert_or_assign(limit.category, text);
    } else if (limit.kind == LimitKind::kNoOom) {
      root.insert_or_assign(limit.name(), true);
    } else if (is_count(limit.kind)) {
      root.insert_or_assign(limit.name(), static_cast<int64_t>(limit.amount.value));
    } else {
      root.insert_or_assign(limit.name(), text);
    }
  }
  if (!categories.empty()) root.insert_or_assign("category", std::move(categories));
  std::ostringstream out;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  out << toml::toml_formatter(root) << "\n";
  return out.str();
}

}  // namespace memsnap
