// An error test asserts what the user reads: that `action` throws, and that the
// message says what went wrong. EXPECT_THROW alone passes on any error,
// including the wrong one.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <source_location>
#include <string>
#include <string_view>

namespace memsnap::testing {

// Fails the calling test (at the caller's line) unless `action()` throws an
// E whose what() contains `text`.
template <typename E = std::exception, typename Action>
void expect_error_containing(Action&& action, std::string_view text,
                             std::source_location where = std::source_location::current()) {
  try {
    action();
  } catch (const E& error) {
    std::string message = error.what();
    if (message.find(text) == std::string::npos) {
      ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
          << "the error says \"" << message << "\", which lacks \"" << text << "\"";
    }
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
        << "threw another exception type: \"" << other.what() << "\"";
    return;
  }
  ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
      << "no error; expected one containing \"" << text << "\"";
}

}  // namespace memsnap::testing
