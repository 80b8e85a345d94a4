// A pickle virtual machine that only builds data. It implements every data
// opcode of protocols 0-5 and never imports, calls or constructs anything: the
// opcodes that would are refused, or in allow_objects mode replaced by inert
// placeholders. Input is hostile: every read is bounds-checked, every length is
// checked against the bytes that remain, and errors carry the byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "pickle/value.h"

namespace memsnap::pickle {

class Vm;

// Lets a decoder consume list items as they are appended (trace entries), so
// that millions of small dicts never exist as generic values at the same time.
class ListItemObserver {
 public:
  virtual ~ListItemObserver() = default;
  // Returns the value to store in the list: the item itself or a substitute.
  virtual Value on_list_item(Vm& vm, Value item) = 0;
};

struct VmOptions {
  bool allow_objects = false;
  ListItemObserver* observer = nullptr;
  // Called every few MiB with the current offset (progress, page release).
  std::function<void(uint64_t offset)> on_progress;
};

class Vm {
 public:
  Vm(std::span<const uint8_t> input, VmOptions options);

  // Runs to the first STOP and returns the value it left on the stack.
  Value run();

  [[nodiscard]] int protocol() const { return protocol_; }
  [[nodiscard]] uint64_t stop_offset() const { return stop_offset_; }
  [[nodiscard]] uint64_t memo_size() const { return memo_count_; }

  // Reading values.
  [[nodiscard]] std::string_view view(const Value& value) const;
  // Follows a container that an observer converted in place to its substitute.
  [[nodiscard]] Value resolve(const Value& value) const;
  [[nodiscard]] std::span<const Value> items(const Value& container) const;
  // Last value stored under a str key in a dict (pickle dicts may repeat keys).
  [[nodiscard]] const Value* find(const Value& dict, std::string_view key) const;

  // For observers: replace a consumed container. Memo references to it now
  // yield `substitute`. With reuse_slot the storage is recycled (trace entries,
  // which real files never share); otherwise the container stays resolvable.
  void replace_container(const Value& container, Value substitute, bool reuse_slot);

 private:
  struct Container {
    std::vector<Value> items;
    Value substitute;
    uint64_t memo_slot = 0;
    uint32_t generation = 0;
    uint8_t memo_refs = 0;  // saturates at 2: shared between memo slots
    bool converted = false;
  };

  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_at(const std::string& message, uint64_t offset) const;
  const uint8_t* take(uint64_t count);
  std::string_view read_line();
  uint64_t read_le(unsigned width);

  void push(Value value) { stack_.push_back(value); }
  Value pop();
  Value& top();
  size_t mark_base() const { return marks_.empty() ? 0 : marks_.back(); }
  size_t pop_mark();

  Value new_container(Kind kind);
  Container& container(const Value& value);
  const Container& container(const Value& value) const;
  Value view_value(Kind kind, uint64_t offset, uint64_t length);
  Value owned_value(Kind kind, std::string_view bytes, uint8_t extra_flags = 0);

  void memo_put(uint64_t index, const Value& value);
  Value memo_get(uint64_t index) const;

  void append_to_list(Value& list, Value item);
  void refuse_or_placeholder(uint8_t opcode, std::string_view name);

  Value parse_int_text(std::string_view text, bool allow_bool);
  Value parse_long_bytes(uint64_t offset, uint64_t length);
  Value parse_float_text(std::string_view text);
  Value decode_string_literal(std::string_view text);
  Value decode_raw_unicode_escape(std::string_view text);

  std::span<const uint8_t> input_;
  VmOptions options_;
  uint64_t pos_ = 0;
  uint64_t op_offset_ = 0;
  uint8_t op_ = 0;
  int protocol_ = 0;
  uint64_t stop_offset_ = 0;

  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Container> containers_;
  std::vector<uint32_t> free_containers_;
  std::vector<Value> memo_;
  absl::flat_hash_map<uint64_t, Value> sparse_memo_;
  uint64_t memo_count_ = 0;
  std::string owned_;
};

// Renders a kBigInt as decimal text (exact). Throws for absurdly wide ints.
std::string big_int_decimal(const Vm& vm, const Value& value);

}  // namespace memsnap::pickle
