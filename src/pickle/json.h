// Generic value trees: converting VM values to JSON, either tagged so that a
// Python reader can rebuild the exact pickle value (`memsnap dump`), or plain
// for display (allocator settings).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>

#include "pickle/vm.h"

namespace memsnap::pickle {

// Deeper trees (or cycles, which pickles can build) are refused.
constexpr int kMaxNesting = 200;

// Plain JSON: tuples and sets as arrays, wide ints as decimal strings, bytes as
// hex strings, placeholders as "<object name>". Dict keys become strings.
nlohmann::ordered_json to_plain_json(const Vm& vm, const Value& value);

// Streams the tagged form (see README, `memsnap dump`) to `out`.
void write_tagged_json(const Vm& vm, const Value& value, std::FILE* out);

}  // namespace memsnap::pickle
