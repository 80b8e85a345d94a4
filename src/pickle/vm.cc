#include "pickle/vm.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "memsnap/error.h"
#include "pickle/arguments.h"
#include "pickle/opcodes.h"

namespace memsnap::pickle {
namespace {

// Also the page-release interval (InputBuffer::release_before): small, so
// that even a small file is never resident all at once.
constexpr uint64_t kProgressInterval = uint64_t{2} << 20;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r' ||
                           text.front() == '\n')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                           text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

std::string not_a_pickle_message(uint8_t first_byte) {
  return fmt::format("not a pickle: the first byte is 0x{:02x}, which is not a pickle opcode",
                     first_byte);
}

}  // namespace

void check_pickle_start(std::span<const uint8_t> first_bytes) {
  if (!first_bytes.empty() && opcode_name(first_bytes[0]).empty()) {
    throw Error(ErrorCode::kNotAPickle, not_a_pickle_message(first_bytes[0]), 0);
  }
}

Vm::Vm(std::span<const uint8_t> input, VmOptions options)
    : input_(input), options_(std::move(options)) {
  max_held_bytes_ =
      options_.max_held_bytes != 0 ? options_.max_held_bytes : max_held_bytes_for(input.size());
  const uint64_t expected = std::max<uint64_t>(input.size(), options_.expected_input_bytes);
  stack_.on_grow = [this](uint64_t added_bytes) { charge(added_bytes); };
  flat_dicts_ = options_.observer != nullptr && options_.observer->reads_flat_dicts();
  releases_input_ = static_cast<bool>(options_.release_before);
  stack_.reserve(1024);
  // Frame lists converted in place keep their slot: up to one per entry.
  // Reserving address space avoids copying the table as it grows.
  containers_.reserve(std::min<size_t>(expected / 128 + 64, size_t{1} << 24));
  marks_.reserve(64);
}

bool Vm::grow_input(uint64_t end) {
  if (!options_.more_input) return false;
  std::span<const uint8_t> more = options_.more_input(end);
  if (more.size() <= input_.size()) return false;
  input_ = more;
  // The memory bound follows the input read so far.
  if (options_.max_held_bytes == 0) {
    max_held_bytes_ = std::max(max_held_bytes_, max_held_bytes_for(input_.size()));
  }
  return input_.size() >= end;
}

void Vm::fail(ErrorCode code, const std::string& message) const {
  fail_at(code, message, op_offset_);
}

void Vm::fail_at(ErrorCode code, const std::string& message, uint64_t offset) const {
  throw Error(code, message, offset);
}

void Vm::fail_memory_bound() const {
  fail(ErrorCode::kLimitExceeded,
       fmt::format(
           "this pickle needs more than {} MiB of memory, its values and the snapshot decoded from "
           "them, for {:.1f} MiB of input (the limit is {} bytes per input byte or {} MiB, "
           "whichever "
           "is larger): a degenerate pickle, not a memory snapshot",
           max_held_bytes_ >> 20, static_cast<double>(input_.size()) / (1 << 20),
           kHeldBytesPerInputByte, kMinHeldBytes >> 20));
}

void Vm::fail_truncated(uint64_t count) const {
  fail(ErrorCode::kTruncated,
       fmt::format("truncated: opcode {} needs {} bytes, only {} left in the file",
                   opcode_name(op_), count, input_.size() - pos_));
}

std::string_view Vm::read_line() {
  const auto* begin = input_.data() + pos_;
  const auto* end = input_.data() + input_.size();
  const auto* newline = std::find(begin, end, static_cast<uint8_t>('\n'));
  while (newline == end) {
    const uint64_t searched = input_.size();
    if (!grow_input(searched + 1)) {
      fail(ErrorCode::kTruncated,
           fmt::format("truncated: opcode {} has no end of line", opcode_name(op_)));
    }
    begin = input_.data() + pos_;
    end = input_.data() + input_.size();
    newline = std::find(input_.data() + searched, end, static_cast<uint8_t>('\n'));
  }
  pos_ += static_cast<uint64_t>(newline - begin) + 1;
  return {reinterpret_cast<const char*>(begin), static_cast<size_t>(newline - begin)};
}

Value Vm::pop() {
  if (stack_.size() <= mark_base()) {
    fail(ErrorCode::kBadPickle,
         fmt::format("stack underflow: opcode {} needs a value", opcode_name(op_)));
  }
  Value value = stack_.back();
  stack_.pop_back();
  return value;
}

