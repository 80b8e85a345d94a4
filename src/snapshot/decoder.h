// Builds the Snapshot model straight from the pickle VM: trace entries go into
// columns as the VM appends them, frames and stacks are interned by memo
// identity first and content second, the small parts are read afterwards.
#pragma once

#include "io/input.h"
#include "memsnap/load.h"
#include "memsnap/model.h"

namespace memsnap {

Snapshot decode_snapshot(InputBuffer& input, const LoadOptions& options);

}  // namespace memsnap
