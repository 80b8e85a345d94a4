// Generic value trees: converting VM values to JSON, either tagged so that a
// Python reader can rebuild the exact pickle value (`memsnap dump`), or plain
// for display (allocator settings).
#pragma once

#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pickle/vm.h"

namespace memsnap::pickle {

// Deeper trees (or cycles, which pickles can build) are refused.
constexpr int kMaxNesting = 200;

// Plain JSON: tuples and sets as arrays, wide ints as decimal strings, floats
// JSON cannot hold as the strings "inf", "-inf" and "nan", bytes as hex
// strings, placeholders as "<object name>". Dict keys become strings.
// Strings hold at most `max_text` bytes in all (the tree is the file's: a
// setting of a gigabyte is cut); `cut_strings` receives how many were cut.
nlohmann::ordered_json to_plain_json(const Vm& vm, const Value& value,
                                     uint64_t max_text = UINT64_MAX,
                                     uint64_t* cut_strings = nullptr);

// Receives the text in order, a block at a time; may throw to stop the writer.
using TextSink = std::function<void(std::string_view)>;

// How write_tagged_json writes a container that the tree reaches more than
// once (a memoized frame dict or frame list, shared by many trace entries).
enum class SharedObjects {
  // In full where it is first reached, as {"__shared__": N, "__value__": ...}
  // (N = 0, 1, ... in order of first appearance); as {"__ref__": N} after.
  kOnce,
  // In full wherever it is reached (the output can be far larger than the file).
  kInline,
};

// Streams the tagged form (see docs/commands/dump-events.md) to `sink`.
void write_tagged_json(const Vm& vm, const Value& value, const TextSink& sink,
                       SharedObjects shared = SharedObjects::kOnce);

}  // namespace memsnap::pickle
