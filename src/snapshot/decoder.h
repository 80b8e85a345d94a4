// Builds the Snapshot model straight from the pickle VM: trace entries go into
// columns as the VM appends them, frames and stacks are interned by memo
// identity first and content second, the small parts are read afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "io/input.h"
#include "snapshot/model.h"

namespace memsnap {

struct LoadOptions {
  bool allow_objects = false;
  // Called now and then with (bytes done, bytes total) while the pickle is read.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

Snapshot decode_snapshot(InputBuffer& input, const LoadOptions& options);

// open_input + decode_snapshot; errors name the file.
Snapshot load_snapshot(const std::string& path, const LoadOptions& options);

}  // namespace memsnap
