// Decimal text of integers wider than 64 bits (kBigInt).
#include <fmt/format.h>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memsnap/error.h"
#include "pickle/vm.h"

namespace memsnap::pickle {
namespace {

constexpr uint32_t kChunkBase = 1'000'000'000;  // nine decimal digits

// The magnitude of little-endian two's complement bytes, in base-2^32
// words, least significant first; `negative` tells the sign.
std::vector<uint32_t> magnitude_words(std::string_view raw, bool& negative) {
  negative = !raw.empty() && (static_cast<uint8_t>(raw.back()) & 0x80) != 0;
  std::vector<uint32_t> words((raw.size() + 3) / 4, negative ? ~uint32_t{0} : 0);
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t shift = 8 * (i % 4);
    words[i / 4] = (words[i / 4] & ~(uint32_t{0xFF} << shift)) |
                   (uint32_t{static_cast<uint8_t>(raw[i])} << shift);
  }
  if (negative) {
    // Sign-extended to whole words; the magnitude is its negation, ~x + 1.
    uint64_t carry = 1;
    for (uint32_t& word : words) {
      const uint64_t sum = uint64_t{~word} + carry;
      word = static_cast<uint32_t>(sum);
      carry = sum >> 32;
    }
  }
  return words;
}

}  // namespace

void Vm::spend_big_int_bytes(uint64_t bytes) const {
  big_int_bytes_ += bytes;
  if (big_int_bytes_ > kMaxBigIntBytesPerFile) {
    throw Error(
        ErrorCode::kLimitExceeded,
        fmt::format(
            "integers wider than 64 bits: more than {} bytes of them to turn into decimal text "
            "(the limit per file; no snapshot holds such integers)",
            kMaxBigIntBytesPerFile));
  }
}

// Schoolbook conversion: divide the magnitude by 10^9 until it is zero, each
// remainder nine digits. Quadratic in the width, so the width is bounded
// (kMaxLongBytes). Each sweep over the words divides by 10^9 kChains times
// in a row, word by word: the chains of remainders are independent, so the
// CPU overlaps them (a single chain waits on each division in turn).
std::string big_int_decimal(const Vm& vm, const Value& value) {
  const std::string_view raw = vm.view(value);
  if ((value.flags & Value::kDecimalText) != 0) return std::string(raw);
  if (raw.size() > kMaxLongBytes) {
    throw Error(ErrorCode::kLimitExceeded,
                fmt::format("integer of {} bytes is too wide to print (the limit is {} bytes)",
                            raw.size(), kMaxLongBytes));
  }
  vm.spend_big_int_bytes(raw.size());
  constexpr size_t kChains = 8;
  bool negative = false;
  std::vector<uint32_t> words = magnitude_words(raw, negative);
  size_t used = words.size();
  while (used > 0 && words[used - 1] == 0) --used;
  std::vector<uint32_t> chunks;  // base 10^9, least significant first
  chunks.reserve(used * 32 / 29 + kChains);
  while (used > 0) {
    std::array<uint64_t, kChains> remainders{};
    for (size_t i = used; i-- > 0;) {
      uint64_t quotient = words[i];
      for (uint64_t& remainder : remainders) {
        const uint64_t current = (remainder << 32) | quotient;
        quotient = current / kChunkBase;
        remainder = current % kChunkBase;
      }
      words[i] = static_cast<uint32_t>(quotient);
    }
    for (uint64_t remainder : remainders) chunks.push_back(static_cast<uint32_t>(remainder));
    while (used > 0 && words[used - 1] == 0) --used;
  }
  while (!chunks.empty() && chunks.back() == 0) chunks.pop_back();
  if (chunks.empty()) return "0";
  std::string digits = negative ? "-" : "";
  digits.reserve(1 + 9 * chunks.size());
  fmt::format_to(std::back_inserter(digits), "{}", chunks.back());
  for (size_t i = chunks.size() - 1; i-- > 0;) {
    fmt::format_to(std::back_inserter(digits), "{:09}", chunks[i]);
  }
  return digits;
}

}  // namespace memsnap::pickle
