#include "service/parameters.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "memsnap/error.h"
#include "report/format.h"

namespace memsnap::service {
namespace {

// Long inputs are cut in messages.
std::string shown(std::string_view input) {
  const std::string cut =
      input.size() <= 24 ? std::string(input) : std::string(input.substr(0, 24)) + "...";
  return printable(cut);
}

std::optional<double> finite_of_text(std::string_view text) {
  const std::string copy(text);  // strtod wants a terminated string
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value)) return {};
  return value;
}

std::optional<int64_t> whole_of_text(std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return {};
  return value;
}

// Digits (a sign first) that no int64 holds: a whole number past the bound,
// not a word that is none.
bool whole_beyond_int64(std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc::result_out_of_range && end == text.data() + text.size();
}

// The largest size a parameter takes: 4 EiB, as check's limits (no device
// comes near; the JSON front ends carry sizes as int64).
constexpr uint64_t kMaxSizeBytes = uint64_t{1} << 62;
constexpr std::string_view kMaxSizeText = "4 EiB (4611686018427387904 bytes)";

// A size's bytes, floored, before any bound: nullopt when the text is no size.
std::optional<double> size_bytes_of_text(std::string_view text);

std::string number_text(double value) {
  return value == std::floor(value) && std::abs(value) < 1e15
             ? std::to_string(static_cast<int64_t>(value))
             : fmt::format("{}", value);
}

// "must be >= 0 (seconds from the start of the trace)"
std::string limit_text(const Parameter& parameter) {
  std::string text = fmt::format(
      "must be {} {}", parameter.above_minimum ? ">" : ">=", number_text(parameter.minimum));
  if (!parameter.word.empty()) text += fmt::format(" or '{}'", parameter.word);
  if (!parameter.limit_reason.empty()) text += fmt::format(" ({})", parameter.limit_reason);
  return text;
}

bool within(const Parameter& parameter, double value) {
  return parameter.above_minimum ? value > parameter.minimum : value >= parameter.minimum;
}

[[noreturn]] void out_of_range(const Parameter& parameter, Spelling spelling) {
  throw Error(ErrorCode::kBadParameter,
              fmt::format("{} {}", spelled(parameter, spelling), limit_text(parameter)));
}

[[noreturn]] void wrong_type(const Parameter& parameter, Spelling spelling) {
  throw Error(ErrorCode::kBadParameter, fmt::format("{} must be {}", spelled(parameter, spelling),
                                                    kind_description(parameter)));
}

// A value of the right type for the parameter's kind, in range.
Value checked_value(const Parameter& parameter, const Value& value, Spelling spelling) {
  switch (parameter.kind) {
    case ParameterKind::kSeconds: {
      double seconds = 0;
      if (const auto* number = std::get_if<double>(&value)) {
        seconds = *number;
      } else if (const auto* whole = std::get_if<int64_t>(&value)) {
        seconds = static_cast<double>(*whole);
      } else if (const auto* text = std::get_if<std::string>(&value)) {
        return checked_value(parameter, value_of_text(parameter, *text, spelling), spelling);
      } else {
        wrong_type(parameter, spelling);
      }
      if (!std::isfinite(seconds) || !within(parameter, seconds)) out_of_range(parameter, spelling);
      return seconds;
    }
    case ParameterKind::kWhole:
    case ParameterKind::kWholeOrWord: {
      if (const auto* text = std::get_if<std::string>(&value)) {
        if (!parameter.word.empty() && *text == parameter.word) return *text;
        return checked_value(parameter, value_of_text(parameter, *text, spelling), spelling);
      }
      const auto* whole = std::get_if<int64_t>(&value);
      if (whole == nullptr) wrong_type(parameter, spelling);
      if (!within(parameter, static_cast<double>(*whole))) out_of_range(parameter, spelling);
      return *whole;
    }
    case ParameterKind::kSize: {
      if (const auto* text = std::get_if<std::string>(&value)) {
        return checked_value(parameter, value_of_text(parameter, *text, spelling), spelling);
      }
      const auto* whole = std::get_if<int64_t>(&value);
      if (whole == nullptr) wrong_type(parameter, spelling);
      if (*whole < 1) {
        throw Error(ErrorCode::kBadParameter, fmt::format("{} must be at least 1 byte, not {}",
                                                          spelled(parameter, spelling), *whole));
      }
      if (static_cast<uint64_t>(*whole) > kMaxSizeBytes) {
        throw Error(ErrorCode::kBadParameter,
                    fmt::format("{} must be at most {}, not {}", spelled(parameter, spelling),
                                kMaxSizeText, *whole));
      }
      return *whole;
    }
    case ParameterKind::kSwitch:
      if (!std::holds_alternative<bool>(value)) wrong_type(parameter, spelling);
      return value;
    case ParameterKind::kText: {
      const auto* text = std::get_if<std::string>(&value);
      if (text == nullptr) wrong_type(parameter, spelling);
      if (std::string problem = syntax_problem(parameter, *text); !problem.empty()) {
        throw Error(ErrorCode::kBadParameter,
                    fmt::format("{}: {}", spelled(parameter, spelling), problem));
      }
      return value;
    }
  }
  return value;
}

}  // namespace

