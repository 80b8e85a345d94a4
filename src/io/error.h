// The one error type of memsnap: thrown anywhere inside the library, turned into
// "memsnap: <message>" and exit status 1 once, in main.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace memsnap {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& message, uint64_t byte_offset)
      : std::runtime_error(message), byte_offset_(byte_offset) {}

  [[nodiscard]] std::optional<uint64_t> byte_offset() const { return byte_offset_; }

 private:
  std::optional<uint64_t> byte_offset_;
};

}  // namespace memsnap
