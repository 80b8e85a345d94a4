// The edge: the command line is parsed here, one command runs, and every
// error becomes one "memsnap: ..." line and an exit status, here only.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/usage.h"
#include "memsnap/error.h"
#include "memsnap/version.h"

namespace memsnap::cli {
namespace {

constexpr int kExitInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitLimit = 3;  // memsnap check: a limit is violated
// A reader that went away (`| head`): what a shell reports for SIGPIPE.
constexpr int kExitBrokenPipe = 141;

int exit_status(const Error& error) {
  switch (error.kind()) {
    case Error::Kind::kUsage: return kExitUsage;
    case Error::Kind::kBrokenPipe: return kExitBrokenPipe;
    case Error::Kind::kLimit: return kExitLimit;
    case Error::Kind::kInput:
    case Error::Kind::kOutput: break;
  }
  return kExitInput;
}

// The error a command ends with: its line, and its exit status.
int failed(const Error& error) {
  write_error(error);
  return exit_status(error);
}

// Anything else thrown (a thread that cannot be started, a library's own
// exception): one line and exit 1, never an abort.
int internal_error(const std::exception& error) {
  return failed(Error(ErrorCode::kInternalError, std::string("internal error: ") + error.what()));
}

}  // namespace

// `memsnap FILE [flags]` is `memsnap explain FILE [flags]`: the first
// argument names an existing file (or '-'), not a command.
std::vector<char*> explain_bare_file(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  if (argc < 2 || argv[1][0] == '\0') return args;
  const std::string first = argv[1];
  const bool is_command = std::any_of(command_table().begin(), command_table().end(),
                                      [&](const Command& c) { return c.name == first; });
  // A name that is no command but looks like a path (rank0.pickel) is a
  // file too: explain then says what is wrong with it ("No such file").
  std::error_code error;
  const bool is_file = first == "-" || (first[0] != '-' && std::filesystem::exists(first, error)) ||
                       looks_like_path(first);
  if (is_command || !is_file) return args;
  static char explain[] = "explain";
  args.insert(args.begin() + 1, explain);
  return args;
}

namespace {

// The application's --help: what it is, examples, exit statuses.
void describe(CLI::App& app) {
  app.description(
      "memsnap: read PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles) "
      "safely and fast.\nThe file is never executed. .gz and .zst inputs are decompressed; "
      "'-' reads stdin.");
  app.name("memsnap");
  app.footer(
      "Examples:\n"
      "  memsnap rank0.pickle                            what matters in it, on one page "
      "(explain)\n"
      "  memsnap parse rank0.pickle                      what is in the file\n"
      "  memsnap compare before.pickle after.pickle      why does after peak higher\n"
      "  memsnap replay-to-time run.pickle --time 12.5   what was live at 12.5 s\n"
      "  memsnap replay-step run.pickle --all-steps      every profiler step\n"
      "  memsnap plot a.pickle b.pickle -o t.html        both runs on one timeline\n"
      "  memsnap oom oom_rank3.pickle                    why it ran out of memory\n"
      "  memsnap segments run.pickle                     the allocator's segments at the dump\n"
      "  memsnap check run.pickle --baseline base.pickle --max-growth 5%   a CI gate\n"
      "Each command's --help says what it shows, with an example (man memsnap too).\n"
      "Reports go to stdout (--json for tools); errors and progress to stderr.\n"
      "Exit status: 0 ok, 1 unreadable or refused input (or output that cannot be written), "
      "2 usage error, 3 a limit of check violated.");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("memsnap ") + std::string(kVersion));
}

// Runs the command that was parsed and turns what it throws into a note and
// an exit status: the edge, once.
int run_parsed(const std::vector<std::pair<CLI::App*, Runner>>& runners) {
  try {
    restart_timings();
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) {
        run();
        break;
      }
    }
    finish_output();
    note_timings_total();
    return 0;
  } catch (const Error& error) {
    if (error.kind() == Error::Kind::kBrokenPipe) return kExitBrokenPipe;
    if (error.kind() == Error::Kind::kLimit) {
      // The report of a failed gate must have been written: a full disk or a
      // closed pipe is that error (exit 1), not the gate's 3.
      try {
        finish_output();
      } catch (const Error& unwritten) {
        if (unwritten.kind() == Error::Kind::kBrokenPipe) return kExitBrokenPipe;
        return failed(unwritten);
      }
    }
    // A report a limit failed on was written, and its notes with it (above);
    // any other failure is its one line.
    discard_deferred_notes();
    std::fflush(stdout);
    return failed(error);
  } catch (const std::bad_alloc&) {
    discard_deferred_notes();
    std::fflush(stdout);
    return failed(Error(ErrorCode::kInternalError, "out of memory"));
  } catch (const std::exception& error) {
    discard_deferred_notes();
    std::fflush(stdout);
    return internal_error(error);
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  std::vector<char*> with_command = explain_bare_file(argc, argv);
  argc = static_cast<int>(with_command.size());
  argv = with_command.data();
  // `memsnap` alone: the help, not an error.
  if (argc == 1) {
    static char help[] = "--help";
    with_command.push_back(help);
    argc = 2;
    argv = with_command.data();
  }
  CLI::App app;
  describe(app);
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Command& command : command_table()) {
    CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.help));
    // Its own words below its options (the application's otherwise).
    if (!command.description.empty()) {
      sub->footer(fmt::format("{}\n\nExample:\n  {}", command.description, command.example));
    }
    runners.emplace_back(sub, command.configure(*sub));
  }

  // CLI11 says "A subcommand is required" for a mistyped command; name it.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string_view asked = argv[1];
    const auto& table = command_table();
    if (std::none_of(table.begin(), table.end(),
                     [&](const Command& command) { return command.name == asked; })) {
      return failed(Error(ErrorCode::kBadParameter, unknown_command_message(asked)));
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    return failed(usage_error(app, error));
  } catch (const Error&
               error) {  // a file a flag names could not be read, or options no analysis can use
    return failed(error);
  } catch (const std::exception& error) {
    return internal_error(error);
  }

  return run_parsed(runners);
}

}  // namespace memsnap::cli