Value& Vm::top() {
  if (stack_.size() <= mark_base()) {
    fail(ErrorCode::kBadPickle,
         fmt::format("stack underflow: opcode {} needs a value", opcode_name(op_)));
  }
  return stack_.back();
}

size_t Vm::pop_mark() {
  if (marks_.empty())
    fail(ErrorCode::kBadPickle, fmt::format("no MARK before opcode {}", opcode_name(op_)));
  size_t base = marks_.back();
  marks_.pop_back();
  give_back(sizeof(size_t));
  return base;
}

Value Vm::new_container(Kind kind) {
  uint64_t index = 0;
  if (!free_containers_.empty()) {
    index = free_containers_.back();
    free_containers_.pop_back();
  } else {
    if (containers_.size() >= std::numeric_limits<uint32_t>::max())
      fail(ErrorCode::kLimitExceeded, "too many containers");
    check_room_to_grow(containers_, 1);
    charge(sizeof(Container));
    index = containers_.size();
    containers_.emplace_back();
  }
  Container& slot = containers_[index];
  slot.items.clear();
  if (slot.items.capacity() == 0 && !recycled_items_.empty()) {
    slot.items = std::move(recycled_items_.back());
    recycled_items_.pop_back();
  }
  slot.memo_refs = 0;
  slot.converted = false;
  slot.list_item = false;
  Value value;
  value.kind = kind;
  value.size = slot.generation;
  value.payload = index;
  return value;
}

Value Vm::view_value(Kind kind, uint64_t offset, uint64_t length) {
  if (length > arguments::kMaxViewLength)
    fail(ErrorCode::kLimitExceeded, "string or bytes longer than 4 GiB");
  Value value;
  value.kind = kind;
  value.size = static_cast<uint32_t>(length);
  value.payload = offset;
  return value;
}

Value Vm::owned_value(Kind kind, std::string_view bytes, uint8_t extra_flags) {
  Value value = view_value(kind, owned_.size(), bytes.size());
  value.flags = Value::kOwnedBytes | extra_flags;
  check_room_to_grow(owned_, bytes.size());
  charge(bytes.size());
  owned_.append(bytes);
  return value;
}

std::string_view Vm::view(const Value& value) const {
  if ((value.flags & Value::kOwnedBytes) != 0) {
    return std::string_view(owned_).substr(value.payload, value.size);
  }
  return {reinterpret_cast<const char*>(input_.data() + value.payload), value.size};
}

const Value* Vm::find(const Value& dict, std::string_view key) const {
  std::span<const Value> entries = items(dict);
  const Value* found = nullptr;
  for (size_t i = 0; i + 1 < entries.size(); i += 2) {
    if (entries[i].kind == Kind::kStr && view(entries[i]) == key) found = &entries[i + 1];
  }
  return found;
}

const Value* Vm::pending_item(std::string_view key, size_t depth) const {
  const size_t size = std::min(stack_.size(), depth);
  for (size_t i = 0; i + 1 < size; ++i) {
    if (stack_[i].kind == Kind::kStr && view(stack_[i]) == key) return &stack_[i + 1];
  }
  return nullptr;
}

void Vm::replace_container(const Value& value, Value substitute, bool reuse_slot) {
  Container& slot = container(value);
  if (slot.memo_refs == 1) {
    Value current = memo_get(slot.memo_slot);
    if (current.kind == value.kind && current.payload == value.payload &&
        current.size == value.size) {
      converting_ = true;
      memo_put(slot.memo_slot, substitute);
      converting_ = false;
    }
  }
  give_back(slot.items.size() * sizeof(Value));
  if (reuse_slot && slot.memo_refs <= 1) {
    slot.items.clear();
    ++slot.generation;
    free_containers_.push_back(static_cast<uint32_t>(value.payload));
    return;
  }
  slot.converted = true;
  slot.substitute = substitute;
  if (recycled_items_.size() < kRecycledItemsLimit && slot.items.capacity() <= 4096) {
    slot.items.clear();
    recycled_items_.push_back(std::move(slot.items));
  }
  std::vector<Value>().swap(slot.items);
}

void Vm::fail_stale_reference() const {
  fail(ErrorCode::kBadPickle,
       "a list item that the reader consumed is referenced again; well-formed files never "
       "share such items");
}

