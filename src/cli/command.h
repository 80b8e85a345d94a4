// The command table: each command of the CLI is one file in src/cli/ that
// returns a Command. main() parses the command line against the table and
// runs the one chosen; errors are converted to messages and exit statuses
// once, in run_cli.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace memsnap::cli {

// Runs the command after the command line was parsed. Throws memsnap::Error
// (kind decides the exit status); writes reports through cli/output.h.
using Runner = std::function<void()>;

struct Command {
  std::string_view name;
  std::string_view help;  // one line, shown in `memsnap --help`
  // Declares the command's arguments and flags on its subcommand and returns
  // the runner that reads them once parsing is done.
  std::function<Runner(CLI::App& command)> configure;
  // Below the options in `memsnap NAME --help`: what it shows, one example.
  std::string_view description;
  std::string_view example;
};

// Every command, in the order `memsnap --help` lists them.
const std::vector<Command>& command_table();

// The whole CLI: parse argv, run one command, return the exit status.
int run_cli(int argc, char** argv);

}  // namespace memsnap::cli
