#include "cli/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "memsnap/error.h"
#include "report/format.h"

namespace memsnap::cli {
namespace {

[[noreturn]] void fail_output(int error_number) {
  if (error_number == EPIPE) throw Error(ErrorCode::kBrokenPipe, "broken pipe");
  throw Error(ErrorCode::kOutputFailed,
              std::string("cannot write output: ") + std::strerror(error_number));
}

CapturedOutput* g_captured = nullptr;

// Notes about how a command answers (the device it chose), held until it
// does: written before its first output, dropped when it fails first, so a
// failure is one line. Per thread: the in-process command line (Python's
// memsnap._core.run_cli) may run on several at once.
thread_local std::vector<std::string> t_deferred_notes;

void write_deferred_notes() {
  std::vector<std::string> notes;
  notes.swap(t_deferred_notes);
  for (const std::string& note : notes) write_note(note);
}

}  // namespace

void defer_note(std::string line) {
  t_deferred_notes.push_back(std::move(line));
}

void discard_deferred_notes() {
  t_deferred_notes.clear();
}

CapturedOutput::CapturedOutput() {
  g_captured = this;
}
CapturedOutput::~CapturedOutput() {
  g_captured = nullptr;
}

bool output_captured() {
  return g_captured != nullptr;
}

void write_note(std::string_view line) {
  // Every stderr line passes here: file names, patterns and rules lines in it
  // come from the user or the file system, so control characters are shown
  // (printable), never sent: no raw newline forges a second line (a CI
  // runner's "::error" command), no ESC reaches the terminal, no NUL cuts it.
  const std::string shown = printable(line);
  if (g_captured != nullptr) {
    g_captured->notes.append(shown).push_back('\n');
    return;
  }
  std::fprintf(stderr, "memsnap: %s\n", shown.c_str());
}

void write_error(const Error& error) {
  write_note(error.what());
  if (g_captured != nullptr) g_captured->error_code = error.code_name();
}

void write_out(std::string_view text) {
  if (text.empty()) return;
  if (!t_deferred_notes.empty()) write_deferred_notes();
  if (g_captured != nullptr) {
    g_captured->out.append(text);
    return;
  }
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) fail_output(errno);
}

std::string json_text(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_json(const nlohmann::ordered_json& value) {
  write_out(json_text(value, 2));
  write_out("\n");
}

void finish_output() {
  if (!t_deferred_notes.empty()) write_deferred_notes();
  if (g_captured != nullptr) return;
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) fail_output(errno != 0 ? errno : EIO);
}

void refuse_overwriting_inputs(const std::string& output, const std::vector<std::string>& inputs) {
  if (output.empty()) throw Error(ErrorCode::kBadParameter, "-o needs a file name");
  std::error_code error;
  struct stat written {};
  const bool output_exists = ::stat(output.c_str(), &written) == 0;
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    // "-" is stdin: the file a redirect (< run.pickle) opened is known by
    // its device and inode only.
    struct stat read {};
    const bool same =
        input == "-"
            ? output_exists && ::fstat(STDIN_FILENO, &read) == 0 && S_ISREG(read.st_mode) &&
                  read.st_dev == written.st_dev && read.st_ino == written.st_ino
            : input == output ||
                  (output_exists && std::filesystem::equivalent(input, output, error));
    if (same) {
      throw Error(ErrorCode::kBadParameter,
                  "-o " + output + " is " +
                      (input == "-" ? "the file stdin reads" : "one of the input files") +
                      "; refusing to overwrite it");
    }
  }
}

namespace {

[[noreturn]] void fail_file(const std::string& path, int error_number) {
  throw Error(ErrorCode::kOutputFailed, "cannot write output: " + path + ": " +
                                            std::strerror(error_number != 0 ? error_number : EIO));
}

// Writes all of `contents` to `out` and closes it; the error names `path`.
void write_and_close(std::FILE* out, const std::string& path, std::string_view contents) {
  errno = 0;
  const bool written = std::fwrite(contents.data(), 1, contents.size(), out) == contents.size();
  const int write_errno = errno;
  const bool closed = std::fclose(out) == 0;
  if (!written || !closed) fail_file(path, !written ? write_errno : errno);
}

// Whether `path` is a symbolic link whose chain reaches /dev or /proc
// (/dev/stdout, /proc/self/fd/1, a user's link to either): what it leads to
// is the system's to name, so it is written through, never replaced.
bool leads_through_dev_or_proc(const std::string& path) {
  std::error_code error;
  std::filesystem::path at = std::filesystem::absolute(path, error);
  if (!std::filesystem::is_symlink(std::filesystem::symlink_status(at, error))) return false;
  for (int hop = 0; hop < 40; ++hop) {  // the kernel's own limit of links followed
    const std::string name = at.lexically_normal().string();
    if (name.starts_with("/dev/") || name.starts_with("/proc/")) return true;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(at, error))) return false;
    const std::filesystem::path next = std::filesystem::read_symlink(at, error);
    if (error) return false;
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  return false;
}

}  // namespace

void write_file(const std::string& path, std::string_view contents) {
  // A regular file is replaced: written beside it, then renamed over it, so
  // that a failed write leaves it whole, and so is a user's symbolic link to
  // one (the link replaced, never written through: a link planted in a
  // shared folder must not redirect the write). Written in place instead:
  // what exists and is no regular file, link or not (/dev/null, a FIFO, a
  // terminal, a pipe), and any link whose chain reaches /dev or /proc (/dev/stdout,
  // /proc/self/fd/1 lead to what the shell opened, often a regular file the
  // rename would not reach, and the link itself is the system's).
  std::error_code status_error;
  const std::filesystem::file_status status = std::filesystem::status(path, status_error);
  if ((std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) ||
      leads_through_dev_or_proc(path)) {
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (out == nullptr) fail_file(path, errno);
    write_and_close(out, path, contents);
    return;
  }
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string name = ".";
  name += target.filename().string();
  name += ".XXXXXX";  // mkstemp's pattern
  std::string temporary = (folder / name).string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) fail_file(path, errno);
  // mkstemp makes it 0600; a report is as readable as any file the user writes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  std::FILE* out = ::fdopen(fd, "wb");
  if (out == nullptr) {
    const int why = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    fail_file(path, why);
  }
  try {
    write_and_close(out, path, contents);
  } catch (const Error&) {
    ::unlink(temporary.c_str());
    throw;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = errno;
    ::unlink(temporary.c_str());
    fail_file(path, why);
  }
}

}  // namespace memsnap::cli
