// Text formatting shared by the renderers: binary sizes, aligned tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memsnap {

// 1024-based: "512 B", "1.50 KiB", "3.25 GiB".
std::string format_bytes(uint64_t bytes);
// With an explicit sign: "+1.50 MiB", "-512 B", "0 B".
std::string format_signed_bytes(int64_t bytes);
// A level rather than a difference (an absolute peak, live bytes): no sign
// unless it is negative, which only a file's inconsistent numbers make it.
std::string format_level_bytes(int64_t bytes);
std::string format_count(uint64_t count);  // thousands separated: 1,234,567
std::string format_percent(double fraction);
// Text for a terminal: control characters (C0, DEL, C1) that a hostile file
// can put in names (ESC sequences, CR/LF that fake a line) become visible
// escapes (\x1b, \r, \n, \t, \u009b), and so are the characters that change
// what a line seems to say unseen: bidirectional marks, embeddings,
// overrides and isolates (\u202e), U+2028/U+2029, and the tag characters
// (\U000e0041); everything else, UTF-8 included, stays.
// Text renderers pass every string from the file through it; JSON stays exact.
std::string printable(std::string_view text);
// A label of the file's (an action's name, a source key) as reports write
// it once per row: cut past kMaxRowLabelBytes, ending in "… [N bytes]", so
// that one long label shared by every entry does not multiply the output.
inline constexpr size_t kMaxRowLabelBytes = 256;
std::string row_label(std::string_view label);

// Text that XML 1.0 can carry (JUnit): invalid UTF-8, surrogates, U+FFFE and
// U+FFFF become U+FFFD; control characters but tab, LF and CR are shown as
// printable() shows them (`\x1b`, `\u009b`, `\u202e`). pugixml would write `&#27;`,
// which no XML 1.0 parser accepts.
std::string xml_safe(std::string_view text);

// A path as a shell word: as is when it is made of safe characters, else in
// single quotes, or in bash's $'...' with printable()'s escapes when it holds
// control characters; printed command lines can be pasted and stay one line.
std::string shell_quote(const std::string& word);

// A text table with a header row; numeric-looking columns align right.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add_row(std::vector<std::string> cells);
  [[nodiscard]] std::string render(const std::string& indent = "  ") const;
  [[nodiscard]] bool empty() const { return rows_.empty(); }

  // For a table too long to hold (a listing of millions of rows): measure()
  // every row without keeping it, then write header_line() and each row's
  // row_line() in a second pass. The lines are render()'s.
  void measure(std::vector<std::string> cells);
  [[nodiscard]] std::string header_line(const std::string& indent = "  ") const;
  [[nodiscard]] std::string row_line(std::vector<std::string> cells,
                                     const std::string& indent = "  ") const;

 private:
  [[nodiscard]] std::vector<size_t> widths() const;
  [[nodiscard]] std::string line(const std::vector<std::string>& cells,
                                 const std::vector<size_t>& widths,
                                 const std::string& indent) const;

  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> measured_;  // widest cell of each column among measure()d rows
};

}  // namespace memsnap
