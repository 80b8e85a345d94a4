// The one error type of memsnap: thrown anywhere inside the library and
// turned into "memsnap: <what()>" plus an exit status once, at the edge (cli).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace memsnap {

class Error : public std::exception {
 public:
  // What went wrong decides the exit status at the edge: bad input 1, a usage
  // error 2, output that could not be written 1, a limit of `memsnap check`
  // violated 3 (its report is already written); a reader that went away
  // (broken pipe) ends quietly.
  enum class Kind : uint8_t { kInput, kUsage, kOutput, kBrokenPipe, kLimit };

  explicit Error(std::string message, Kind kind = Kind::kInput);
  Error(std::string message, uint64_t byte_offset);

  static Error usage(std::string message) { return Error(std::move(message), Kind::kUsage); }
  static Error output(std::string message) { return Error(std::move(message), Kind::kOutput); }
  static Error limit(std::string message) { return Error(std::move(message), Kind::kLimit); }

  // The same error, said of one input: "<name>: <message>".
  [[nodiscard]] Error in_file(const std::string& name) const;

  // "<file>: <message> (at byte offset N)": the only place the parts are joined.
  [[nodiscard]] const char* what() const noexcept override { return text_.c_str(); }
  [[nodiscard]] const std::string& message() const { return message_; }
  // The input the error is about (in_file's name); empty when none.
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] std::optional<uint64_t> byte_offset() const { return byte_offset_; }
  [[nodiscard]] Kind kind() const { return kind_; }

 private:
  void compose();

  std::string message_;
  std::string file_;
  std::optional<uint64_t> byte_offset_;
  Kind kind_ = Kind::kInput;
  std::string text_;
};

}  // namespace memsnap
