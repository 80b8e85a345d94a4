// Builds the Snapshot model straight from the pickle VM: trace entries go into
// columns as the VM appends them, frames and stacks are interned by memo
// identity first and content second, the small parts are read afterwards.
#pragma once

#include "io/input.h"
#include "memsnap/load.h"
#include "memsnap/model.h"

namespace memsnap {

// How trace entries are read: flat (the fast path, Vm::try_flat_dict), only
// the generic way, or flat with the input given up behind the reader at
// every opcode and its bytes overwritten (what an inflated file's freed
// pages read as). All give the same model; the other two modes are there so
// that tests and the fuzzer can check that they do (kFlatScrubbed writes
// into the input: only for a buffer made from_memory).
enum class EntryReading { kFlat, kGenericOnly, kFlatScrubbed };

Snapshot decode_snapshot(InputBuffer& input, const LoadOptions& options,
                         EntryReading reading = EntryReading::kFlat);

}  // namespace memsnap