void Vm::memo_put_slow(uint64_t index, const Value& value) {
  bool was_defined = false;
  if (index < memo_.size()) {
    was_defined = memo_[index].kind != Kind::kUndefined;
    // A slot that now means something else: cached lists may read it.
    if (was_defined && !converting_) forget_cached_lists();
    memo_[index] = value;
  } else if (index == memo_.size()) {
    charge(sizeof(Value));
    auto sparse = sparse_memo_.find(index);
    if (sparse != sparse_memo_.end()) {
      was_defined = true;
      sparse_memo_.erase(sparse);
    }
    memo_.push_back(value);
  } else {
    // A hash map slot: key, value and control bytes.
    charge(sizeof(uint64_t) + sizeof(Value) + 8);
    auto [it, inserted] = sparse_memo_.insert_or_assign(index, value);
    was_defined = !inserted;
  }
  if (!was_defined) ++memo_count_;
  if (value.is_container()) note_memoized(value, index);
}

Value Vm::memo_get_slow(uint64_t index) const {
  auto sparse = sparse_memo_.find(index);
  if (sparse != sparse_memo_.end()) return sparse->second;
  throw Error(ErrorCode::kBadPickle,
              fmt::format("memo index {} is not defined (opcode {})", index, opcode_name(op_)),
              op_offset_);
}

bool Vm::adds_to_list() const {
  // Inside a MARK whose target below is a list (APPENDS), or right above a
  // list (APPEND).
  if (!marks_.empty()) {
    const size_t base = marks_.back();
    if (base > 0 && base <= stack_.size() && stack_[base - 1].kind == Kind::kList) return true;
  }
  return stack_.size() > mark_base() && stack_.back().kind == Kind::kList;
}

void Vm::append_range(Value& list, const Value* first, const Value* last) {
  while (first != last) {
    const Value* run_end = first;
    if (options_.observer != nullptr) {
      // Dicts go to the observer; its substitutes (from the flat path)
      // collapse into ranges.
      while (run_end != last && run_end->kind != Kind::kDict && run_end->kind != Kind::kExternal) {
        ++run_end;
      }
    } else {
      run_end = last;
    }
    if (run_end != first) {
      std::vector<Value>& items = container(list).items;
      check_room_to_grow(items, static_cast<size_t>(run_end - first));
      charge(static_cast<uint64_t>(run_end - first) * sizeof(Value));
      items.insert(items.end(), first, run_end);
      first = run_end;
    }
    if (first != last) append_to_list(list, *first++);
  }
}

void Vm::append_to_list(Value& list, Value item) {
  if (options_.observer != nullptr && item.kind == Kind::kDict) {
    item = options_.observer->on_list_item(*this, item);
  }
  std::vector<Value>& items = container(list).items;
  // Consecutive substitutes of one tag collapse into one range, so a list of
  // millions of consumed items costs a few bytes.
  if (item.kind == Kind::kExternal && !items.empty()) {
    Value& last = items.back();
    if (last.kind == Kind::kExternalRange && last.flags == item.flags &&
        last.payload + last.size == item.payload &&
        last.size < std::numeric_limits<uint32_t>::max()) {
      ++last.size;
      return;
    }
  }
  if (item.kind == Kind::kExternal) {
    item.kind = Kind::kExternalRange;
    item.size = 1;
  }
  check_room_to_grow(items, 1);
  charge(sizeof(Value));
  items.push_back(item);
}

void Vm::refuse_or_placeholder(uint8_t opcode, std::string_view name) {
  if (!options_.allow_objects) {
    throw Error(ErrorCode::kRefusedOpcode,
                fmt::format("refusing opcode {}: this pickle wants to import "
                            "or call code; memsnap never does that (use --allow-objects to read "
                            "such objects as inert placeholders)",
                            opcode_name(opcode)),
                op_offset_);
  }
  push(owned_value(Kind::kObject, name));
}

Value Vm::parse_int_text(std::string_view text, bool allow_bool) {
  if (allow_bool && text == "00") {
    return Value{Kind::kBool, 0, 0, 0};
  }
  if (allow_bool && text == "01") {
    return Value{Kind::kBool, 0, 0, 1};
  }
  text = trim(text);
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  if (digits.empty())
    fail(ErrorCode::kBadPickle, fmt::format("bad integer literal for opcode {}", opcode_name(op_)));
  for (char c : digits) {
    if (base == 10 ? !is_digit(c) : hex_value(c) < 0) {
      fail(ErrorCode::kBadPickle,
           fmt::format("bad integer literal for opcode {}", opcode_name(op_)));
    }
  }
  uint64_t magnitude = 0;
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (error == std::errc() && end == digits.data() + digits.size()) {
    if (!negative) {
      return magnitude <= uint64_t(std::numeric_limits<int64_t>::max())
                 ? Value{Kind::kInt, 0, 0, magnitude}
                 : Value{Kind::kUInt, 0, 0, magnitude};
    }
    if (magnitude <= uint64_t{1} << 63) {
      return Value{Kind::kInt, 0, 0, ~magnitude + 1};
    }
  }
  if (base != 10) fail(ErrorCode::kBadPickle, "hexadecimal integer literal wider than 64 bits");
  std::string decimal = negative ? "-" : "";
  decimal.append(digits);
  return owned_value(Kind::kBigInt, decimal, Value::kDecimalText);
}

