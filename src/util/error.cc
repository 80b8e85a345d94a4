#include "memsnap/error.h"

#include <utility>

namespace memsnap {

Error::Error(std::string message, Kind kind) : message_(std::move(message)), kind_(kind) {
  compose();
}

Error::Error(std::string message, uint64_t byte_offset)
    : message_(std::move(message)), byte_offset_(byte_offset) {
  compose();
}

Error Error::in_file(const std::string& name) const {
  Error named = *this;
  named.file_ = name;
  named.compose();
  return named;
}

void Error::compose() {
  text_.clear();
  if (!file_.empty()) text_ += file_ + ": ";
  text_ += message_;
  if (byte_offset_) text_ += " (at byte offset " + std::to_string(*byte_offset_) + ")";
}

}  // namespace memsnap
