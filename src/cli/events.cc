// memsnap events FILE: one device's trace entries.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/reports/event_list.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "memsnap/error.h"
#include "report/event_render.h"

namespace memsnap::cli {

Command events_command() {
  return {"events", "List one device's trace entries", [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              uint64_t stride = 1;
              bool inline_frames = false;
              CommonOptions common;
            };
            auto flags = std::make_shared<Flags>();
            add_snapshot_argument(command, flags->file, "Snapshot pickle");
            add_device_flag(command, flags->common);
            command
                .add_option("--stride", flags->stride,
                            "Show every Kth entry (the last is always shown)")
                ->check(whole_number_at_least(1));
            add_source_key_flags(command, flags->common);
            add_json_flag(command, flags->common);
            command.add_flag("--inline-frames", flags->inline_frames,
                             "With --json: each entry carries its whole stack as `frames` "
                             "(the earlier shape) instead of a number into the `stacks` table");
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              if (flags->inline_frames && !common.json)
                throw Error(ErrorCode::kBadParameter,
                            "--inline-frames needs --json (the text lists no frames)");
              const auto session = open_session(flags->file, common);
              const Snapshot& snapshot = session->snapshot();
              note_device_choice(flags->file, choose_device(snapshot, common.device));
              EventListing listing =
                  list_events(snapshot, common.device, flags->stride, common.keys);
              // Written as it is produced: the output of a long trace is never held whole.
              if (common.json) {
                write_events_json(listing, flags->inline_frames, write_out);
              } else {
                write_events_text(listing, flags->file, write_out);
              }
            };
          }};
}

}  // namespace memsnap::cli
