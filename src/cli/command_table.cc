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
Command serve_command();
Command summarize_command();
Command ranks_command();
Command check_command();

namespace {

// A command of its own, with what its --help says below the options.
Command described(Command command, std::string_view description, std::string_view example) {
  command.description = description;
  command.example = example;
  return command;
}

}  // namespace

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      report_command("explain"),
      report_command("parse"),
      described(dump_command(),
                "The whole pickle as JSON, for tools that want what memsnap does not "
                "interpret: tuples, sets, bytes and integers wider than 64 bits are tagged; "
                "streamed, so a file of any size uses little memory.",
                "memsnap dump rank0.pickle > rank0.json"),
      described(events_command(),
                "One device's trace entries, one per line (or JSON rows): time, action, "
                "address, size, stream, and the source and category of the allocation; "
                "--stride K keeps every Kth entry of a long trace.",
                "memsnap events rank0.pickle --json --stride 100"),
      described(compare_command(),
                "Two snapshots, or two folders of ranks: allocator settings that differ, "
                "segments, the steps side by side (or the whole trace), and the sources live "
                "at each peak, sorted by B - A, down to the user's source lines.",
                "memsnap compare before.pickle after.pickle --group-by category"),
      report_command("replay-to-time"),
      report_command("replay-step"),
      described(plot_command(),
                "Memory over time on one axis: one run, or several overlaid (ranks, A and B); "
                "an offline HTML page where a click shows what was live and the allocator's "
                "segments at that moment, or a chart in the terminal with --text.",
                "memsnap plot a.pickle b.pickle -o timeline.html"),
      oom_command(),
      report_command("segments"),
      report_command("streams"),
      report_command("whatif"),
      described(summarize_command(),
                "A few KB of JSON per snapshot (peaks, steps, what was live at the peak by "
                "source and category, OOMs): read thousands of ranks once, then ranks, "
                "compare and check read the summaries in seconds.",
                "memsnap summarize run/*.pickle -o summaries/"),
      described(ranks_command(),
                "One row per rank (snapshots, folders or summaries): the highest peak, the "
                "spread and outliers by robust z, groups of ranks that peak alike (pipeline "
                "stages), and what the highest rank holds that the median does not.",
                "memsnap ranks run/ --top 20"),
      described(check_command(),
                "Limits on a run's peak, reserved memory, fragmentation, OOMs and categories, "
                "and on its growth over a baseline (a snapshot, a summary or a folder of "
                "ranks); exit 3 on a violation, with the lines that grew; text, JSON, JUnit "
                "or GitHub annotations.",
                "memsnap check run.pickle --baseline base.json --max-growth 5% --no-oom"),
      serve_command(),
  };
  return table;
}

}  // namespace memsnap::cli
