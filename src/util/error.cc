#include "memsnap/error.h"

#include <array>
#include <cstddef>
#include <utility>

namespace memsnap {
namespace {

using enum ErrorCode;
constexpr ErrorKind kInput = ErrorKind::kInput;
constexpr ErrorKind kUsage = ErrorKind::kUsage;

// The one table of codes: spelling, kind (so the exit status) and meaning.
// A spelling never changes once released; docs/safety.md lists the table
// (tests/unit/test_error_codes.cc holds the two equal).
constexpr std::array kErrorCodes = {
    ErrorCodeInfo{kFileNotFound, "file_not_found", kInput,
                  "the file (or a file a flag names) does not exist"},
    ErrorCodeInfo{kUnreadable, "unreadable", kInput,
                  "the file or folder exists but cannot be read: permissions, a folder where a "
                  "file is wanted, an I/O error"},
    ErrorCodeInfo{kFileChanged, "file_changed", kInput,
                  "the file shrank while it was read (still being written?): read it again"},
    ErrorCodeInfo{kEmptyFile, "empty_file", kInput,
                  "the file is empty: the dump was probably interrupted"},
    ErrorCodeInfo{kBadCompression, "bad_compression", kInput,
                  "a .gz or .zst file whose compressed data is corrupt"},
    ErrorCodeInfo{kNotAPickle, "not_a_pickle", kInput,
                  "not a pickle at all: a zip archive (torch.save), JSON, a first byte that is "
                  "no pickle opcode"},
    ErrorCodeInfo{kTruncated, "truncated", kInput,
                  "the pickle or its compressed stream ends early: an interrupted dump"},
    ErrorCodeInfo{kBadPickle, "bad_pickle", kInput,
                  "a malformed pickle stream: stack underflow, undefined memo index, no MARK, "
                  "a bad literal, a byte that is no opcode"},
    ErrorCodeInfo{kRefusedOpcode, "refused_opcode", kInput,
                  "the pickle wants to import or call code, which memsnap never does "
                  "(--allow-objects reads such objects as inert placeholders)"},
    ErrorCodeInfo{kLimitExceeded, "limit_exceeded", kInput,
                  "the input passes a resource cap on hostile input: its size, memory per input "
                  "byte, nesting, integer width, counts"},
    ErrorCodeInfo{kNotASnapshot, "not_a_snapshot", kInput,
                  "a readable pickle that holds no memory snapshot"},
    ErrorCodeInfo{kBadSummary, "bad_summary", kInput,
                  "a file read as a memsnap summary that is not one (or not valid JSON)"},
    ErrorCodeInfo{kUnknownDevice, "unknown_device", kInput,
                  "the device asked for has no data in the snapshot"},
    ErrorCodeInfo{kNoTrace, "no_trace", kInput,
                  "the device has no trace entries, so nothing over time (the dump's state "
                  "still answers)"},
    ErrorCodeInfo{kNoTimestamps, "no_timestamps", kInput,
                  "the trace entries carry no time_us (PyTorch before 2.2), so no time can be "
                  "asked for"},
    ErrorCodeInfo{kNoSteps, "no_steps", kInput,
                  "the file has no steps (no ProfilerStep annotations and none inferred, or step "
                  "detection off)"},
    ErrorCodeInfo{kStepNotFound, "step_not_found", kInput,
                  "the step asked for is not in the file (or not complete in both files)"},
    ErrorCodeInfo{kCannotReplay, "cannot_replay", kInput,
                  "the trace and the dump disagree, so the allocator's state at a time cannot "
                  "be replayed"},
    ErrorCodeInfo{kDuplicateRank, "duplicate_rank", kInput,
                  "two files of a run have the same rank"},
    ErrorCodeInfo{kFilesUnread, "files_unread", kInput,
                  "files of a run (a folder or a list) could not be read; the message names "
                  "the first"},
    ErrorCodeInfo{kInternalError, "internal_error", kInput,
                  "memsnap or the machine failed, not the input: a library that cannot start, "
                  "no random bytes, no address space"},
    ErrorCodeInfo{kBadParameter, "bad_parameter", kUsage,
                  "an argument, flag or parameter the command cannot use: out of range, "
                  "malformed, unknown, missing, or in conflict with another"},
    ErrorCodeInfo{kBadConfigFile, "bad_config_file", kUsage,
                  "a file of settings the user wrote (a budget, category rules) that does not "
                  "say what it must"},
    ErrorCodeInfo{kUnavailable, "unavailable", kUsage,
                  "a feature this build of memsnap was built without (the HTML page, the "
                  "server)"},
    ErrorCodeInfo{kCannotListen, "cannot_listen", kUsage,
                  "the server cannot listen on the host and port asked for (in use, or not "
                  "this machine's)"},
    ErrorCodeInfo{kOutputFailed, "output_failed", ErrorKind::kOutput,
                  "the output cannot be written: a full disk, a path that cannot be created"},
    ErrorCodeInfo{kBrokenPipe, "broken_pipe", ErrorKind::kBrokenPipe,
                  "the reader of the output went away (a pipe to head); the command line ends "
                  "quietly"},
    ErrorCodeInfo{kCheckFailed, "check_failed", ErrorKind::kLimit,
                  "a limit of memsnap check is violated (its report is written)"},
    ErrorCodeInfo{kBadRequest, "bad_request", kUsage,
                  "the server does not answer the HTTP request: malformed, another method than "
                  "GET or HEAD, a body, past the transport's limits, a parameter given twice"},
    ErrorCodeInfo{kUnauthorized, "unauthorized", kUsage, "the server's token is missing or wrong"},
    ErrorCodeInfo{kForbiddenHost, "forbidden_host", kUsage,
                  "the Host header does not name the server's loopback address"},
    ErrorCodeInfo{kNotFound, "not_found", kUsage, "the server has no such route or report"},
};

// The table is indexed by the code: each row where its code says.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < kErrorCodes.size(); ++i) {
    if (static_cast<size_t>(kErrorCodes[i].code) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kErrorCodes must list the codes in ErrorCode's order");
static_assert(static_cast<size_t>(kNotFound) + 1 == kErrorCodes.size(),
              "every ErrorCode needs its row in kErrorCodes");

}  // namespace

std::span<const ErrorCodeInfo> error_codes() {
  return kErrorCodes;
}

const ErrorCodeInfo& error_code_info(ErrorCode code) {
  return kErrorCodes.at(static_cast<size_t>(code));
}

std::string_view error_code_name(ErrorCode code) {
  return error_code_info(code).name;
}

std::optional<ErrorCode> error_code_named(std::string_view name) {
  for (const ErrorCodeInfo& info : kErrorCodes) {
    if (info.name == name) return info.code;
  }
  return std::nullopt;
}

Error::Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {
  compose();
}

Error::Error(ErrorCode code, std::string message, uint64_t byte_offset)
    : code_(code), message_(std::move(message)), byte_offset_(byte_offset) {
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
