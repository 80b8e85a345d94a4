// An error test asserts what went wrong: that `action` throws memsnap's Error
// with the expected stable code (include/memsnap/error.h), not some other
// error. EXPECT_THROW alone passes on any error, including the wrong one; a
// check of the message's words breaks when the words change. Match the text
// (expect_error_containing) only where the words are what the test is about:
// that a message names the file, the flag, the byte offset.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <string_view>

#include "memsnap/error.h"

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
      ADD_FAILURE_AT(file, line) << "the error says \"" << message << "\", which lacks \"" << text
                                 << "\"";
    }
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE_AT(file, line) << "threw another exception type: \"" << other.what() << "\"";
    return;
  }
  ADD_FAILURE_AT(file, line) << "no error; expected one containing \"" << text << "\"";
}

// Fails the calling test unless `action()` throws an Error of `code`.
template <typename Action>
void expect_error_code(Action&& action, ErrorCode code, const char* file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  try {
    action();
  } catch (const Error& error) {
    if (error.code() != code) {
      ADD_FAILURE_AT(file, line) << "the error is " << error.code_name() << " (\"" << error.what()
                                 << "\"), not " << error_code_name(code);
    }
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE_AT(file, line) << "threw another exception type: \"" << other.what() << "\"";
    return;
  }
  ADD_FAILURE_AT(file, line) << "no error; expected " << error_code_name(code);
}

// Both: the code, and words the test is about (the file, the flag named).
template <typename Action>
void expect_error_code_saying(Action&& action, ErrorCode code, std::string_view text,
                              const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  expect_error_code(action, code, file, line);
  expect_error_containing<Error>(action, text, file, line);
}

}  // namespace memsnap::testing