Value Vm::parse_float_text(std::string_view text) {
  std::string_view trimmed = trim(text);
  double value = 0;
  auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (error == std::errc::result_out_of_range) {
    value = (!trimmed.empty() && trimmed.front() == '-') ? -HUGE_VAL : HUGE_VAL;
  } else if (error != std::errc() || end != trimmed.data() + trimmed.size()) {
    fail(ErrorCode::kBadPickle, "bad FLOAT literal");
  }
  return Value{Kind::kFloat, 0, 0, std::bit_cast<uint64_t>(value)};
}

// Python 2 `str` literal of protocol 0: a quoted repr with backslash escapes,
// decoded as ASCII as CPython's Unpickler does by default.
Value Vm::decode_string_literal(std::string_view text) {
  if (text.size() < 2 || text.front() != text.back() ||
      (text.front() != '\'' && text.front() != '"')) {
    fail(ErrorCode::kBadPickle, "the STRING opcode argument must be quoted");
  }
  text = text.substr(1, text.size() - 2);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '\\' || i + 1 == text.size()) {
      out.push_back(c);
      continue;
    }
    char e = text[++i];
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': {
        if (i + 2 >= text.size() || hex_value(text[i + 1]) < 0 || hex_value(text[i + 2]) < 0) {
          fail(ErrorCode::kBadPickle, "invalid \\x escape in STRING");
        }
        out.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int value = e - '0';
          for (int k = 0; k < 2 && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7';
               ++k) {
            value = value * 8 + (text[++i] - '0');
          }
          out.push_back(static_cast<char>(value & 0xFF));
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  for (char c : out) {
    if (static_cast<unsigned char>(c) >= 0x80)
      fail(ErrorCode::kBadPickle, "non-ASCII byte in a protocol 0 STRING");
  }
  return owned_value(Kind::kStr, out);
}

Value Vm::decode_raw_unicode_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == 'u' || text[i + 1] == 'U')) {
      // An escape only counts after an even run of backslashes.
      size_t run = 0;
      for (size_t k = i; k > 0 && text[k - 1] == '\\'; --k) ++run;
      if (run % 2 == 0) {
        size_t digits = text[i + 1] == 'u' ? 4 : 8;
        if (i + 2 + digits > text.size()) {
          fail(ErrorCode::kBadPickle, "truncated \\u escape in UNICODE");
        }
        uint32_t code_point = 0;
        for (size_t k = 0; k < digits; ++k) {
          int h = hex_value(text[i + 2 + k]);
          if (h < 0) fail(ErrorCode::kBadPickle, "bad \\u escape in UNICODE");
          code_point = code_point * 16 + static_cast<uint32_t>(h);
        }
        if (code_point > 0x10FFFF)
          fail(ErrorCode::kBadPickle, "\\U escape out of range in UNICODE");
        append_utf8(out, code_point);
        i += 1 + digits;
        continue;
      }
    }
    append_utf8(out, c);  // latin-1
  }
  return owned_value(Kind::kStr, out);
}

