// The one error type of memsnap: thrown anywhere inside the library and
// turned into "memsnap: <what()>" plus an exit status once, at the edge (cli).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace memsnap {

// What went wrong decides the exit status at the edge: bad input 1, a usage
// error 2, output that could not be written 1, a limit of `memsnap check`
// violated 3 (its report is already written); a reader that went away
// (broken pipe) ends quietly.
enum class ErrorKind : uint8_t { kInput, kUsage, kOutput, kBrokenPipe, kLimit };

// What went wrong, for programs: a stable code whose snake_case spelling
// (error_code_name) never changes while the message's words may. Each code
// has one kind. The table of spellings, kinds and meanings is
// src/util/error.cc's kErrorCodes; docs/safety.md lists it.
enum class ErrorCode : uint8_t {
  // the input file
  kFileNotFound,
  kUnreadable,
  kFileChanged,
  kEmptyFile,
  kBadCompression,
  kNotAPickle,
  kTruncated,
  kBadPickle,
  kRefusedOpcode,
  kLimitExceeded,
  kNotASnapshot,
  kBadSummary,
  // what the file holds, against what was asked of it
  kUnknownDevice,
  kNoTrace,
  kNoTimestamps,
  kNoSteps,
  kStepNotFound,
  kCannotReplay,
  kDuplicateRank,
  kFilesUnread,
  kInternalError,
  // usage
  kBadParameter,
  kBadConfigFile,
  kUnavailable,
  kCannotListen,
  // output
  kOutputFailed,
  kBrokenPipe,
  // memsnap check
  kCheckFailed,
  // the server's transport: answers to HTTP requests, never thrown
  kBadRequest,
  kUnauthorized,
  kForbiddenHost,
  kNotFound,
};

// One row of the table: the code, its spelling, the kind it gives an Error
// (its exit status), and what it means in one line.
struct ErrorCodeInfo {
  ErrorCode code;
  std::string_view name;
  ErrorKind kind;
  std::string_view meaning;
};

// Every code, in the enum's order.
[[nodiscard]] std::span<const ErrorCodeInfo> error_codes();
[[nodiscard]] const ErrorCodeInfo& error_code_info(ErrorCode code);
// The stable spelling: "not_a_pickle", "truncated", ...
[[nodiscard]] std::string_view error_code_name(ErrorCode code);
// The code of a spelling; nullopt for none.
[[nodiscard]] std::optional<ErrorCode> error_code_named(std::string_view name);

class Error : public std::exception {
 public:
  using Kind = ErrorKind;

  // The kind follows from the code.
  Error(ErrorCode code, std::string message);
  // An error of the pickle at a byte offset.
  Error(ErrorCode code, std::string message, uint64_t byte_offset);

  // The same error, said of one input: "<name>: <message>".
  [[nodiscard]] Error in_file(const std::string& name) const;

  // "<file>: <message> (at byte offset N)": the only place the parts are joined.
  [[nodiscard]] const char* what() const noexcept override { return text_.c_str(); }
  [[nodiscard]] const std::string& message() const { return message_; }
  // The input the error is about (in_file's name); empty when none.
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] std::optional<uint64_t> byte_offset() const { return byte_offset_; }
  [[nodiscard]] ErrorCode code() const { return code_; }
  [[nodiscard]] std::string_view code_name() const { return error_code_name(code_); }
  [[nodiscard]] Kind kind() const { return error_code_info(code_).kind; }

 private:
  void compose();

  ErrorCode code_;
  std::string message_;
  std::string file_;
  std::optional<uint64_t> byte_offset_;
  std::string text_;
};

}  // namespace memsnap
