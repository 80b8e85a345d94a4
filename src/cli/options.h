// Flags that several commands share, each declared in one place so its name,
// default and help read the same everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "memsnap/load.h"
#include "memsnap/model.h"

namespace CLI {
class App;
}  // namespace CLI

namespace memsnap::cli {

struct CommonOptions {
  std::optional<int> device;
  bool json = false;
  bool allow_objects = false;
  int top = 10;
  int frame_depth = 1;
};

void add_device_flag(CLI::App& command, CommonOptions& options);
void add_json_flag(CLI::App& command, CommonOptions& options);
void add_allow_objects_flag(CLI::App& command, CommonOptions& options);
void add_top_flag(CLI::App& command, CommonOptions& options, const std::string& what);
void add_frame_depth_flag(CLI::App& command, CommonOptions& options);
// --top, --frame-depth, --device, --json, --allow-objects.
void add_analysis_flags(CLI::App& command, CommonOptions& options);

// Loads one file, with a progress line on stderr for a person watching a
// large file load.
Snapshot load_with_progress(const std::string& path, bool allow_objects);
// Loads several files at once: each file after the first on its own thread.
std::vector<Snapshot> load_all(const std::vector<std::string>& paths, bool allow_objects);

}  // namespace memsnap::cli
