// A report's own parameters (--time, --at, --window, ...), each declared once
// with its kind, help and limits. Every front end reads values its own way
// (the command line and a URL as text, Python as objects) and hands them here
// to be checked, so a limit is written once and its message names the
// parameter as that front end spells it: "--time must be >= 0" on the command
// line, "time must be >= 0" in Python.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace memsnap::service {

enum class ParameterKind : uint8_t {
  kSeconds,      // a finite number of seconds
  kWhole,        // a whole number
  kWholeOrWord,  // a whole number, or one word that is a choice of its own ("peak")
  kSize,         // bytes: a whole number, or a size such as 80GiB or 512MiB
  kSwitch,       // on or off
  kText,         // a short text (at most kMaxTextBytes): allocator settings
};
constexpr size_t kMaxTextBytes = 256;

struct Parameter {
  std::string_view id;  // Python's keyword and a URL's query key: "time", "all_steps"
  ParameterKind kind = ParameterKind::kSeconds;
  std::string_view help;          // for --help, docstrings and the docs
  std::string_view value_name;    // "SECONDS", "N|peak", "SIZE" (none for a switch)
  double minimum = 0;             // the lowest value allowed (kSeconds, kWhole, kWholeOrWord)
  bool above_minimum = false;     // the value must be greater than `minimum`
  std::string_view word;          // kWholeOrWord: the word
  std::string_view limit_reason;  // said after a value out of range: "seconds before the OOM"
  bool required = false;
};

// A value as a front end gave it: none, a number, a word, or a switch.
using Value = std::variant<std::monostate, double, int64_t, std::string, bool>;

// How one front end names parameters in its messages.
enum class Spelling : uint8_t {
  kFlag,     // the command line: "--all-steps"
  kKeyword,  // Python and URLs: "all_steps"
};
std::string spelled(const Parameter& parameter, Spelling spelling);
// The command line's flag for a parameter id: "--" and the id with '-' for
// '_' ("all_steps" -> "--all-steps"); also how the command line spells the
// parameters of runs/ (RunListener::spell).
std::string flag_of(std::string_view id);
// What a value of this kind is, for a message about a value of the wrong
// type: "a number of seconds", "a whole number or 'peak'".
std::string kind_description(const Parameter& parameter);

// What is wrong with `text` as the parameter's value ("expects a finite
// number, not 'nan'"), or empty. The range is checked later (checked()).
std::string syntax_problem(const Parameter& parameter, std::string_view text);
// `text` read as the parameter's value, or a bad_parameter Error naming the parameter.
Value value_of_text(const Parameter& parameter, std::string_view text, Spelling spelling);

// The checked values of one request, by parameter id.
class Arguments {
 public:
  [[nodiscard]] bool has(std::string_view id) const;
  [[nodiscard]] std::optional<double> seconds(std::string_view id) const { return get<double>(id); }
  [[nodiscard]] std::optional<int64_t> whole(std::string_view id) const { return get<int64_t>(id); }
  [[nodiscard]] std::optional<std::string> word(std::string_view id) const {
    return get<std::string>(id);
  }
  [[nodiscard]] std::optional<std::string> text(std::string_view id) const {
    return get<std::string>(id);
  }
  [[nodiscard]] bool on(std::string_view id) const {  // a switch given and on
    return get<bool>(id).value_or(false);
  }
  [[nodiscard]] uint64_t bytes(std::string_view id) const;  // 0 when not given

  void set(std::string_view id, Value value);

 private:
  // The value of `id` where it holds a T.
  template <typename T>
  [[nodiscard]] std::optional<T> get(std::string_view id) const {
    auto found = values_.find(id);
    if (found == values_.end()) return {};
    if (const T* value = std::get_if<T>(&found->second)) return *value;
    return {};
  }

  std::map<std::string, Value, std::less<>> values_;
};

// `given` (id, value) checked against `parameters`: each value converted to
// its kind (an int given for seconds is seconds; a size's text is read) and
// within its limits, the required ones present. Throws a bad_parameter Error naming
// the parameter; an id that is not among them is a usage error too.
Arguments checked(const std::vector<Parameter>& parameters,
                  const std::vector<std::pair<std::string, Value>>& given, Spelling spelling);

// A size as the command line reads it: 1048576, 80GiB, 512MiB, 1.5G, 80 GB
// (binary multiples, case ignored); nullopt when it is none.
std::optional<uint64_t> size_of_text(std::string_view text);

}  // namespace memsnap::service
