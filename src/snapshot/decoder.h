// Builds the Snapshot model straight from the pickle VM: trace entries go into
// columns as the VM appends them, frames and stacks are interned by memo
// identity first and content second, the small parts are read afterwards.
#pragma once

#include "io/input.h"
#include "memsnap/load.h"
#include "memsnap/model.h"

namespace memsnap {

// How trace entries are read: flat (the fast path, Vm::try_flat_dict) or
// only the generic way. Both give the same model; the generic-only mode is
// there so that tests and the fuzzer can check that they do.
enum class EntryReading { kFlat, kGenericOnly };

Snapshot decode_snapshot(InputBuffer& input, const LoadOptions& options,
                         EntryReading reading = EntryReading::kFlat);

}  // namespace memsnap
