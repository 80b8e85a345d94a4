// The commands of `memsnap`, in the order its --help lists them. The reports
// of one snapshot come from the report table (service/report_table.h): adding
// one is an entry there and its name here. A command of its own (reading many
// files, writing a file, listing a trace) is a file in src/cli/ defining
// `Command <name>_command()`, declared below, listed in memsnap_cli's sources
// in CMakeLists.txt.
#include "cli/command.h"
#include "cli/report_command.h"

namespace memsnap::cli {

Command dump_command();
Command events_command();
Command compare_command();
Command plot_command();
Command oom_command();
Command summarize_command();
Command ranks_command();
Command check_command();

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      report_command("explain"),
      report_command("parse"),
      dump_command(),
      events_command(),
      compare_command(),
      report_command("replay-to-time"),
      report_command("replay-step"),
      plot_command(),
      oom_command(),
      report_command("segments"),
      report_command("streams"),
      summarize_command(),
      ranks_command(),
      check_command(),
  };
  return table;
}

}  // namespace memsnap::cli