namespace {

// run() dispatches on an opcode's family, the family's function on the
// opcode. The family functions are inlined into run(), so the loop is
// still one function for the compiler.
enum class OpFamily : uint8_t {
  kInvalid,  // not an opcode
  kStop,
  kControl,         // PROTO, FRAME, MARK, POP, POP_MARK, DUP
  kScalar,          // None, bools, ints, floats
  kText,            // str, bytes, bytearray
  kEmptyContainer,  // EMPTY_LIST, EMPTY_DICT, EMPTY_TUPLE, EMPTY_SET
  kBuildContainer,  // LIST, TUPLE, FROZENSET, DICT, TUPLE1-3: from the stack
  kFill,            // APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS
  kMemo,            // GET, PUT and their binary forms, MEMOIZE
  kObject,          // opcodes that import, call or construct
};

constexpr std::array<OpFamily, 256> kOpFamilies = [] {
  std::array<OpFamily, 256> families{};
  const auto set = [&families](OpFamily family, std::initializer_list<uint8_t> opcodes) {
    for (uint8_t opcode : opcodes) families[opcode] = family;
  };
  set(OpFamily::kStop, {kStop});
  set(OpFamily::kControl, {kProto, kFrame, kMark, kPop, kPopMark, kDup});
  set(OpFamily::kScalar, {kNone, kNewTrue, kNewFalse, kInt, kLong, kBinInt, kBinInt1, kBinInt2,
                          kLong1, kLong4, kFloat, kBinFloat});
  set(OpFamily::kText,
      {kString, kUnicode, kBinString, kShortBinString, kBinUnicode, kShortBinUnicode, kBinUnicode8,
       kBinBytes, kShortBinBytes, kBinBytes8, kByteArray8, kNextBuffer, kReadOnlyBuffer});
  set(OpFamily::kEmptyContainer, {kEmptyList, kEmptyDict, kEmptyTuple, kEmptySet});
  set(OpFamily::kBuildContainer, {kList, kTuple, kFrozenSet, kDict, kTuple1, kTuple2, kTuple3});
  set(OpFamily::kFill, {kAppend, kAppends, kSetItem, kSetItems, kAddItems});
  set(OpFamily::kMemo, {kGet, kBinGet, kLongBinGet, kPut, kBinPut, kLongBinPut, kMemoize});
  set(OpFamily::kObject, {kGlobal, kStackGlobal, kReduce, kNewObj, kNewObjEx, kBuild, kInst, kObj,
                          kExt1, kExt2, kExt4, kPersId, kBinPersId});
  return families;
}();

}  // namespace

Value Vm::run() {
  const uint64_t interval =
      options_.progress_interval != 0 ? options_.progress_interval : kProgressInterval;
  uint64_t next_progress = interval;
  for (;;) {
    if (pos_ >= next_progress) [[unlikely]] {
      next_progress = pos_ + interval;
      if (options_.on_progress) options_.on_progress(pos_);
      // Between opcodes nothing is in flight, and (kept()) no value points
      // into the input: everything before pos_ is read for good.
      if (releases_input_) options_.release_before(pos_);
    }
    read_opcode();
    switch (kOpFamilies[op_]) {
      case OpFamily::kStop: return stop();
      case OpFamily::kControl: control_op(); break;
      case OpFamily::kScalar: scalar_op(); break;
      case OpFamily::kText: text_op(); break;
      case OpFamily::kEmptyContainer: empty_container_op(); break;
      case OpFamily::kBuildContainer: build_container_op(); break;
      case OpFamily::kFill: fill_op(); break;
      case OpFamily::kMemo: memo_op(); break;
      case OpFamily::kObject: object_op(); break;
      case OpFamily::kInvalid: fail_not_an_opcode();
    }
  }
}

[[gnu::always_inline]] inline void Vm::read_opcode() {
  op_offset_ = pos_;
  if (pos_ >= input_.size() && !grow_input(pos_ + 1)) [[unlikely]] {
    fail_at(pos_ == 0 ? ErrorCode::kEmptyFile : ErrorCode::kTruncated,
            pos_ == 0 ? std::string("empty file: the dump was probably interrupted")
                      : std::string("truncated: the file ends before the pickle's STOP opcode "
                                    "(an interrupted dump?)"),
            pos_);
  }
  op_ = input_[pos_++];
}

void Vm::fail_not_an_opcode() const {
  if (op_offset_ == 0) fail(ErrorCode::kNotAPickle, not_a_pickle_message(op_));
  fail(ErrorCode::kBadPickle,
       fmt::format("byte 0x{:02x} is not a pickle opcode (corrupt file?)", op_));
}

Value Vm::stop() {
  if (!marks_.empty()) fail(ErrorCode::kBadPickle, "STOP inside an unclosed MARK");
  if (stack_.size() != 1) {
    fail(ErrorCode::kBadPickle,
         stack_.empty() ? std::string("stack underflow: STOP with an empty stack")
                        : fmt::format("STOP leaves {} values on the stack", stack_.size()));
  }
  if (options_.on_progress) options_.on_progress(pos_);
  return stack_.back();
}

