// Byte-count arithmetic for values a hostile file controls.
#pragma once

#include <cstdint>

namespace memsnap {

// Two's complement arithmetic for byte counts that hostile files may push
// past int64: wraps instead of being undefined.
inline int64_t add_bytes(int64_t total, uint64_t bytes) {
  return static_cast<int64_t>(static_cast<uint64_t>(total) + bytes);
}
inline int64_t sub_bytes(int64_t total, uint64_t bytes) {
  return static_cast<int64_t>(static_cast<uint64_t>(total) - bytes);
}

// |value| without overflow at INT64_MIN.
inline uint64_t magnitude(int64_t value) {
  return value < 0 ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
}

}  // namespace memsnap
