// Reading one opcode's argument (the bytes after the opcode byte) into a
// Value: the decoding that the generic loop (Vm::run, vm.cc) and the flat
// reader (flat_reader.cc) share, so that both turn the same bytes into the
// same values by construction.
//
// Each reader takes a byte source `in` with two members:
//   const uint8_t* take(uint64_t count)  the next `count` bytes, the source
//                                        moved past them; nullptr when fewer
//                                        are left
//   uint64_t offset() const              the input offset of the next byte
// and returns false when the source is short. The generic loop's source
// (Vm::Stream) never is: it waits for more input or fails with "truncated",
// so there the checks fold away. The flat reader's (FlatReader::Cursor) is
// short at the end of the bytes at hand, and the flat reader then declines
// and leaves the bytes to the generic loop.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "pickle/value.h"

namespace memsnap::pickle::arguments {

// A view longer than this does not fit Value::size.
inline constexpr uint64_t kMaxViewLength = std::numeric_limits<uint32_t>::max();

// An unsigned little-endian integer of Width bytes (1, 2, 4 or 8): lengths,
// memo indices, BININT1/BININT2 (x86-64 and aarch64 hosts).
template <unsigned Width, typename In>
[[gnu::always_inline]] inline bool read_le(In& in, uint64_t& value) {
  const uint8_t* bytes = in.take(Width);
  if (bytes == nullptr) return false;
  if constexpr (Width == 1) {
    value = bytes[0];
  } else {
    std::conditional_t<Width == 2, uint16_t, std::conditional_t<Width == 4, uint32_t, uint64_t>>
        wide = 0;
    std::memcpy(&wide, bytes, Width);
    value = wide;
  }
  return true;
}

// NONE, NEWTRUE and NEWFALSE: no argument.
inline Value none_value() {
  return Value{Kind::kNone, 0, 0, 0};
}
inline Value bool_value(bool value) {
  return Value{Kind::kBool, 0, 0, value ? uint64_t{1} : uint64_t{0}};
}

// BININT1 and BININT2: unsigned.
template <unsigned Width, typename In>
[[gnu::always_inline]] inline bool read_small_int(In& in, Value& out) {
  uint64_t value = 0;
  if (!read_le<Width>(in, value)) return false;
  out = Value{Kind::kInt, 0, 0, value};
  return true;
}

// BININT: a signed 32-bit int.
template <typename In>
[[gnu::always_inline]] inline bool read_bin_int(In& in, Value& out) {
  uint64_t value = 0;
  if (!read_le<4>(in, value)) return false;
  const auto signed_value = static_cast<int32_t>(static_cast<uint32_t>(value));
  out = Value{Kind::kInt, 0, 0, static_cast<uint64_t>(int64_t{signed_value})};
  return true;
}

// BINFLOAT: a double, big-endian.
template <typename In>
[[gnu::always_inline]] inline bool read_bin_float(In& in, Value& out) {
  uint64_t bits = 0;
  if (!read_le<8>(in, bits)) return false;
  out = Value{Kind::kFloat, 0, 0, __builtin_bswap64(bits)};
  return true;
}

// LONG1 and LONG4's payload: `length` bytes of little-endian two's
// complement at `offset`. An int or uint when it fits 64 bits (non-minimal
// encodings included), else a kBigInt view of its minimal bytes.
inline Value long_value(const uint8_t* bytes, uint64_t length, uint64_t offset) {
  uint64_t n = length;
  // Strip redundant sign bytes so non-minimal encodings still fit 64 bits.
  while (n > 1 && ((bytes[n - 1] == 0x00 && bytes[n - 2] < 0x80) ||
                   (bytes[n - 1] == 0xFF && bytes[n - 2] >= 0x80))) {
    --n;
  }
  if (n == 0) return Value{Kind::kInt, 0, 0, 0};
  if (n <= 8) {
    uint64_t value = 0;
    for (uint64_t i = 0; i < n; ++i) value |= uint64_t{bytes[i]} << (8 * i);
    if (n < 8 && (bytes[n - 1] & 0x80) != 0) value |= ~uint64_t{0} << (8 * n);
    return Value{Kind::kInt, 0, 0, value};
  }
  if (n == 9 && bytes[8] == 0) {
    uint64_t value = 0;
    for (uint64_t i = 0; i < 8; ++i) value |= uint64_t{bytes[i]} << (8 * i);
    return Value{Kind::kUInt, 0, 0, value};
  }
  return Value{Kind::kBigInt, 0, static_cast<uint32_t>(n), offset};
}

// LONG1: a one-byte length, then the bytes.
template <typename In>
[[gnu::always_inline]] inline bool read_long1(In& in, Value& out) {
  uint64_t length = 0;
  if (!read_le<1>(in, length)) return false;
  const uint64_t offset = in.offset();
  const uint8_t* bytes = in.take(length);
  if (bytes == nullptr) return false;
  out = long_value(bytes, length, offset);
  return true;
}

// The bytes of a str, bytes or bytearray after their length: a view into
// the input. False too when longer than a view holds (the generic loop's
// refusal; no snapshot string comes near).
template <typename In>
[[gnu::always_inline]] inline bool read_view(In& in, Kind kind, uint64_t length, Value& out) {
  const uint64_t offset = in.offset();
  // Named, as in read_long1: the generic loop's take() never returns null,
  // and clang warns on comparing such a call itself with null.
  const uint8_t* bytes = in.take(length);
  if (bytes == nullptr || length > kMaxViewLength) return false;
  out = Value{kind, 0, static_cast<uint32_t>(length), offset};
  return true;
}

// SHORT_BINUNICODE (Width 1), BINUNICODE (4), BINUNICODE8 (8) and the
// bytes / bytearray opcodes of the same layout: a length, then the bytes.
template <unsigned Width, typename In>
[[gnu::always_inline]] inline bool read_counted(In& in, Kind kind, Value& out) {
  uint64_t length = 0;
  return read_le<Width>(in, length) && read_view(in, kind, length, out);
}

}  // namespace memsnap::pickle::arguments