[[gnu::always_inline]] inline void Vm::control_op() {
  switch (op_) {
    case kProto: {
      const uint64_t version = read_le<1>();
      if (version > 5)
        fail(ErrorCode::kBadPickle, fmt::format("unsupported pickle protocol {}", version));
      protocol_ = static_cast<int>(version);
      break;
    }
    case kFrame: {
      const uint64_t length = read_le<8>();
      if (length > input_.size() - pos_ &&
          !grow_input(length > UINT64_MAX - pos_ ? UINT64_MAX : pos_ + length)) {
        fail(ErrorCode::kTruncated,
             fmt::format("truncated: FRAME declares {} bytes, only {} left in the file", length,
                         input_.size() - pos_));
      }
      break;
    }
    case kMark:
      charge(sizeof(size_t));
      marks_.push_back(stack_.size());
      break;
    case kPop: pop(); break;
    case kPopMark: stack_.resize(pop_mark()); break;
    case kDup: push(top()); break;
    default: break;
  }
}

// The readers of arguments.h never find the generic loop's stream short
// (it waits for more input or fails), so their results are not checked here.
[[gnu::always_inline]] inline void Vm::scalar_op() {
  Stream in{*this};
  Value value;
  switch (op_) {
    case kNone: value = arguments::none_value(); break;
    case kNewTrue: value = arguments::bool_value(true); break;
    case kNewFalse: value = arguments::bool_value(false); break;
    case kInt: value = parse_int_text(read_line(), true); break;
    case kLong: {
      std::string_view text = read_line();
      if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
      value = parse_int_text(text, false);
      break;
    }
    case kBinInt: arguments::read_bin_int(in, value); break;
    case kBinInt1: arguments::read_small_int<1>(in, value); break;
    case kBinInt2: arguments::read_small_int<2>(in, value); break;
    case kLong1: arguments::read_long1(in, value); break;
    case kLong4: value = read_long4(); break;
    case kFloat: value = parse_float_text(read_line()); break;
    case kBinFloat: arguments::read_bin_float(in, value); break;
    default: break;
  }
  push(kept(value));
}

[[gnu::always_inline]] inline Value Vm::read_long4() {
  const auto length = static_cast<int32_t>(static_cast<uint32_t>(read_le<4>()));
  if (length < 0) fail(ErrorCode::kBadPickle, "LONG4 with a negative byte count");
  const uint64_t offset = pos_;
  const uint8_t* bytes = take(static_cast<uint64_t>(length));
  // After take: a length beyond the file is "truncated" first, as for strings.
  if (static_cast<uint64_t>(length) > kMaxLongBytes) {
    fail(ErrorCode::kLimitExceeded,
         fmt::format(
             "LONG4 of {} bytes: memsnap reads integers of up to {} bytes ({} bits); a memory "
             "snapshot's fit in 9",
             length, kMaxLongBytes, 8 * kMaxLongBytes));
  }
  return arguments::long_value(bytes, static_cast<uint64_t>(length), offset);
}

[[gnu::always_inline]] inline void Vm::text_op() {
  Stream in{*this};
  Value value;
  bool fits = true;
  switch (op_) {
    case kString: value = decode_string_literal(read_line()); break;
    case kUnicode: value = decode_raw_unicode_escape(read_line()); break;
    case kBinString: value = read_python2_string(read_le<4>()); break;
    case kShortBinString: value = read_python2_string(read_le<1>()); break;
    case kShortBinUnicode: fits = arguments::read_counted<1>(in, Kind::kStr, value); break;
    case kBinUnicode: fits = arguments::read_counted<4>(in, Kind::kStr, value); break;
    case kBinUnicode8: fits = arguments::read_counted<8>(in, Kind::kStr, value); break;
    case kShortBinBytes: fits = arguments::read_counted<1>(in, Kind::kBytes, value); break;
    case kBinBytes: fits = arguments::read_counted<4>(in, Kind::kBytes, value); break;
    case kBinBytes8: fits = arguments::read_counted<8>(in, Kind::kBytes, value); break;
    case kByteArray8: fits = arguments::read_counted<8>(in, Kind::kByteArray, value); break;
    case kNextBuffer:
      fail(ErrorCode::kBadPickle,
           "NEXT_BUFFER needs an out-of-band buffer, which a snapshot file cannot carry");
    case kReadOnlyBuffer: top(); return;
    default: break;
  }
  if (!fits) fail(ErrorCode::kLimitExceeded, "string or bytes longer than 4 GiB");
  push(kept(value));
}

// BINSTRING and SHORT_BINSTRING: Python 2 str, ASCII only. `length` is the
// argument as unsigned; BINSTRING's is signed.
[[gnu::always_inline]] inline Value Vm::read_python2_string(uint64_t length) {
  if (op_ == kBinString && static_cast<int32_t>(static_cast<uint32_t>(length)) < 0) {
    fail(ErrorCode::kBadPickle, "BINSTRING with a negative length");
  }
  const uint64_t offset = pos_;
  const uint8_t* bytes = take(length);
  for (uint64_t i = 0; i < length; ++i) {
    if (bytes[i] >= 0x80) fail(ErrorCode::kBadPickle, "non-ASCII byte in a Python 2 string");
  }
  return view_value(Kind::kStr, offset, length);
}

