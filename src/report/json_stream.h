// A JSON document written piece by piece, for reports too large to hold as
// one value (`events --json` on a trace of millions of entries): the text
// goes to a sink in blocks of a few dozen KiB as it is produced.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace memsnap {

// Receives the text in order; may throw to stop the writer (a closed pipe).
using TextSink = std::function<void(std::string_view)>;

class JsonStream {
 public:
  explicit JsonStream(TextSink sink) : sink_(std::move(sink)) {}
  JsonStream(const JsonStream&) = delete;
  JsonStream& operator=(const JsonStream&) = delete;
  // Does not flush: a writer that stopped on an error must not write more.
  ~JsonStream() = default;

  JsonStream& raw(std::string_view text) {
    buffer_.append(text);
    if (buffer_.size() >= kBlockBytes) flush();
    return *this;
  }
  JsonStream& number(uint64_t value);
  JsonStream& number(int64_t value);
  // A JSON string, escaped as write_json does it (bytes that are not UTF-8
  // become U+FFFD).
  JsonStream& string(std::string_view text) { return raw(quoted(text)); }
  void flush();

  static std::string quoted(std::string_view text);

 private:
  static constexpr size_t kBlockBytes = size_t{64} << 10;
  TextSink sink_;
  std::string buffer_;
};

}  // namespace memsnap
