// The stable error codes (include/memsnap/error.h): the table itself, that
// docs/safety.md lists it, and that every code is what a representative
// input produces, through the command line (run_cli, output captured: the
// code and the exit status the edge gives it) or the library where no
// command reaches it.
#include <fcntl.h>
#include <stdio_ext.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/core/source_key.h"
#include "cli/command.h"
#include "cli/output.h"
#include "formats/summary_json.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "memsnap/model.h"
#include "pickle_writer.h"

namespace memsnap {
namespace {

using testing::PickleWriter;
using testing::Py;

TEST(ErrorCodes, EachCodeHasOneRowUniqueSnakeCaseSpellingAndAMeaning) {
  std::set<std::string_view> names;
  size_t index = 0;
  for (const ErrorCodeInfo& info : error_codes()) {
    EXPECT_EQ(static_cast<size_t>(info.code), index++) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << "spelled twice: " << info.name;
    EXPECT_FALSE(info.name.empty());
    for (char c : info.name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << info.name;
    }
    EXPECT_NE(info.name.front(), '_');
    EXPECT_NE(info.name.back(), '_');
    EXPECT_FALSE(info.meaning.empty()) << info.name;
    EXPECT_EQ(error_code_named(info.name), info.code);
    EXPECT_EQ(error_code_name(info.code), info.name);
  }
  EXPECT_EQ(error_code_named("no_such_code"), std::nullopt);
}

TEST(ErrorCodes, TheKindAndSoTheExitStatusFollowFromTheCode) {
  EXPECT_EQ(Error(ErrorCode::kTruncated, "x").kind(), ErrorKind::kInput);
  EXPECT_EQ(Error(ErrorCode::kBadParameter, "x").kind(), ErrorKind::kUsage);
  EXPECT_EQ(Error(ErrorCode::kOutputFailed, "x").kind(), ErrorKind::kOutput);
  EXPECT_EQ(Error(ErrorCode::kBrokenPipe, "x").kind(), ErrorKind::kBrokenPipe);
  EXPECT_EQ(Error(ErrorCode::kCheckFailed, "x").kind(), ErrorKind::kLimit);
  // The code survives naming the file; the message gains the name only.
  const Error named = Error(ErrorCode::kBadPickle, "stack underflow", 7).in_file("f.pickle");
  EXPECT_EQ(named.code(), ErrorCode::kBadPickle);
  EXPECT_EQ(named.code_name(), "bad_pickle");
  EXPECT_STREQ(named.what(), "f.pickle: stack underflow (at byte offset 7)");
}

// docs/safety.md's table: one row per code, "| `name` | exit N | meaning |",
// in the table's order.
TEST(ErrorCodes, DocsListEveryCodeWithItsMeaning) {
  std::ifstream file(std::string(MEMSNAP_SOURCE_DIR) + "/docs/safety.md");
  ASSERT_TRUE(file) << "docs/safety.md";
  std::stringstream text;
  text << file.rdbuf();
  const std::string docs = text.str();
  size_t last = 0;
  for (const ErrorCodeInfo& info : error_codes()) {
    const std::string row = "| `" + std::string(info.name) + "` |";
    const size_t at = docs.find(row);
    ASSERT_NE(at, std::string::npos) << "docs/safety.md lacks the row of " << info.name;
    EXPECT_GT(at, last) << info.name << " is out of the table's order";
    last = at;
    const size_t end = docs.find('\n', at);
    EXPECT_NE(docs.substr(at, end - at).find(info.meaning), std::string_view::npos)
        << "the row of " << info.name << " does not say: " << info.meaning;
  }
}

// ---- every code from a representative input ----------------------------------

class Scratch {
 public:
  Scratch() {
    char name[] = "/tmp/memsnap-codes-XXXXXX";
    dir_ = ::mkdtemp(name);
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

struct Outcome {
  int status = 0;
  std::string code;
  std::string err;
};

Outcome run(std::vector<std::string> args) {
  args.insert(args.begin(), "memsnap");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  cli::CapturedOutput captured;
  Outcome outcome;
  outcome.status = cli::run_cli(static_cast<int>(args.size()), argv.data());
  outcome.code = captured.error_code;
  outcome.err = captured.notes;
  return outcome;
}

int exit_status_of(ErrorCode code) {
  switch (error_code_info(code).kind) {
    case ErrorKind::kUsage: return 2;
    case ErrorKind::kLimit: return 3;
    case ErrorKind::kBrokenPipe: return 141;
    case ErrorKind::kInput:
    case ErrorKind::kOutput: break;
  }
  return 1;
}

Py frame() {
  return Py::dict(
      {{"name", Py::str("forward")}, {"filename", Py::str("/x/model.py")}, {"line", Py::num(42)}});
}

Py alloc_entry(int64_t addr, int64_t size, std::optional<int64_t> time_us) {
  std::vector<std::pair<std::string, Py>> fields = {{"action", Py::str("alloc")},
                                                    {"addr", Py::num(addr)},
                                                    {"size", Py::num(size)},
                                                    {"stream", Py::num(0)},
                                                    {"frames", Py::list({frame()})}};
  if (time_us) fields.emplace_back("time_us", Py::num(*time_us));
  return Py::dict(std::move(fields));
}

// A snapshot of one device: a segment (with blocks or, for a dump that
// cannot be replayed, none), the trace's entries and its annotations.
std::string snapshot(std::vector<Py> entries, bool blocks = true, std::vector<Py> marks = {}) {
  std::vector<Py> block_list;
  if (blocks) {
    block_list.push_back(Py::dict({{"address", Py::num(0x100000)},
                                   {"size", Py::num(2 << 20)},
                                   {"state", Py::str("inactive")},
                                   {"frames", Py::list({})}}));
  }
  Py segment = Py::dict({{"device", Py::num(0)},
                         {"address", Py::num(0x100000)},
                         {"total_size", Py::num(2 << 20)},
                         {"allocated_size", Py::num(0)},
                         {"active_size", Py::num(0)},
                         {"stream", Py::num(0)},
                         {"segment_type", Py::str("large")},
                         {"blocks", Py::list(std::move(block_list))}});
  return PickleWriter::write(Py::dict({{"segments", Py::list({std::move(segment)})},
                                       {"device_traces", Py::list({Py::list(std::move(entries))})},
                                       {"external_annotations", Py::list(std::move(marks))}}));
}

Py step_mark(int step, const char* stage, int64_t time_us) {
  return Py::dict({{"name", Py::str("ProfilerStep#" + std::to_string(step))},
                   {"stage", Py::str(stage)},
                   {"device", Py::num(0)},
                   {"time_us", Py::num(time_us)}});
}

// 8193 bytes of LONG4: wider than the VM reads.
std::string wide_integer_pickle() {
  std::string bytes("\x80\x02\x8b", 3);
  const uint32_t width = 8193;
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((width >> (8 * i)) & 0xff);
  return bytes + std::string(width, '\x01') + ".";
}

struct CommandCase {
  ErrorCode code;
  std::function<std::vector<std::string>(const Scratch&)> args;
};

std::vector<CommandCase> command_cases() {
  const auto parse = [](std::string name, std::string bytes) {
    return [name = std::move(name), bytes = std::move(bytes)](const Scratch& s) {
      return std::vector<std::string>{"parse", s.file(name, bytes)};
    };
  };
  const std::string timed = snapshot({alloc_entry(0x100000, 512, 1000)});
  const std::string stepped = snapshot({alloc_entry(0x100000, 512, 1000)}, true,
                                       {step_mark(1, "START", 900), step_mark(1, "END", 2000)});
  using enum ErrorCode;
  return {
      {kFileNotFound,
       [](const Scratch& s) -> std::vector<std::string> {
         return {"parse", s.dir() + "/absent.pickle"};
       }},
      {kUnreadable,
       [](const Scratch& s) -> std::vector<std::string> {
         return {"parse", s.dir()};
       }},
      {kEmptyFile, parse("empty.pickle", "")},
      {kBadCompression, parse("bad.pickle.gz", std::string("\x1f\x8b\x08\x00", 4) +
                                                   std::string(8, '\0') + std::string(64, '\xff'))},
      {kNotAPickle, parse("torch.pt", std::string("PK\x03\x04", 4) + std::string(26, '\0'))},
      {kNotAPickle, parse("snapshot.json", "{\"segments\": []}")},
      {kNotAPickle, parse("garbage.bin", "\xde\xad\xbe\xef")},
      {kTruncated, parse("cut.pickle", timed.substr(0, timed.size() / 2))},
      {kBadPickle, parse("underflow.pickle",
                         "\x80\x02"
                         "a.")},
      {kRefusedOpcode, parse("evil.pickle", "cos\nsystem\n(S'echo'\ntR.")},
      {kLimitExceeded, parse("wide.pickle", wide_integer_pickle())},
      {kNotASnapshot, parse("int.pickle", PickleWriter::write(Py::num(5)))},
      {kUnknownDevice,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"parse", s.file("t.pickle", timed), "--device", "5"};
       }},
      {kNoTrace,
       [](const Scratch& s) -> std::vector<std::string> {
         return {"segments", s.file("dump.pickle", snapshot({})), "--time", "0"};
       }},
      {kNoTimestamps,
       [](const Scratch& s) -> std::vector<std::string> {
         return {"replay-to-time",
                 s.file("untimed.pickle", snapshot({alloc_entry(0x100000, 512, std::nullopt)})),
                 "--time", "1"};
       }},
      {kNoSteps,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"replay-step", s.file("t.pickle", timed), "--step", "1", "--steps", "none"};
       }},
      {kStepNotFound,
       [stepped](const Scratch& s) -> std::vector<std::string> {
         return {"replay-step", s.file("steps.pickle", stepped), "--step", "7"};
       }},
      {kCannotReplay,
       [](const Scratch& s) -> std::vector<std::string> {
         return {"segments",
                 s.file("noblocks.pickle", snapshot({alloc_entry(0x100000, 512, 1000)}, false)),
                 "--time", "0"};
       }},
      {kDuplicateRank,
       [timed](const Scratch& s) -> std::vector<std::string> {
         s.file("run/rank0.pickle", timed);
         s.file("run/rank00.pickle", timed);
         return {"check", s.dir() + "/run", "--max-peak", "1TiB"};
       }},
      {kFilesUnread,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"ranks", s.file("rank0.pickle", timed), s.file("rank1.pickle", "")};
       }},
      {kBadParameter,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"replay-to-time", s.file("t.pickle", timed), "--time", "-1"};
       }},
      {kBadParameter,
       [](const Scratch&) -> std::vector<std::string> { return {"no-such-command"}; }},
      {kBadConfigFile,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"check", s.file("t.pickle", timed), "--budget",
                 s.file("budget.toml", "max_peek = '1GiB'\n")};
       }},
      {kBadConfigFile,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"parse", s.file("t.pickle", timed), "--category-rules",
                 s.file("rules.txt", "activation frame (\n")};
       }},
      {kOutputFailed,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"summarize", s.file("t.pickle", timed), "-o", s.file("a-file", "") + "/dir"};
       }},
      {kCheckFailed,
       [timed](const Scratch& s) -> std::vector<std::string> {
         return {"check", s.file("t.pickle", timed), "--max-peak", "1"};
       }},
  };
}

