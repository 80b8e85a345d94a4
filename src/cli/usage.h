// Usage errors in memsnap's words: one line naming the command it is about,
// with the nearest command or flag when a word looks mistyped. CLI11 finds
// the error; its option lists (never its message texts) say what was meant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "memsnap/error.h"

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace memsnap::cli {

// The candidates nearest to `typed`, best first, at most three: those at the
// least edit distance (a transposition counts one; case and leading dashes
// are ignored) when it is at most a third of the word (at least 1), else the
// candidates the word begins, when there are three or fewer. Empty when none
// is near.
std::vector<std::string> nearest_words(std::string_view typed,
                                       const std::vector<std::string>& candidates);

// A word with a '/' or a '.' that is no flag: a file's name, not a command.
bool looks_like_path(std::string_view word);

// "unknown command 'pars'; did you mean parse? (commands: ...)", without
// the "memsnap: " every message starts with.
std::string unknown_command_message(std::string_view asked);

// The message for a usage error CLI11 threw while parsing `app` (memsnap's
// root app, its commands added), without "memsnap: ".
std::string usage_message(const CLI::App& app, const CLI::ParseError& error);
// That message as the Error the edge reports: bad_parameter, or
// bad_config_file where it is what a flag's file of settings
// (--category-rules) says of itself.
Error usage_error(const CLI::App& app, const CLI::ParseError& error);

}  // namespace memsnap::cli
