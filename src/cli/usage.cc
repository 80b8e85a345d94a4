#include "cli/usage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "report/format.h"

namespace memsnap::cli {
namespace {

constexpr size_t kMaxSuggestions = 3;
constexpr size_t kMaxShown = 40;  // characters of a typed word repeated in a message

std::string folded(std::string_view word) {
  while (!word.empty() && word.front() == '-') word.remove_prefix(1);
  std::string out(word);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance: edits, with a swap of neighbours as one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// A word the user typed, safe and short enough to repeat.
std::string shown(std::string_view word) {
  return word.size() <= kMaxShown ? printable(word) : printable(word.substr(0, kMaxShown)) + "...";
}

std::string or_list(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  }
  return out;
}

std::string command_names() {
  std::string names;
  for (const Command& command : command_table()) {
    names += (names.empty() ? "" : ", ") + std::string(command.name);
  }
  return names;
}

// Every spelling of an app's flags: --long and -s.
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

bool is_flag(std::string_view word) {
  return word.size() > 1 && word.front() == '-';
}

// "--jsn=1" was the flag --jsn.
std::string flag_of(const std::string& word) {
  return word.starts_with("--") ? word.substr(0, word.find('=')) : word;
}

std::string help_of(const CLI::App* command) {
  return command == nullptr ? "memsnap --help" : "memsnap " + command->get_name() + " --help";
}

// `flag` is not one of `where`'s (the root app when `command` is null).
std::string unknown_flag(const CLI::App& root, const CLI::App& where, const CLI::App* command,
                         const std::string& flag) {
  const std::string prefix = &where == &root ? "" : where.get_name() + ": ";
  const std::vector<std::string> near = nearest_words(flag, flag_names(where));
  if (!near.empty()) {
    return fmt::format("{}unknown flag {}; did you mean {}?", prefix, shown(flag), or_list(near));
  }
  std::vector<std::string> owners;
  for (const CLI::App* other : root.get_subcommands({})) {
    if (other == &where) continue;
    const std::vector<std::string> names = flag_names(*other);
    if (std::find(names.begin(), names.end(), flag) != names.end()) {
      owners.push_back(other->get_name());
    }
  }
  if (&where == &root && command != nullptr &&
      std::find(owners.begin(), owners.end(), command->get_name()) != owners.end()) {
    return fmt::format("{} goes after the command: memsnap {} {} ...", shown(flag),
                       command->get_name(), shown(flag));
  }
  if (!owners.empty()) {
    if (owners.size() > 4) {
      owners.resize(4);
      owners.back() = "...";
    }
    return fmt::format("{}unknown flag {} (a flag of {}; see {})", prefix, shown(flag),
                       fmt::join(owners, ", "), help_of(command));
  }
  return fmt::format("{}unknown flag {} (see {})", prefix, shown(flag), help_of(command));
}

// The option a CLI11 message is about: its text starts with the option's name.
const CLI::Option* option_named_in(const CLI::App& app, const std::string& message) {
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_name();
    if (!name.empty() && message.starts_with(name + ":")) return option;
  }
  return nullptr;
}

// CLI11's words for a value it could not take, in memsnap's: "Could not
// convert: --device = 99999999999" and "--max-entries: Value 99 not in range
// 0 to 15"; nullopt for any other error.
std::optional<std::string> value_message(const CLI::ParseError& error, const CLI::App* command,
                                         const std::string& prefix) {
  const std::string message = error.what();
  if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr) {
    constexpr std::string_view kLead = "Could not convert: ";
    const size_t equals = message.find(" = ");
    if (message.starts_with(kLead) && equals != std::string::npos) {
      const std::string name = message.substr(kLead.size(), equals - kLead.size());
      const std::string value = message.substr(equals + 3);
      const bool numeral =
          !value.empty() && value.find_first_not_of("-+0123456789") == std::string::npos;
      return fmt::format("{}{}: '{}' is {} (see {})", prefix, name, shown(value),
                         numeral ? "out of range" : "not a value it takes", help_of(command));
    }
  }
  if (const size_t value_at = message.find(": Value "), range_at = message.find(" not in range ");
      value_at != std::string::npos && range_at != std::string::npos && range_at > value_at) {
    return fmt::format("{}{}: expects {}, not '{}'", prefix, message.substr(0, value_at),
                       message.substr(range_at + 14),
                       shown(message.substr(value_at + 8, range_at - value_at - 8)));
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> nearest_words(std::string_view typed,
                                       const std::vector<std::string>& candidates) {
  const std::string word = folded(typed);
  if (word.empty()) return {};
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> near;
  std::vector<std::string> begun;
  for (const std::string& candidate : candidates) {
    const std::string other = folded(candidate);
    if (other == word) continue;  // not a mistyping of itself
    const size_t distance = edit_distance(word, other);
    // A one-letter word is as near to every other letter: no guess for it.
    if (distance <= allowed && distance < word.size()) near.emplace_back(distance, candidate);
    if (word.size() >= 2 && other.starts_with(word)) begun.push_back(candidate);
  }
  std::vector<std::string> out;
  if (!near.empty()) {
    std::stable_sort(near.begin(), near.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [distance, candidate] : near) {
      if (distance != near.front().first || out.size() == kMaxSuggestions) break;
      if (std::find(out.begin(), out.end(), candidate) == out.end()) out.push_back(candidate);
    }
  } else if (begun.size() <= kMaxSuggestions) {
    out = begun;
  }
  return out;
}

bool looks_like_path(std::string_view word) {
  return !word.empty() && word.front() != '-' &&
         (word.find('/') != std::string_view::npos || word.find('.') != std::string_view::npos);
}

std::string unknown_command_message(std::string_view asked) {
  std::vector<std::string> names;
  for (const Command& command : command_table()) names.emplace_back(command.name);
  const std::vector<std::string> near = nearest_words(asked, names);
  return fmt::format("unknown command '{}'{} (commands: {}; see memsnap --help)", shown(asked),
                     near.empty() ? "" : fmt::format("; did you mean {}?", or_list(near)),
                     command_names());
}

std::string usage_message(const CLI::App& app, const CLI::ParseError& error) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  const CLI::App* command = parsed.empty() ? nullptr : parsed.front();
  const CLI::App& where = command != nullptr ? *command : app;
  const std::string prefix = command != nullptr ? command->get_name() + ": " : "";

  // A mistyped flag explains the rest (a value taken for a file, a file
  // missing), so it is named first, the root's before the command's.
  const std::vector<std::string> root_left = app.remaining(false);
  const std::vector<std::string> command_left =
      command != nullptr ? command->remaining(false) : std::vector<std::string>{};
  for (const std::string& word : root_left) {
    if (is_flag(word)) return unknown_flag(app, app, command, flag_of(word));
  }
  for (const std::string& word : command_left) {
    if (is_flag(word)) return unknown_flag(app, where, command, flag_of(word));
  }

  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    const std::vector<std::string>& left = command_left.empty() ? root_left : command_left;
    // `memsnap a.pickle b.pickle`: two runs are compare's.
    if (command != nullptr && command->get_name() == "explain" && left.size() == 1 &&
        looks_like_path(left.front())) {
      std::string first = "A";
      for (const CLI::Option* option : command->get_options()) {
        if (option->get_positional() && option->count() > 0) first = option->results().front();
      }
      return fmt::format(
          "explain reads one file, and '{}' is a second: to see why one run peaks higher than "
          "the other, memsnap compare {} {} (see memsnap compare --help)",
          shown(left.front()), shown(first), shown(left.front()));
    }
    if (!left.empty()) {
      return fmt::format("{}unexpected argument '{}'{} (see {})", prefix, shown(left.front()),
                         left.size() > 1 ? fmt::format(" and {} more", left.size() - 1) : "",
                         help_of(command));
    }
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    if (command == nullptr) {
      return fmt::format("no command given: memsnap COMMAND FILE... (commands: {}; see {})",
                         command_names(), help_of(nullptr));
    }
    for (const CLI::Option* option : command->get_options()) {
      if (option->get_required() && option->count() == 0) {
        return fmt::format("{}{} is missing (see {})", prefix, option->get_name(),
                           help_of(command));
      }
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    if (const CLI::Option* option = option_named_in(where, error.what())) {
      const int most = std::max(1, option->get_expected_max());
      if (option->count() > static_cast<size_t>(most)) {
        return fmt::format("{}{} given {} times; give it once", prefix, option->get_name(),
                           option->count());
      }
      const std::string value = option->get_option_text();
      return fmt::format("{}{} needs a value{} (see {})", prefix, option->get_name(),
                         value.empty() ? "" : ": " + option->get_name() + " " + value,
                         help_of(command));
    }
  }
  if (std::optional<std::string> words = value_message(error, command, prefix)) return *words;
  // Validation: the validators' own words ("--time: expects a finite number,
  // not 'abc'").
  return prefix + error.what();
}

Error usage_error(const CLI::App& app, const CLI::ParseError& error) {
  std::string message = usage_message(app, error);
  const std::string_view said = error.what();
  const bool settings_file = dynamic_cast<const CLI::ValidationError*>(&error) != nullptr &&
                             said.starts_with("--category-rules: ") && message.ends_with(said);
  return {settings_file ? ErrorCode::kBadConfigFile : ErrorCode::kBadParameter, std::move(message)};
}

}  // namespace memsnap::cli
