// Cutting text from the file without splitting a character.
#pragma once

#include <cstddef>
#include <string_view>

namespace memsnap {

// The longest prefix of `text` of at most `max_bytes` bytes that does not end
// inside a UTF-8 sequence (the cut moves back over continuation bytes; bytes
// that are no UTF-8 are cut where they lie).
inline std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return text.substr(0, cut);
}

}  // namespace memsnap
