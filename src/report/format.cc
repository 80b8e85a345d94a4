#include "report/format.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cstdlib>

#include "util/utf8.h"

namespace memsnap {
namespace {

// Display width of UTF-8 text: count code points, not bytes.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;
  }
  return width;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string format_level_bytes(int64_t bytes) {
  return bytes < 0 ? format_signed_bytes(bytes) : format_bytes(static_cast<uint64_t>(bytes));
}

std::string format_signed_bytes(int64_t bytes) {
  if (bytes == 0) return "0 B";
  uint64_t magnitude =
      bytes < 0 ? uint64_t{0} - static_cast<uint64_t>(bytes) : static_cast<uint64_t>(bytes);
  return fmt::format("{}{}", bytes < 0 ? '-' : '+', format_bytes(magnitude));
}

std::string format_count(uint64_t count) {
  std::string digits = std::to_string(count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string format_percent(double fraction) {
  return fmt::format("{:.1f}%", fraction * 100.0);
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(header_.size());
  for (std::string& cell : cells) cell = printable(cell);
  rows_.push_back(std::move(cells));
}

void TextTable::measure(std::vector<std::string> cells) {
  measured_.resize(header_.size(), 0);
  cells.resize(header_.size());
  for (size_t c = 0; c < cells.size(); ++c)
    measured_[c] = std::max(measured_[c], display_width(printable(cells[c])));
}

std::vector<size_t> TextTable::widths() const {
  std::vector<size_t> widths(header_.size(), 0);
  for (size_t c = 0; c < header_.size(); ++c) widths[c] = display_width(header_[c]);
  for (size_t c = 0; c < measured_.size(); ++c) widths[c] = std::max(widths[c], measured_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  return widths;
}

std::string TextTable::line(const std::vector<std::string>& cells,
                            const std::vector<size_t>& widths, const std::string& indent) const {
  std::string line = indent;
  for (size_t c = 0; c < cells.size(); ++c) {
    size_t width = display_width(cells[c]);
    size_t pad = widths[c] > width ? widths[c] - width : 0;
    bool last = c + 1 == cells.size();
    if (right_[c]) {
      line.append(pad, ' ');
      line += cells[c];
    } else {
      line += cells[c];
      if (!last) line.append(pad, ' ');
    }
    if (!last) line += "  ";
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

std::string TextTable::render(const std::string& indent) const {
  const std::vector<size_t> column_widths = widths();
  std::string out = line(header_, column_widths, indent);
  for (const auto& row : rows_) out += line(row, column_widths, indent);
  return out;
}

std::string TextTable::header_line(const std::string& indent) const {
  return line(header_, widths(), indent);
}

std::string TextTable::row_line(std::vector<std::string> cells, const std::string& indent) const {
  cells.resize(header_.size());
  for (std::string& cell : cells) cell = printable(cell);
  return line(cells, widths(), indent);
}

namespace {

// The code point of the UTF-8 sequence at text[i] and its length; length 0
// when the bytes there are no valid sequence (overlong, a surrogate, cut).
struct CodePoint {
  uint32_t code = 0;
  size_t length = 0;
};
CodePoint decode_utf8(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return {c, 1};
  const size_t length = c >= 0xc2 && c <= 0xdf   ? 2
                        : c >= 0xe0 && c <= 0xef ? 3
                        : c >= 0xf0 && c <= 0xf4 ? 4
                                                 : 0;
  uint32_t code = length == 2 ? (c & 0x1fU) : length == 3 ? (c & 0x0fU) : (c & 0x07U);
  bool valid = length != 0 && i + length <= text.size();
  for (size_t k = 1; valid && k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    valid = (next & 0xc0) == 0x80;
    code = (code << 6) | (next & 0x3fU);
  }
  const uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
  valid = valid && code >= smallest && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
  return valid ? CodePoint{code, length} : CodePoint{};
}

// Characters that change what a line seems to say without being seen: C1
// controls (CSI, OSC), the bidirectional marks, embeddings, overrides and
// isolates (text shown in another order than it reads), the line and
// paragraph separators (a line break to some viewers), and the tag
// characters (invisible text).
bool spoofs(uint32_t code) {
  return (code >= 0x80 && code <= 0x9f) || code == 0x061c || code == 0x200e || code == 0x200f ||
         (code >= 0x2028 && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069) ||
         (code >= 0xe0000 && code <= 0xe007f);
}

std::string escaped_code_point(uint32_t code) {
  return code <= 0xffff ? fmt::format("\\u{:04x}", code) : fmt::format("\\U{:08x}", code);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (const CodePoint point = decode_utf8(text, i);
               point.length != 0 && spoofs(point.code)) {
      out += escaped_code_point(point.code);
      i += point.length - 1;
    } else {
      out.push_back(static_cast<char>(c));  // other text, and bytes no sequence holds, as they are
    }
  }
  return out;
}

std::string xml_safe(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c != 0x7f)) {
        out.push_back(static_cast<char>(c));
      } else {
        out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    const CodePoint point = decode_utf8(text, i);
    if (point.length == 0 || point.code == 0xfffe || point.code == 0xffff) {
      out += kReplacement;  // no XML 1.0 character: a stray byte, or the whole sequence
      i += std::max<size_t>(point.length, 1);
      continue;
    }
    if (spoofs(point.code)) {
      out += escaped_code_point(point.code);
    } else {
      out.append(text.substr(i, point.length));
    }
    i += point.length;
  }
  return out;
}

std::string shell_quote(const std::string& word) {
  bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-' ||
           c == '/' || c == '+' || c == ':' || c == '@' || c == ',';
  });
  if (safe) return word;
  if (printable(word) != word) {
    // A control character (a newline, ESC) in single quotes would reach the
    // terminal or a CI log raw and split the command line: bash's $'...'
    // quoting spells it as printable() shows it, and the line still pastes.
    std::string escaped;
    for (char c : word) {
      if (c == '\\' || c == '\'') escaped += '\\';
      escaped += c;
    }
    return "$'" + printable(escaped) + "'";
  }
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string row_label(std::string_view label) {
  if (label.size() <= kMaxRowLabelBytes) return std::string(label);
  return fmt::format("{}\u2026 [{} bytes]", utf8_prefix(label, kMaxRowLabelBytes), label.size());
}

}  // namespace memsnap
