// Attribution of an allocation to a source line: the "source key" of a stack.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "memsnap/model.h"

namespace memsnap {

// Frame classes, by filename and name.
bool is_internal_frame(std::string_view name, std::string_view filename);
bool is_cpp_frame(std::string_view filename, int64_t line);
bool is_capture_machinery(std::string_view name);

// Source keys of one snapshot's stacks, computed once per distinct stack.
class SourceKeys {
 public:
  SourceKeys(const Snapshot& snapshot, int depth);
  // The reference stays valid as long as this object: the cache is a deque,
  // which never moves its elements as it grows.
  const std::string& key(StackId stack);

 private:
  std::string compute(StackId stack) const;
  std::string render(FrameId id) const;

  const Snapshot& snapshot_;
  int depth_;
  std::deque<std::string> cache_;  // by stack id
  std::vector<bool> computed_;
};

inline constexpr std::string_view kNoFrames = "<no frames>";

}  // namespace memsnap
