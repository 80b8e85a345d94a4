// Unit tests of the pickle VM on hand-assembled opcode streams.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "memsnap/error.h"
#include "pickle/json.h"
#include "pickle/vm.h"

namespace memsnap::pickle {
namespace {

// A string literal with embedded NULs, without its terminator.
template <size_t N>
std::string P(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::span<const uint8_t> bytes_of(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// Runs the VM and returns the plain-JSON rendering of the result.
std::string run_plain(const std::string& pickle, bool allow_objects = false) {
  VmOptions options;
  options.allow_objects = allow_objects;
  Vm vm(bytes_of(pickle), options);
  Value root = vm.run();
  return to_plain_json(vm, root).dump();
}

std::string error_of(const std::string& pickle) {
  try {
    run_plain(pickle);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(Vm, Protocol0TextOpcodes) {
  // pickle.dumps({'a': [1, 2.5, 'x', None, True], 'b': 12345678901234567890}, 0)
  std::string p =
      "(dp0\nVa\np1\n(lp2\nI1\naF2.5\naVx\np3\naNaI01\nasVb\np4\nL12345678901234567890L\ns.";
  EXPECT_EQ(run_plain(p), R"({"a":[1,2.5,"x",null,true],"b":12345678901234567890})");
}

TEST(Vm, Protocol0StringEscapesAndUnicode) {
  EXPECT_EQ(run_plain("S'a\\nb\\x41'\np0\n."), R"("a\nbA")");
  EXPECT_EQ(run_plain("V\\u00e9t\\u00e9\np0\n."), "\"\xc3\xa9t\xc3\xa9\"");
}

TEST(Vm, BinaryIntsAndLongs) {
  // BININT1 5, BININT2 0x0102, BININT -2, LONG1 2**63 (9 bytes), LONG1 -1 in one tuple.
  std::string p = P(
      "\x80\x02("
      "K\x05M\x02\x01J\xfe\xff\xff\xff\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\x8a\x01\xfft.");
  EXPECT_EQ(run_plain(p), "[5,258,-2,9223372036854775808,-1]");
}

TEST(Vm, WideLongIsExact) {
  // LONG1 with 10 bytes: 2**72 + 1.
  std::string p = P("\x80\x02\x8a\x0a\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01.");
  EXPECT_EQ(run_plain(p), R"("4722366482869645213697")");
  std::string negative = P("\x80\x02\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xfe.");
  EXPECT_EQ(run_plain(negative), R"("-4722366482869645213697")");
}

TEST(Vm, BinFloatIsBigEndian) {
  std::string p = P("\x80\x02G\x3f\xf8\x00\x00\x00\x00\x00\x00.");
  EXPECT_EQ(run_plain(p), "1.5");
}

TEST(Vm, MemoSharesContainers) {
  // [d, d] where d = {'k': 1}, via MEMOIZE and BINGET (protocol 4).
  std::string p =
      P("\x80\x04]\x94(}\x94\x8c\x01k\x94K\x01sh\x01"
        "e.");
  EXPECT_EQ(run_plain(p), R"([{"k":1},{"k":1}])");
}

TEST(Vm, TuplesSetsAndStack) {
  std::string p =
      "\x80\x04K\x01K\x02\x86\x8f(K\x03K\x03\x90K\x07"
      "2\x85"
      "0\x87.";
  EXPECT_EQ(run_plain(p), "[[1,2],[3],7]");
  // POP_MARK discards back to the mark.
  EXPECT_EQ(run_plain("\x80\x02K\x01(K\x02K\x03"
                      "1."),
            "1");
}

TEST(Vm, FrameAndTrailingBytes) {
  std::string p = P("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.garbage");
  EXPECT_EQ(run_plain(p), "7");
}

TEST(Vm, RefusesCodeExecution) {
  EXPECT_NE(error_of("cos\nsystem\n(S'ls'\ntR.").find("refusing opcode GLOBAL: "),
            std::string::npos)
      << error_of("cos\nsystem\n(S'ls'\ntR.");
  std::string stack_global = "\x80\x04\x8c\x02os\x8c\x06system\x93.";
  EXPECT_NE(error_of(stack_global).find("refusing opcode STACK_GLOBAL"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02K\x01)R.").find("refusing opcode REDUCE"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02}}b.").find("refusing opcode BUILD"), std::string::npos);
}

TEST(Vm, AllowObjectsMakesInertPlaceholders) {
  std::string p = P("\x80\x02}(X\x01\x00\x00\x00xcos\nsystem\nX\x02\x00\x00\x00ls\x85Ru.");
  EXPECT_EQ(run_plain(p, true), R"({"x":"<object os.system>"})");
}

TEST(Vm, HostileInputGivesOneError) {
  EXPECT_NE(error_of("").find("empty file"), std::string::npos);
  EXPECT_NE(error_of("\x80\x04").find("truncated"), std::string::npos);
  EXPECT_NE(error_of(P("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x10")).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of("\x80\x02"
                     "a.")
                .find("stack underflow"),
            std::string::npos);
  EXPECT_NE(error_of("\x80\x02h\x05.").find("memo index 5"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02}u.").find("no MARK"), std::string::npos);
  EXPECT_NE(error_of("\x80\x06N.").find("unsupported pickle protocol 6"), std::string::npos);
  EXPECT_NE(error_of("\xff").find("not a pickle"), std::string::npos);
  EXPECT_NE(error_of("\x80\x05\x97.").find("out-of-band buffer"), std::string::npos);
  EXPECT_NE(error_of("N\xff").find("not a pickle opcode"), std::string::npos);
  // Long-form PUT far beyond the memo must not allocate: it goes to the sparse memo.
  EXPECT_EQ(run_plain("\x80\x02K\x01r\xff\xff\xff\xff"
                      "0j\xff\xff\xff\xff."),
            "1");
}

TEST(Vm, CyclesAndDeepNestingAreRefusedWhenRendered) {
  // l = []; l.append(l)
  std::string cycle =
      P("\x80\x02]q\x00h\x00"
        "a.");
  EXPECT_NE(error_of(cycle).find("nesting deeper"), std::string::npos);
  std::string deep = "\x80\x02" + std::string(100000, ']') + std::string(99999, 'a') + ".";
  EXPECT_NE(error_of(deep).find("nesting deeper"), std::string::npos);
}

TEST(Vm, DuplicateDictKeysKeepFirstPositionLastValue) {
  std::string p =
      P("\x80\x02}(X\x01\x00\x00\x00"
        "aK\x01X\x01\x00\x00\x00"
        "bK\x02X\x01\x00\x00\x00"
        "aK\x03u.");
  EXPECT_EQ(run_plain(p), R"({"a":3,"b":2})");
}

TEST(Vm, ErrorsCarryByteOffsets) {
  try {
    run_plain(
        "\x80\x02K\x01K\x02"
        "a.");
    FAIL();
  } catch (const Error& error) {
    ASSERT_TRUE(error.byte_offset().has_value());
    EXPECT_EQ(*error.byte_offset(), 6u);
  }
}

TEST(Vm, MemoryPerInputByteIsBounded) {
  EXPECT_EQ(max_held_bytes_for(1000), kMinHeldBytes);
  EXPECT_EQ(max_held_bytes_for(uint64_t{1} << 30), (uint64_t{1} << 30) * kHeldBytesPerInputByte);
  const auto run_with_bound = [](const std::string& pickle, uint64_t bound) {
    VmOptions options;
    options.max_held_bytes = bound;
    Vm vm(bytes_of(pickle), options);
    vm.run();
  };
  // 200 empty lists, then a list of them: about 200 * 72 bytes of VM state.
  std::string lists = P("\x80\x04(") + std::string(200, ']') + "l.";
  EXPECT_NO_THROW(run_with_bound(lists, 64 << 10));
  try {
    run_with_bound(lists, 4 << 10);
    FAIL() << "a pickle beyond the bound was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("a degenerate pickle, not a memory snapshot"),
              std::string::npos)
        << error.what();
    EXPECT_TRUE(error.byte_offset().has_value());
  }
}

}  // namespace
}  // namespace memsnap::pickle
