// The summary file of `memsnap summarize` (one JSON document per run file)
// and its reader for `memsnap ranks`. The reader treats the file as hostile:
// every key is checked for its type and range, and a file that is not a
// memsnap summary is refused with one clear message naming the key.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/reports/run_summary.h"

namespace memsnap {

// "memsnap-summary": the value of the document's `kind`; `version` is 1.
inline constexpr std::string_view kSummaryKind = "memsnap-summary";
inline constexpr int kSummaryVersion = 1;
// Summaries are a few KB to a few hundred KB (200 rows of names cut at 1 KiB,
// 1,024 steps); a larger file is not one. The bound also bounds the parsed
// document (about 10x the text) that each reading thread holds.
inline constexpr uint64_t kMaxSummaryBytes = uint64_t{8} << 20;
// What the reader accepts beyond what summarize writes is refused: lists
// longer than it writes, strings longer than kMaxSummaryString, more than
// kMaxSummaryWarnings warnings.
inline constexpr size_t kMaxSummaryString = 4096;
inline constexpr size_t kMaxSummaryWarnings = 64;

nlohmann::ordered_json render_summary_json(const RunSummary& summary);

// A summarised file's identity: XXH3-128 of its first bytes on disk (see
// read_file_head), as 32 hex digits.
std::string head_hash(std::span<const uint8_t> head);

// Parses a summary document; `where` names it in errors (its path).
// Throws memsnap::Error on anything that is not a version-1 summary.
RunSummary read_summary_json(std::string_view text, const std::string& where);

// How deep the files memsnap reads back may nest: a summary has a few
// levels, a budget two. The readers refuse more before anything recursive
// (a JSON copy, toml++) touches the document: 300,000 levels of
// allocator_settings, or a 50,000-part dotted TOML key, overflowed the stack.
inline constexpr int kMaxFileNesting = 32;

// The deepest nesting of JSON or TOML text: open brackets and braces outside
// strings and comments and, for TOML, the parts of a dotted key (a.b.c is 3).
// Stops counting once past `limit`.
int text_nesting(std::string_view text, bool toml, int limit = kMaxFileNesting);

// Whether `text` starts like a JSON document (after whitespace, a '{'):
// a summary rather than a pickle.
bool looks_like_json(std::string_view head);

}  // namespace memsnap
