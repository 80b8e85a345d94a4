// Report output on stdout, every write checked: a full disk or a closed
// stdout is an error the user sees, not a silent exit 0.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace memsnap::cli {

// Throws Error (kind kOutput) when the write fails, or kind kBrokenPipe when
// the reader went away (the edge then ends quietly).
void write_out(std::string_view text);
void write_json(const nlohmann::ordered_json& value);
// The text write_json writes (indent -1: one line): bytes that are not
// UTF-8 (a frame's file name is whatever the pickle holds) become U+FFFD.
std::string json_text(const nlohmann::ordered_json& value, int indent);
// Flushes stdout and throws like write_out if anything buffered failed.
void finish_output();

// Writes a whole file (plot's HTML); errors name the path.
void write_file(const std::string& path, std::string_view contents);

}  // namespace memsnap::cli
