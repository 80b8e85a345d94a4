// Report output on stdout, every write checked: a full disk or a closed
// stdout is an error the user sees, not a silent exit 0.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace memsnap {
class Error;
}  // namespace memsnap

namespace memsnap::cli {

// Reports go to stdout and notes (one "memsnap: ..." line each) to stderr,
// unless a CapturedOutput is alive: then both go into its strings. The
// refusal corpus' batch runner (tests/corpus/cli_batch.cc) runs commands
// in-process this way; the Python package never does (it calls the report
// table and runs/). One at a time.
class CapturedOutput {
 public:
  CapturedOutput();
  ~CapturedOutput();
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;

  std::string out;    // the report
  std::string notes;  // the notes, each ending in '\n', without "memsnap: "
  // The code of the error the command ended with (write_error); empty when
  // it ended well.
  std::string error_code;
};
// A note about how the command answers (the device it chose): written
// before the command's first output (or when it finishes), dropped if it
// fails first (discard_deferred_notes), so that a failure is one line.
void defer_note(std::string line);
void discard_deferred_notes();

// Whether output is captured: progress lines on a terminal are then not drawn.
bool output_captured();

// One line on stderr: "memsnap: <line>\n" (or into CapturedOutput::notes).
void write_note(std::string_view line);
// The error a command ends with, at the edge: its one line (write_note);
// a CapturedOutput keeps its code too.
void write_error(const Error& error);

// Throws Error (kind kOutput) when the write fails, or kind kBrokenPipe when
// the reader went away (the edge then ends quietly).
void write_out(std::string_view text);
void write_json(const nlohmann::ordered_json& value);
// The text write_json writes (indent -1: one line): bytes that are not
// UTF-8 (a frame's file name is whatever the pickle holds) become U+FFFD.
std::string json_text(const nlohmann::ordered_json& value, int indent);
// Flushes stdout and throws like write_out if anything buffered failed.
void finish_output();

// -o must name a file, and never one the command reads (a snapshot, a
// baseline, a budget, or the file stdin reads for "-", by device and
// inode): a usage error saying so ("-o X is one of the input files;
// refusing to overwrite it").
void refuse_overwriting_inputs(const std::string& output, const std::vector<std::string>& inputs);

// Writes a whole file (plot's HTML, check -o, summarize -o) through a
// temporary file in the same folder renamed over the target: a reader never
// sees half a file, and a symlink at the target is replaced, never followed.
// A target that exists and is no regular file (/dev/null, a FIFO, a
// terminal), and any link under /dev or /proc (/dev/stdout, /proc/self/fd/1,
// whatever they lead to), are written in place. Errors name the path.
void write_file(const std::string& path, std::string_view contents);

}  // namespace memsnap::cli
