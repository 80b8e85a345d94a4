// Adding a command: write src/cli/<name>.cc defining `Command <name>_command()`,
// declare it below and add it to the table (and to memsnap_cli's sources in
// CMakeLists.txt).
#include "cli/command.h"

namespace memsnap::cli {

Command explain_command();
Command parse_command();
Command dump_command();
Command events_command();
Command compare_command();
Command replay_to_time_command();
Command replay_step_command();
Command plot_command();
Command segments_command();
Command oom_command();
Command summarize_command();
Command ranks_command();
Command check_command();

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      explain_command(), parse_command(),          dump_command(),        events_command(),
      compare_command(), replay_to_time_command(), replay_step_command(), plot_command(),
      oom_command(),     segments_command(),       summarize_command(),   ranks_command(),
      check_command(),
  };
  return table;
}

}  // namespace memsnap::cli
