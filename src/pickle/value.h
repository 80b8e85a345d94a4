// The inert value type of the pickle VM: 16 bytes, no ownership. Strings and
// bytes are views (into the input or the VM's own byte store), containers are
// indices into the VM's container table. Nothing here can run code.
#pragma once

#include <cstdint>
#include <string>

namespace memsnap::pickle {

enum class Kind : uint8_t {
  kUndefined,  // an unset memo slot
  kNone,
  kBool,    // payload 0 or 1
  kInt,     // payload is an int64
  kUInt,    // payload is a uint64 >= 2^63
  kBigInt,  // wider than 64 bits: bytes view; flag kDecimalText or little-endian two's complement
  kFloat,   // payload holds the double's bits
  kStr,     // UTF-8 bytes view
  kBytes,   // bytes view
  kByteArray,  // bytes view
  kObject,     // inert placeholder for a global/reduced object: view of its dotted name
  kList,       // container
  kTuple,      // container
  kDict,       // container, items are key, value, key, value, ...
  kSet,        // container
  kFrozenSet,  // container
  // Values an observer substitutes for containers it consumed. The VM never
  // looks inside: flags = the observer's tag, payload = the observer's id.
  kExternal,
  // A run of kExternal items of one tag with consecutive ids, appended to one
  // list: payload = first id, size = count. Keeps long lists of consumed
  // items at a few bytes.
  kExternalRange,
};

struct Value {
  Kind kind = Kind::kUndefined;
  uint8_t flags = 0;
  // Views: byte length. Containers: generation, to detect stale references.
  // kExternalRange: number of ids.
  uint32_t size = 0;
  uint64_t payload = 0;

  static constexpr uint8_t kOwnedBytes = 1;   // view into the VM's byte store, not the input
  static constexpr uint8_t kDecimalText = 2;  // kBigInt holds decimal text (protocol 0)

  static Value external(uint8_t tag, uint64_t id) { return Value{Kind::kExternal, tag, 0, id}; }

  [[nodiscard]] bool is_container() const {
    return kind == Kind::kList || kind == Kind::kTuple || kind == Kind::kDict ||
           kind == Kind::kSet || kind == Kind::kFrozenSet;
  }
  [[nodiscard]] bool is_external(uint8_t tag) const {
    return kind == Kind::kExternal && flags == tag;
  }
};
static_assert(sizeof(Value) == 16);

const char* kind_name(Kind kind);
// "a list", "an object": for messages.
std::string kind_with_article(Kind kind);

}  // namespace memsnap::pickle
