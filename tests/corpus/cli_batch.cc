// Runs many memsnap commands in one process, for the corpus drivers
// (tests/corpus/test_refusals.py, tests/cli/check_truncation.py): starting a
// process per file cost most of their time, under ASan most of all.
//
//   memsnap_cli_batch COMMANDS.jsonl
//   memsnap_cli_batch -        (commands from stdin, each answer flushed at
//                              once: a driver that writes a file, asks about
//                              it and checks the answer before the next)
//
// Each line of COMMANDS.jsonl is a JSON list of arguments (without
// "memsnap"); for each, one JSON line on stdout: {"status": N, "out": the
// report, "err": the notes as stderr shows them ("memsnap: ..." lines),
// "code": the error's stable code (docs/safety.md), null when it ended well}.
// Bytes that are not UTF-8 become U+FFFD. The command's path goes to stderr
// first, so that a crash names the file that caused it.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"

namespace {

int run_batch(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: memsnap_cli_batch COMMANDS.jsonl\n");
    return 2;
  }
  const bool interactive = std::string(argv[1]) == "-";
  std::ifstream file;
  if (!interactive) {
    file.open(argv[1]);
    if (!file) {
      std::fprintf(stderr, "memsnap_cli_batch: cannot read %s\n", argv[1]);
      return 2;
    }
  }
  std::istream& commands = interactive ? std::cin : file;
  std::string line;
  while (std::getline(commands, line)) {
    if (line.empty()) continue;
    std::vector<std::string> args{"memsnap"};
    for (const auto& arg : nlohmann::json::parse(line)) args.push_back(arg.get<std::string>());
    std::fprintf(stderr, "%s\n", line.c_str());
    std::vector<char*> pointers;
    pointers.reserve(args.size() + 1);
    for (std::string& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    nlohmann::json result;
    {
      memsnap::cli::CapturedOutput captured;
      result["status"] = memsnap::cli::run_cli(static_cast<int>(args.size()), pointers.data());
      result["out"] = std::move(captured.out);
      std::string err;
      size_t start = 0;
      while (start < captured.notes.size()) {
        size_t end = captured.notes.find('\n', start);
        if (end == std::string::npos) end = captured.notes.size();
        err += "memsnap: " + captured.notes.substr(start, end - start) + "\n";
        start = end + 1;
      }
      result["err"] = std::move(err);
      result["code"] =
          captured.error_code.empty() ? nlohmann::json() : nlohmann::json(captured.error_code);
    }
    std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (interactive) std::cout.flush();
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_batch(argc, argv);
  } catch (const std::exception& error) {  // a line that is no JSON list of strings
    std::fprintf(stderr, "memsnap_cli_batch: %s\n", error.what());
    return 2;
  }
}
