#include "cli/output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "memsnap/error.h"

namespace memsnap::cli {
namespace {

[[noreturn]] void fail_output(int error_number) {
  if (error_number == EPIPE) throw Error("broken pipe", Error::Kind::kBrokenPipe);
  throw Error::output(std::string("cannot write output: ") + std::strerror(error_number));
}

CapturedOutput* g_captured = nullptr;

}  // namespace

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
  if (g_captured != nullptr) {
    g_captured->notes.append(line).push_back('\n');
    return;
  }
  std::fprintf(stderr, "memsnap: %.*s\n", static_cast<int>(line.size()), line.data());
}

void write_out(std::string_view text) {
  if (text.empty()) return;
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
  if (g_captured != nullptr) return;
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) fail_output(errno != 0 ? errno : EIO);
}

void write_file(const std::string& path, std::string_view contents) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr)
    throw Error::output("cannot write output: " + path + ": " + std::strerror(errno));
  errno = 0;
  bool written = std::fwrite(contents.data(), 1, contents.size(), out) == contents.size();
  int write_errno = errno;
  bool closed = std::fclose(out) == 0;
  if (!written || !closed) {
    int why = !written ? write_errno : errno;
    throw Error::output("cannot write output: " + path + ": " +
                        std::strerror(why != 0 ? why : EIO));
  }
}

}  // namespace memsnap::cli
