// memsnap events FILE: one device's trace entries.
#include <CLI/CLI.hpp>
#include <memory>

#include "analysis/event_list.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "report/event_render.h"

namespace memsnap::cli {

Command events_command() {
  return {"events", "List one device's trace entries", [](CLI::App& command) -> Runner {
            struct Flags {
              std::string file;
              uint64_t stride = 1;
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
            add_input_flags(command, flags->common);
            return [flags] {
              const CommonOptions& common = flags->common;
              Snapshot snapshot = load_with_progress(flags->file, common);
              note_device_choice(flags->file, choose_device(snapshot, common.device));
              EventListing listing =
                  list_events(snapshot, common.device, flags->stride, common.keys);
              if (common.json) {
                write_json(render_events_json(listing));
              } else {
                write_out(render_events_text(listing, flags->file));
              }
            };
          }};
}

}  // namespace memsnap::cli
