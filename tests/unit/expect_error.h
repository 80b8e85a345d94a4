// An error test asserts what the user reads: that `action` throws, and that the
// message says what went wrong. EXPECT_THROW alone passes on any error,
// including the wrong one.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <string_view>

namespace memsnap::testing {

// Fails the calling test (at the caller's line) unless `action()` throws an
// E whose what() contains `text`. The caller's place comes from the
// builtins std::source_location is made of: clang 14 (the sanitizer build's
// compiler) has no std::source_location over libstdc++ 12.
template <typename E = std::exception, typename Action>
void expect_error_containing(Action&& action, std::string_view text,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  try {
    action();
  } catch (const E& error) {
    std::string message = error.what();
    if (message.find(text) == std::string::npos) {
      ADD_FAILURE_AT(file, line)
          << "the error says \"" << message << "\", which lacks \"" << text << "\"";
    }
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE_AT(file, line)
        << "threw another exception type: \"" << other.what() << "\"";
    return;
  }
  ADD_FAILURE_AT(file, line)
      << "no error; expected one containing \"" << text << "\"";
}

}  // namespace memsnap::testing