TEST(ErrorCodes, EachCommandLineCodeComesFromARepresentativeInput) {
  const Scratch scratch;
  for (const CommandCase& c : command_cases()) {
    const std::vector<std::string> args = c.args(scratch);
    std::string line;
    for (const std::string& arg : args) line += arg + " ";
    const Outcome outcome = run(args);
    EXPECT_EQ(outcome.code, error_code_name(c.code)) << line << "\n" << outcome.err;
    EXPECT_EQ(outcome.status, exit_status_of(c.code)) << line << "\n" << outcome.err;
  }
}

// Codes no command line here reaches: each from the library.
void expect_code(ErrorCode code, const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    EXPECT_EQ(error.code_name(), error_code_name(code)) << error.what();
    return;
  }
  ADD_FAILURE() << "no error; expected " << error_code_name(code);
}

TEST(ErrorCodes, EachLibraryCodeComesFromARepresentativeInput) {
  const Scratch scratch;
  // A file that shrinks while it is read (a dump still being written).
  const std::string path = scratch.file("growing.pickle", std::string(size_t{4} << 20, 'N'));
  InputBuffer input = open_input(path);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  uint64_t sum = 0;  // read past the new end: the pages read as zeros, and the input says so
  for (uint64_t i = 0; i < input.size(); i += 4096) sum += input.bytes()[i];
  EXPECT_EQ(sum, uint64_t{'N'});
  expect_code(ErrorCode::kFileChanged, [&] { input.throw_if_changed(); });
  expect_code(ErrorCode::kBadSummary, [] { (void)read_summary_json("{\"kind\": ", "r.json"); });
  expect_code(ErrorCode::kLimitExceeded, [] {
    (void)read_summary_json("{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}",
                            "deep.json");
  });
  // A stack id the snapshot does not have: memsnap's own mistake, not the file's.
  const Snapshot empty;
  expect_code(ErrorCode::kInternalError, [&] {
    SourceKeys keys(empty, SourceKeyOptions{});
    (void)keys.key(StackId{99});
  });
}