std::string flag_of(std::string_view id) {
  std::string flag = "--" + std::string(id);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string spelled(const Parameter& parameter, Spelling spelling) {
  return spelling == Spelling::kKeyword ? std::string(parameter.id) : flag_of(parameter.id);
}

std::string kind_description(const Parameter& parameter) {
  switch (parameter.kind) {
    case ParameterKind::kSeconds: return "a number of seconds";
    case ParameterKind::kWhole: return "a whole number";
    case ParameterKind::kWholeOrWord: return fmt::format("a whole number or '{}'", parameter.word);
    case ParameterKind::kSize: return "a number of bytes or a size like '80GiB'";
    case ParameterKind::kSwitch: return "True or False";
    case ParameterKind::kText: return "a text";
  }
  return "a value";
}

namespace {

std::optional<double> size_bytes_of_text(std::string_view text) {
  auto trimmed = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  text = trimmed(text);
  size_t digits = 0;
  while (digits < text.size() &&
         ((text[digits] >= '0' && text[digits] <= '9') || (text[digits] == '.' && digits > 0))) {
    ++digits;
  }
  if (digits == 0 || text[digits - 1] == '.') return {};
  const std::optional<double> number = finite_of_text(text.substr(0, digits));
  std::string unit(trimmed(text.substr(digits)));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  constexpr std::string_view kPrefixes = "kmgtpe";
  double scale = 1;
  if (!unit.empty() && kPrefixes.find(unit.front()) != std::string_view::npos) {
    scale = std::pow(1024.0, static_cast<double>(kPrefixes.find(unit.front()) + 1));
    unit.erase(0, 1);
    if (!unit.empty() && unit.front() == 'i') unit.erase(0, 1);
  }
  if (!number || !(unit.empty() || unit == "b")) return {};
  return std::floor(*number * scale);
}

}  // namespace

std::optional<uint64_t> size_of_text(std::string_view text) {
  const std::optional<double> bytes = size_bytes_of_text(text);
  if (!bytes || !(*bytes < 0x1p64)) return {};
  return static_cast<uint64_t>(*bytes);
}

std::string syntax_problem(const Parameter& parameter, std::string_view text) {
  switch (parameter.kind) {
    case ParameterKind::kSeconds:
      if (finite_of_text(text)) return {};
      return fmt::format("expects a finite number, not '{}'", shown(text));
    case ParameterKind::kWhole:
    case ParameterKind::kWholeOrWord: {
      if (!parameter.word.empty() && text == parameter.word) return {};
      const std::optional<int64_t> whole = whole_of_text(text);
      if (whole && within(parameter, static_cast<double>(*whole))) return {};
      // A number past int64 breaks the upper bound, not the lower one.
      const bool too_large = whole_beyond_int64(text) && text.front() != '-';
      return fmt::format(
          "expects a whole number {} {}{}{}, not '{}'",
          parameter.above_minimum ? ">" : ">=", number_text(parameter.minimum),
          too_large ? fmt::format(" and at most {}", std::numeric_limits<int64_t>::max()) : "",
          parameter.word.empty() ? "" : fmt::format(" or '{}'", parameter.word), shown(text));
    }
    case ParameterKind::kSize: {
      const std::optional<double> bytes = size_bytes_of_text(text);
      if (!bytes) {
        return fmt::format(
            "expects a size such as 80GiB, 512MiB or 1048576 (B, KiB, MiB, GiB, TiB, PiB or EiB), "
            "not '{}'",
            shown(text));
      }
      if (*bytes < 1) return fmt::format("expects at least 1 byte, not '{}'", shown(text));
      if (*bytes > static_cast<double>(kMaxSizeBytes)) {
        return fmt::format("expects at most {}, not '{}'", kMaxSizeText, shown(text));
      }
      return {};
    }
    case ParameterKind::kSwitch:
      if (text.empty() || text == "true" || text == "false" || text == "1" || text == "0") {
        return {};
      }
      return fmt::format("expects true or false, not '{}'", shown(text));
    case ParameterKind::kText:
      if (text.size() <= kMaxTextBytes) return {};
      return fmt::format("expects at most {} bytes, not {}", kMaxTextBytes, text.size());
  }
  return {};
}

Value value_of_text(const Parameter& parameter, std::string_view text, Spelling spelling) {
  if (std::string problem = syntax_problem(parameter, text); !problem.empty()) {
    throw Error(ErrorCode::kBadParameter,
                fmt::format("{}: {}", spelled(parameter, spelling), problem));
  }
  switch (parameter.kind) {
    case ParameterKind::kSeconds: return *finite_of_text(text);
    case ParameterKind::kWhole: return *whole_of_text(text);
    case ParameterKind::kWholeOrWord:
      if (text == parameter.word) return std::string(text);
      return *whole_of_text(text);
    case ParameterKind::kSize: return static_cast<int64_t>(*size_of_text(text));  // checked above
    case ParameterKind::kSwitch: return text.empty() || text == "true" || text == "1";
    case ParameterKind::kText: return std::string(text);
  }
  return {};
}

bool Arguments::has(std::string_view id) const {
  return values_.contains(id);
}

uint64_t Arguments::bytes(std::string_view id) const {
  const std::optional<int64_t> value = whole(id);
  return value ? static_cast<uint64_t>(*value) : 0;
}

void Arguments::set(std::string_view id, Value value) {
  values_.insert_or_assign(std::string(id), std::move(value));
}

Arguments checked(const std::vector<Parameter>& parameters,
                  const std::vector<std::pair<std::string, Value>>& given, Spelling spelling) {
  Arguments arguments;
  for (const auto& entry : given) {
    const std::string& id = entry.first;
    const Value& value = entry.second;
    auto parameter = std::find_if(parameters.begin(), parameters.end(),
                                  [&id](const Parameter& p) { return p.id == id; });
    if (parameter == parameters.end()) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("'{}' is not a parameter of this report", printable(id)));
    }
    if (std::holds_alternative<std::monostate>(value)) continue;  // None: not given
    arguments.set(id, checked_value(*parameter, value, spelling));
  }
  for (const Parameter& parameter : parameters) {
    if (parameter.required && !arguments.has(parameter.id)) {
      throw Error(ErrorCode::kBadParameter,
                  fmt::format("{} is required", spelled(parameter, spelling)));
    }
  }
  return arguments;
}

}  // namespace memsnap::service
