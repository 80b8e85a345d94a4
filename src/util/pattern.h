// Regular expressions from the user (--skip, --keep, --rank-from, rules files)
// and from memsnap itself, matched against strings from the snapshot.
//
// RE2, not std::regex: std::regex recursed once per subject character (a
// 30 KB frame name overflowed the stack) and backtracked exponentially
// ('^(a+)+$' over 40 characters never ended). RE2 matches in time linear in
// the subject, never recurses on it, and bounds the memory of each pattern.
// Subjects are matched byte by byte (Latin-1 mode), as std::regex did: a
// frame name that is not valid UTF-8 is still searched, and a UTF-8 literal
// in a pattern matches the same bytes in the subject.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace memsnap {

class Pattern {
 public:
  // Longer patterns are refused: no real rule is near it, and a 100k-character
  // pattern only costs compile time and memory.
  static constexpr size_t kMaxLength = 4096;

  // Throws a bad_parameter Error "<what> '<pattern>' ..." when the pattern is longer
  // than kMaxLength or is no regular expression in RE2's syntax (Python's and
  // ECMAScript's, less backreferences and lookaround). `what` names where the
  // pattern came from: "--skip", "rules.txt:3".
  Pattern(std::string_view pattern, std::string_view what, bool ignore_case = false);

  // Whether the pattern matches anywhere in `subject`.
  [[nodiscard]] bool search(std::string_view subject) const;
  // The first capture group of the leftmost match; nullopt when there is no
  // match or the group did not take part in it.
  [[nodiscard]] std::optional<std::string_view> first_group(std::string_view subject) const;
  [[nodiscard]] int capture_groups() const;
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  std::string text_;
  // Shared: a compiled RE2 is immutable and safe to match from any thread, so
  // copies of a Pattern (options copied into each file's analysis) share it.
  std::shared_ptr<const re2::RE2> compiled_;
};

}  // namespace memsnap