// The output codes: stdout on a full disk, then on a pipe whose reader left.
TEST(ErrorCodes, OutputThatCannotBeWritten) {
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  ::dup2(full, STDOUT_FILENO);
  expect_code(ErrorCode::kOutputFailed, [] {
    cli::write_out(std::string(1 << 16, 'x'));
    cli::finish_output();
  });
  __fpurge(stdout);  // what the full disk did not take
  std::clearerr(stdout);
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  ::close(pipe_ends[0]);
  ::dup2(pipe_ends[1], STDOUT_FILENO);
  auto* previous = std::signal(SIGPIPE, SIG_IGN);
  expect_code(ErrorCode::kBrokenPipe, [] {
    cli::write_out(std::string(1 << 16, 'x'));
    cli::finish_output();
  });
  __fpurge(stdout);
  std::clearerr(stdout);
  std::signal(SIGPIPE, previous);
  ::dup2(saved, STDOUT_FILENO);
  for (int fd : {saved, full, pipe_ends[1]}) ::close(fd);
}

// The rest come from elsewhere: the server's transport (tests/serve,
// test_http.cc: cannot_listen) and a build without the page or the server
// (unavailable). Listed here so that a new code cannot go untested.
TEST(ErrorCodes, EveryCodeHasARepresentativeInput) {
  std::set<ErrorCode> covered = {ErrorCode::kFileChanged,   ErrorCode::kBadSummary,
                                 ErrorCode::kInternalError, ErrorCode::kOutputFailed,
                                 ErrorCode::kBrokenPipe,    ErrorCode::kLimitExceeded};
  for (const CommandCase& c : command_cases()) covered.insert(c.code);
  const std::set<ErrorCode> elsewhere = {ErrorCode::kUnavailable,   ErrorCode::kCannotListen,
                                         ErrorCode::kBadRequest,    ErrorCode::kUnauthorized,
                                         ErrorCode::kForbiddenHost, ErrorCode::kNotFound};
  for (const ErrorCodeInfo& info : error_codes()) {
    EXPECT_TRUE(covered.contains(info.code) || elsewhere.contains(info.code))
        << info.name << " has no representative input in this test";
  }
}

}  // namespace
}  // namespace memsnap