[[gnu::always_inline]] inline void Vm::empty_container_op() {
  switch (op_) {
    case kEmptyList: push(new_container(Kind::kList)); break;
    case kEmptyDict: {
      const bool list_item = options_.observer != nullptr && adds_to_list();
      if (list_item && flat_dicts_ && try_flat_dict()) break;
      Value dict = new_container(Kind::kDict);
      container(dict).list_item = list_item;
      push(dict);
      break;
    }
    case kEmptyTuple: push(new_container(Kind::kTuple)); break;
    case kEmptySet: push(new_container(Kind::kSet)); break;
    default: break;
  }
}

[[gnu::always_inline]] inline void Vm::build_container_op() {
  if (op_ == kTuple1 || op_ == kTuple2 || op_ == kTuple3) {
    const size_t count = op_ - kTuple1 + 1;
    if (stack_.size() < mark_base() + count) {
      fail(ErrorCode::kBadPickle,
           fmt::format("stack underflow: {} needs {} values", opcode_name(op_), count));
    }
    Value made = new_container(Kind::kTuple);
    charge(count * sizeof(Value));
    container(made).items.assign(stack_.end() - static_cast<ptrdiff_t>(count), stack_.end());
    stack_.resize(stack_.size() - count);
    push(made);
    return;
  }
  const size_t base = pop_mark();
  const Kind kind = op_ == kList        ? Kind::kList
                    : op_ == kTuple     ? Kind::kTuple
                    : op_ == kFrozenSet ? Kind::kFrozenSet
                                        : Kind::kDict;
  if (kind == Kind::kDict && (stack_.size() - base) % 2 != 0) {
    fail(ErrorCode::kBadPickle, "DICT with an odd number of items");
  }
  Value made = new_container(kind);
  if (kind == Kind::kList) {
    append_range(made, stack_.data() + base, stack_.data() + stack_.size());
  } else {
    charge((stack_.size() - base) * sizeof(Value));
    container(made).items.assign(stack_.begin() + static_cast<ptrdiff_t>(base), stack_.end());
  }
  stack_.resize(base);
  push(made);
}

[[gnu::always_inline]] inline void Vm::fill_op() {
  if (op_ == kAppend) {
    const Value item = pop();
    Value& list = top();
    if (list.kind != Kind::kList)
      fail(ErrorCode::kBadPickle, fmt::format("APPEND to {}", kind_with_article(list.kind)));
    append_to_list(list, item);
    return;
  }
  if (op_ == kSetItem) {
    const Value value = pop();
    const Value key = pop();
    Value& dict = top();
    if (dict.kind != Kind::kDict)
      fail(ErrorCode::kBadPickle, fmt::format("SETITEM on {}", kind_with_article(dict.kind)));
    auto& items = container(dict).items;
    check_room_to_grow(items, 2);
    charge(2 * sizeof(Value));
    items.push_back(key);
    items.push_back(value);
    return;
  }
  const size_t base = pop_mark();
  if (base == 0 || stack_.size() < base || base <= mark_base()) {
    fail(ErrorCode::kBadPickle,
         fmt::format("stack underflow: {} has no target below its MARK", opcode_name(op_)));
  }
  Value target = stack_[base - 1];
  if (op_ == kAppends) {
    if (target.kind != Kind::kList) {
      fail(ErrorCode::kBadPickle, fmt::format("APPENDS to {}", kind_with_article(target.kind)));
    }
    append_range(target, stack_.data() + base, stack_.data() + stack_.size());
  } else if (op_ == kSetItems) {
    set_items(target, base);
    return;
  } else {
    if (target.kind != Kind::kSet) {
      fail(ErrorCode::kBadPickle, fmt::format("ADDITEMS on {}", kind_with_article(target.kind)));
    }
    auto& items = container(target).items;
    check_room_to_grow(items, stack_.size() - base);
    charge((stack_.size() - base) * sizeof(Value));
    items.insert(items.end(), stack_.begin() + static_cast<ptrdiff_t>(base), stack_.end());
  }
  stack_.resize(base);
}

