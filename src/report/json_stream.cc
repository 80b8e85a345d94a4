#include "report/json_stream.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace memsnap {

JsonStream& JsonStream::number(uint64_t value) {
  fmt::format_to(std::back_inserter(buffer_), "{}", value);
  if (buffer_.size() >= kBlockBytes) flush();
  return *this;
}

JsonStream& JsonStream::number(int64_t value) {
  fmt::format_to(std::back_inserter(buffer_), "{}", value);
  if (buffer_.size() >= kBlockBytes) flush();
  return *this;
}

void JsonStream::flush() {
  if (buffer_.empty()) return;
  sink_(buffer_);
  buffer_.clear();
}

std::string JsonStream::quoted(std::string_view text) {
  return nlohmann::ordered_json(std::string(text))
      .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace memsnap
