#include "util/pattern.h"

#include <re2/re2.h>

#include <fmt/format.h>

#include "memsnap/error.h"

namespace memsnap {
namespace {

// RE2's own default (8 MiB) per compiled pattern; a pattern that needs more
// is refused by RE2 with "pattern too large".
constexpr int64_t kMaxPatternMemory = int64_t{8} << 20;

// A pattern quoted in a message: cut, so that a refused 4 KiB pattern does
// not fill the terminal.
std::string quoted(std::string_view pattern) {
  constexpr size_t kShown = 60;
  if (pattern.size() <= kShown) return fmt::format("'{}'", pattern);
  return fmt::format("'{}...' ({} characters)", pattern.substr(0, kShown), pattern.size());
}

}  // namespace

Pattern::Pattern(std::string_view pattern, std::string_view what, bool ignore_case)
    : text_(pattern) {
  if (pattern.size() > kMaxLength) {
    throw Error(ErrorCode::kBadParameter, fmt::format("{} {} is longer than {} characters", what,
                                                      quoted(pattern), kMaxLength));
  }
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingLatin1);
  options.set_log_errors(false);
  options.set_max_mem(kMaxPatternMemory);
  options.set_case_sensitive(!ignore_case);
  auto compiled =
      std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!compiled->ok()) {
    throw Error(ErrorCode::kBadParameter, fmt::format("{} {} is no regular expression: {}", what,
                                                      quoted(pattern), compiled->error()));
  }
  compiled_ = std::move(compiled);
}

bool Pattern::search(std::string_view subject) const {
  return RE2::PartialMatch(re2::StringPiece(subject.data(), subject.size()), *compiled_);
}

std::optional<std::string_view> Pattern::first_group(std::string_view subject) const {
  if (compiled_->NumberOfCapturingGroups() < 1) return std::nullopt;
  re2::StringPiece groups[2];
  if (!compiled_->Match(re2::StringPiece(subject.data(), subject.size()), 0, subject.size(),
                        RE2::UNANCHORED, groups, 2)) {
    return std::nullopt;
  }
  if (groups[1].data() == nullptr) return std::nullopt;
  return std::string_view(groups[1].data(), groups[1].size());
}

int Pattern::capture_groups() const {
  return compiled_->NumberOfCapturingGroups();
}

}  // namespace memsnap
