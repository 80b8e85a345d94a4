// The inert value type of the pickle VM: 16 bytes, no ownership. Strings and
// bytes are views (into the input or the VM's own byte store), containers are
// indices into the VM's container table. Nothing here can run code.
#pragma once

#include <cstdint>

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
  // Values a ListItemObserver substitutes for what it consumed.
  kEvent,       // payload: index of a decoded trace entry
  kEventRange,  // payload: first index, size: count (compressed run of kEvent in a list)
  kFrame,       // payload: an interned frame id
  kStack,       // payload: an interned stack id
};

struct Value {
  Kind kind = Kind::kUndefined;
  uint8_t flags = 0;
  // Views: byte length. Containers: generation, to detect stale references.
  // kEventRange: number of events.
  uint32_t size = 0;
  uint64_t payload = 0;

  static constexpr uint8_t kOwnedBytes = 1;   // view into the VM's byte store, not the input
  static constexpr uint8_t kDecimalText = 2;  // kBigInt holds decimal text (protocol 0)

  [[nodiscard]] bool is_container() const {
    return kind == Kind::kList || kind == Kind::kTuple || kind == Kind::kDict ||
           kind == Kind::kSet || kind == Kind::kFrozenSet;
  }
  [[nodiscard]] bool is_view() const {
    return kind == Kind::kStr || kind == Kind::kBytes || kind == Kind::kByteArray ||
           kind == Kind::kBigInt || kind == Kind::kObject;
  }
};
static_assert(sizeof(Value) == 16);

const char* kind_name(Kind kind);

}  // namespace memsnap::pickle