// SETITEMS: the pairs above `base` go into the dict below it.
[[gnu::always_inline]] inline void Vm::set_items(const Value& target, size_t base) {
  if (target.kind != Kind::kDict) {
    fail(ErrorCode::kBadPickle, fmt::format("SETITEMS on {}", kind_with_article(target.kind)));
  }
  if ((stack_.size() - base) % 2 != 0)
    fail(ErrorCode::kBadPickle, "SETITEMS with an odd number of items");
  Container& dict = container(target);
  check_room_to_grow(dict.items, stack_.size() - base);
  charge((stack_.size() - base) * sizeof(Value));
  dict.items.insert(dict.items.end(), stack_.begin() + static_cast<ptrdiff_t>(base), stack_.end());
  stack_.resize(base);
  if (dict.list_item) {
    // A dict on its way into a list goes to the observer now, at the end of
    // its items, as a flat one does (not at the APPENDS after up to 1,000 of
    // them): entries keep the order of the file whichever path read them,
    // and both paths see the memo as it is at the same point of the stream.
    dict.list_item = false;
    stack_.back() = options_.observer->on_list_item(*this, target);
  }
}

[[gnu::always_inline]] inline void Vm::memo_op() {
  switch (op_) {
    case kGet: push(memo_get(read_text_index())); break;
    case kBinGet:
    case kLongBinGet:
      // Frame lists are long runs of memo references; take the whole run
      // here rather than one trip through the dispatch per reference.
      for (;;) {
        push(memo_get(op_ == kBinGet ? read_le<1>() : read_le<4>()));
        if (pos_ >= input_.size()) break;
        const uint8_t next = input_[pos_];
        if (next != kBinGet && next != kLongBinGet) break;
        op_offset_ = pos_++;
        op_ = next;
      }
      break;
    case kPut: memo_put(read_text_index(), top()); break;
    case kBinPut: memo_put(read_le<1>(), top()); break;
    case kLongBinPut: memo_put(read_le<4>(), top()); break;
    case kMemoize: memo_put(memo_count_, top()); break;
    default: break;
  }
}

// GET and PUT: a decimal index on a line.
[[gnu::always_inline]] inline uint64_t Vm::read_text_index() {
  const std::string_view text = trim(read_line());
  uint64_t index = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (error != std::errc() || end != text.data() + text.size()) {
    fail(ErrorCode::kBadPickle, fmt::format("bad {} index", opcode_name(op_)));
  }
  return index;
}

// Opcodes that import, call or construct: refused, or (allow_objects) the
// values they would consume are dropped and an inert placeholder named
// after what they would call is pushed.
void Vm::object_op() {
  // GLOBAL reads its lines first, the rest are refused before any argument.
  if (!options_.allow_objects && op_ != kGlobal) refuse_or_placeholder(op_, "");
  std::string name;
  switch (op_) {
    case kGlobal: {
      name = read_line();
      name += ".";
      name += read_line();
      break;
    }
    case kStackGlobal: {
      const Value attribute = pop();
      const Value module = pop();
      if (attribute.kind != Kind::kStr || module.kind != Kind::kStr) {
        fail(ErrorCode::kBadPickle, "STACK_GLOBAL needs two str");
      }
      name = std::string(view(module)) + "." + std::string(view(attribute));
      break;
    }
    case kInst: {
      name = read_line();
      name += ".";
      name += read_line();
      stack_.resize(pop_mark());
      break;
    }
    case kExt1: name = fmt::format("<extension code {}>", read_le<1>()); break;
    case kExt2: name = fmt::format("<extension code {}>", read_le<2>()); break;
    case kExt4: name = fmt::format("<extension code {}>", read_le<4>()); break;
    case kPersId:
      read_line();
      name = "<persistent id>";
      break;
    case kBinPersId:
      pop();
      name = "<persistent id>";
      break;
    case kBuild:
      pop();
      top();
      return;
    default: name = pop_call(); break;  // REDUCE, NEWOBJ, NEWOBJ_EX, OBJ
  }
  refuse_or_placeholder(op_, name);
}

// REDUCE, NEWOBJ, NEWOBJ_EX and OBJ: pops the callable and its arguments;
// returns the callable's name when it is a placeholder.
std::string Vm::pop_call() {
  Value callable;
  if (op_ == kObj) {
    const size_t base = pop_mark();
    if (stack_.size() <= base) fail(ErrorCode::kBadPickle, "stack underflow: OBJ needs a class");
    callable = stack_[base];
    stack_.resize(base);
  } else {
    pop();
    if (op_ == kNewObjEx) pop();
    callable = pop();
  }
  return callable.kind == Kind::kObject ? std::string(view(callable)) : "object";
}

}  // namespace memsnap::pickle
