// memsnap dump FILE: the whole pickle as tagged JSON, for debugging and for
// the differential test against CPython's unpickler.
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "pickle/json.h"
#include "pickle/vm.h"

namespace memsnap::cli {

Command dump_command() {
  return {"dump", "Print the whole pickle as JSON (tuples, sets, bytes and wide ints tagged)",
          [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              bool inline_shared = false;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file, "Pickle file (.gz, .zst, or - for stdin)");
            command.add_flag("--inline-shared", flags->inline_shared,
                             "Write an object the pickle shares (a memoized frame list) in full "
                             "wherever it appears, instead of once and then {\"__ref__\": N}");
            add_input_flags(command, flags->common);
            return [flags] {
              pickle::Value root;
              std::optional<pickle::Vm> vm;
              InputBuffer input;
              try {
                InputLimits limits;
                limits.max_bytes = flags->common.max_input_bytes;
                limits.check_start = pickle::check_pickle_start;
                input = open_input(flags->file, limits);
                pickle::VmOptions options;
                options.allow_objects = flags->common.allow_objects;
                vm.emplace(input.bytes(), options);
                root = vm->run();
                input.throw_if_changed();
              } catch (const Error& error) {
                std::string name = flags->file == "-" ? "<stdin>" : flags->file;
                if (input.changed()) throw file_changed_error().in_file(name);
                throw error.in_file(name);
              }
              try {
                pickle::write_tagged_json(*vm, root, write_out,
                                          flags->inline_shared ? pickle::SharedObjects::kInline
                                                               : pickle::SharedObjects::kOnce);
              } catch (const Error& error) {
                // The pickle's own faults (nesting too deep) name the file;
                // output errors (a closed pipe) stay as they are.
                if (error.kind() != Error::Kind::kInput) throw;
                throw error.in_file(flags->file == "-" ? "<stdin>" : flags->file);
              }
              write_out("\n");
            };
          }};
}

}  // namespace memsnap::cli
