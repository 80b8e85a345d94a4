// A pickle virtual machine that only builds data. It implements every data
// opcode of protocols 0-5 and never imports, calls or constructs anything: the
// opcodes that would are refused, or in allow_objects mode replaced by inert
// placeholders. Input is hostile: every read is bounds-checked, every length is
// checked against the bytes that remain, and errors carry the byte offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "memsnap/error.h"
#include "pickle/arguments.h"
#include "pickle/value.h"
#include "util/chunked_array.h"

namespace memsnap::pickle {

class Vm;
class FlatReader;

// The VM's value stack: a vector whose push and pop always inline (the
// interpreter loop is too large for the compiler to inline vector::push_back,
// and a push happens for almost every opcode).
class ValueStack {
 public:
  // Called before the stack doubles, with the bytes the new capacity adds.
  std::function<void(uint64_t added_bytes)> on_grow;

  [[gnu::always_inline]] void push_back(const Value& value) {
    if (size_ == capacity_) grow();
    data_[size_++] = value;
  }
  [[gnu::always_inline]] void pop_back() { --size_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  Value& back() { return data_[size_ - 1]; }
  const Value& back() const { return data_[size_ - 1]; }
  Value& operator[](size_t i) { return data_[i]; }
  const Value& operator[](size_t i) const { return data_[i]; }
  Value* data() { return data_.get(); }
  Value* begin() { return data_.get(); }
  Value* end() { return data_.get() + size_; }
  void resize(size_t size) { size_ = size; }  // only ever shrinks
  void reserve(size_t capacity) {
    while (capacity_ < capacity) grow();
  }

 private:
  void grow() {
    size_t capacity = capacity_ == 0 ? 256 : capacity_ * 2;
    if (on_grow) on_grow((capacity - capacity_) * sizeof(Value));
    auto bigger = std::make_unique<Value[]>(capacity);
    std::copy(data_.get(), data_.get() + size_, bigger.get());
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  std::unique_ptr<Value[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// A vector that keeps its storage between uses and appends inline (the
// flat reader appends a few dozen values per trace entry; vector::push_back
// is not inlined into a function that large).
template <typename T>
class Scratch {
 public:
  [[gnu::always_inline]] void push_back(const T& value) {
    if (size_ == data_.size()) [[unlikely]]
      data_.resize(std::max<size_t>(64, 2 * data_.size()));
    data_[size_++] = value;
  }
  void clear() { size_ = 0; }
  void shrink_to(size_t size) { size_ = std::min(size_, size); }
  [[nodiscard]] size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  [[nodiscard]] std::span<const T> span() const { return {data_.data(), size_}; }
  const T* begin() const { return data_.data(); }
  const T* end() const { return data_.data() + size_; }

 private:
  std::vector<T> data_;
  size_t size_ = 0;
};

// A dict read straight from the bytes, without the value stack or a
// container: the shape of every trace entry (str keys; ints, strs, None,
// bools, floats and memo references as values; at most one value a list of
// memo references, the entry's frames). See flat_reader.cc.
struct FlatDict {
  static constexpr size_t kNoList = SIZE_MAX;
  Scratch<Value> items;         // key, value, key, value, ...
  size_t list_value = kNoList;  // index in items of the value that is the list
  Scratch<Value> list_items;    // that list's items
  // Set by the observer when it takes the dict: what the memo holds for the
  // list from now on (its own substitute). Set by the VM instead, with
  // list_items left empty, when the same list bytes were read before (the
  // list cache, flat_reader.cc): the observer then takes it as its answer.
  std::optional<Value> list_substitute;
};

// Lets a decoder consume list items as they are appended (trace entries), so
// that millions of small dicts never exist as generic values at the same time.
class ListItemObserver {
 public:
  virtual ~ListItemObserver() = default;
  // Called for each dict appended to a list (other items go in untouched).
  // Returns the value to store in the list: the item itself or a substitute.
  virtual Value on_list_item(Vm& vm, Value item) = 0;
  // Called for a dict read flat as it is being added to a list. Returns the
  // substitute to store, or nothing to decline: the VM then reads the same
  // bytes again the generic way and on_list_item sees the dict. An observer
  // that takes a dict with a list must set list_substitute.
  virtual std::optional<Value> on_flat_dict(Vm& /*vm*/, FlatDict& /*dict*/) { return std::nullopt; }
  [[nodiscard]] virtual bool reads_flat_dicts() const { return false; }
};

struct VmOptions {
  bool allow_objects = false;
  ListItemObserver* observer = nullptr;
  // Called every few MiB with the current offset (progress, page release).
  std::function<void(uint64_t offset)> on_progress;
  // The most memory the VM's own values may take; 0 means the default,
  // max_held_bytes_for(input size). A pickle that needs more is refused.
  uint64_t max_held_bytes = 0;
  // For input that arrives while it is read (a compressed file inflating on
  // another thread): called when the VM needs bytes up to `end` beyond what
  // it has; returns the input so far (same start, at least `end` bytes unless
  // the input has ended). Without it the input is complete.
  std::function<std::span<const uint8_t>(uint64_t end)> more_input;
  // The input's expected size when it is still arriving (for reservations);
  // 0: its size now.
  uint64_t expected_input_bytes = 0;
  // Set when the input is dropped behind the reader (an inflated file, whose
  // pages read as zeros once released): then no value the VM keeps points
  // into the input (strings, bytes and wide integers are copied into the
  // VM's own store as they are read, or as they are memoized when the flat
  // reader read them), and release_before(offset) is called every few MiB
  // with the offset before which nothing will be read again.
  std::function<void(uint64_t offset)> release_before;
  // Input bytes between calls of on_progress and release_before; 0 means
  // every 2 MiB (tests release at every opcode).
  uint64_t progress_interval = 0;
};

// The VM's memory bound: kHeldBytesPerInputByte per input byte, and at least
// kMinHeldBytes. A snapshot's trace takes about 1 byte per input byte (its
// entries are consumed as they arrive), but the dump's segments and blocks
// are held whole: a PyTorch 2.0 dump whose blocks carry `history` needs 8 to
// 12 bytes per input byte (measured on the real fixtures: the largest such
// file, 0.4 MB, is refused at 8). Degenerate pickles such as millions of
// EMPTY_LIST opcodes would take 72, and are refused at 12 (it was 16, with a
// 256 MiB floor).
constexpr uint64_t kHeldBytesPerInputByte = 12;
constexpr uint64_t kMinHeldBytes = uint64_t{64} << 20;
constexpr uint64_t max_held_bytes_for(uint64_t input_size) {
  return std::max(kMinHeldBytes, input_size * kHeldBytesPerInputByte);
}

class Vm {
 public:
  Vm(std::span<const uint8_t> input, VmOptions options);
  // The stack's growth hook points back at this Vm.
  Vm(const Vm&) = delete;
  Vm& operator=(const Vm&) = delete;

  // Runs to the first STOP and returns the value it left on the stack.
  Value run();

  [[nodiscard]] int protocol() const { return protocol_; }
  // After run(): the offset just past the STOP opcode (bytes beyond it are
  // not read, as CPython's pickle.load leaves them).
  [[nodiscard]] uint64_t end_offset() const { return pos_; }

  // Reading values.
  [[nodiscard]] std::string_view view(const Value& value) const;
  // Follows a container that an observer converted in place to its substitute.
  [[nodiscard]] Value resolve(const Value& value) const {
    if (!value.is_container()) return value;
    const Container& slot = container(value);
    return slot.converted ? slot.substitute : value;
  }
  // Items of a container (dicts: key, value, key, value, ...); empty for
  // anything else and for converted containers.
  [[nodiscard]] std::span<const Value> items(const Value& value) const {
    if (!value.is_container()) return {};
    const Container& slot = container(value);
    if (slot.converted) return {};
    return slot.items;
  }
  // Containers built so far. A container value's payload is its index below
  // this: its identity, for writers that mark objects reached twice.
  [[nodiscard]] size_t container_count() const { return containers_.size(); }
  // Last value stored under a str key in a dict (pickle dicts may repeat keys).
  [[nodiscard]] const Value* find(const Value& dict, std::string_view key) const;
  // The value after a str `key` among the stack's first `depth` values: an
  // item of the outermost dict that SETITEMS has not set yet (a snapshot's
  // "segments" while its trace is read); null when there is none.
  [[nodiscard]] const Value* pending_item(std::string_view key, size_t depth) const;

  // For observers: replace a consumed container. Memo references to it now
  // yield `substitute`. With reuse_slot the storage is recycled (trace entries,
  // which real files never share); otherwise the container stays resolvable.
  void replace_container(const Value& value, Value substitute, bool reuse_slot);

  // Takes `bytes` of wide integer from the file's budget for decimal text
  // (kMaxBigIntBytesPerFile); throws when it is spent. Const: converting is
  // reading, and the budget is the file's, not a value's.
  void spend_big_int_bytes(uint64_t bytes) const;
  // Charges what an observer builds from the values (the decoded snapshot's
  // rows) to the same bound as the VM's own memory: a value the memo shares
  // costs the VM two bytes of input per reference, but a row per reference
  // in the model (one entry named ten million times was 39x its pickle).
  void charge_decoded(uint64_t bytes) { charge(bytes); }

 private:
  friend class FlatReader;  // flat_reader.cc: the fast path for trace entries

  struct Container {
    std::vector<Value> items;
    Value substitute;
    uint64_t memo_slot = 0;
    uint32_t generation = 0;
    uint8_t memo_refs = 0;  // saturates at 2: shared between memo slots
    bool converted = false;
    bool list_item = false;  // a dict made where it is about to be added to a list
  };

  [[noreturn]] void fail(ErrorCode code, const std::string& message) const;
  [[noreturn]] void fail_at(ErrorCode code, const std::string& message, uint64_t offset) const;
  [[noreturn]] void fail_truncated(uint64_t count) const;
  // Grows the input to at least `end` bytes when more is arriving; false
  // when it has ended short of that.
  bool grow_input(uint64_t end);
  // The next `count` bytes: waits for them when input is still arriving,
  // fails with "truncated" when there are not that many.
  [[gnu::always_inline, gnu::returns_nonnull]] const uint8_t* take(uint64_t count) {
    if (count > input_.size() - pos_) [[unlikely]] {
      if (!grow_input(count > UINT64_MAX - pos_ ? UINT64_MAX : pos_ + count)) {
        fail_truncated(count);
      }
    }
    const uint8_t* start = input_.data() + pos_;
    pos_ += count;
    return start;
  }
  // The generic loop's byte source for the argument readers shared with
  // the flat reader (arguments.h): never short, since take() waits or fails.
  struct Stream {
    Vm& vm;
    [[gnu::always_inline, gnu::returns_nonnull]] const uint8_t* take(uint64_t count) {
      return vm.take(count);
    }
    [[nodiscard]] uint64_t offset() const { return vm.pos_; }
  };
  std::string_view read_line();
  // An unsigned little-endian argument of Width bytes.
  template <unsigned Width>
  [[gnu::always_inline]] uint64_t read_le() {
    Stream in{*this};
    uint64_t value = 0;
    arguments::read_le<Width>(in, value);
    return value;
  }

  [[gnu::always_inline]] void push(Value value) { stack_.push_back(value); }
  // Memory accounting: every value the VM stores is charged here, and items
  // of consumed containers are given back, so held_bytes_ tracks what the
  // VM keeps (within the slack of vector growth).
  [[gnu::always_inline]] void charge(uint64_t bytes) {
    held_bytes_ += bytes;
    if (held_bytes_ > max_held_bytes_) [[unlikely]]
      fail_memory_bound();
  }
  void give_back(uint64_t bytes) { held_bytes_ -= std::min(held_bytes_, bytes); }
  // A vector about to outgrow its capacity copies its items into new
  // storage before it frees the old one: for that moment it holds them
  // twice. Refused when that moment would pass the bound (20 MB of
  // EMPTY_LIST peaked at 18x the input in the container table's copy);
  // nothing more stays charged, since untouched capacity costs no memory.
  template <typename Items>
  [[gnu::always_inline]] void check_room_to_grow(const Items& items, size_t adding) {
    if (items.size() + adding > items.capacity()) [[unlikely]] {
      if (held_bytes_ + items.size() * sizeof(typename Items::value_type) > max_held_bytes_)
        fail_memory_bound();
    }
  }
  [[noreturn]] void fail_memory_bound() const;
  static constexpr size_t kRecycledItemsLimit = 64;
  Value pop();
  Value& top();
  size_t mark_base() const { return marks_.empty() ? 0 : marks_.back(); }
  size_t pop_mark();

  Value new_container(Kind kind);
  [[noreturn]] void fail_stale_reference() const;
  Container& container(const Value& value) {
    return const_cast<Container&>(std::as_const(*this).container(value));
  }
  const Container& container(const Value& value) const {
    const Container& slot = containers_[value.payload];
    if (slot.generation != value.size) [[unlikely]]
      fail_stale_reference();
    return slot;
  }
  Value view_value(Kind kind, uint64_t offset, uint64_t length);
  Value owned_value(Kind kind, std::string_view bytes, uint8_t extra_flags = 0);

  // MEMOIZE and in-order PUTs append; anything else takes the slow path.
  [[gnu::always_inline]] void memo_put(uint64_t index, const Value& put) {
    // The flat reader's pending puts may be views into the input.
    const Value value = kept(put);
    if (index == memo_.size() && sparse_memo_.empty()) [[likely]] {
      charge(sizeof(Value));
      memo_.push_back(value);
      ++memo_count_;
      if (value.is_container()) note_memoized(value, index);
      return;
    }
    memo_put_slow(index, value);
  }
  void memo_put_slow(uint64_t index, const Value& value);
  // A value as the VM may keep it: when the input is released behind the
  // reader, a view into the input becomes a copy in the VM's own store.
  [[gnu::always_inline]] Value kept(const Value& value) {
    if (!releases_input_ || (value.flags & Value::kOwnedBytes) != 0 ||
        (value.kind != Kind::kStr && value.kind != Kind::kBytes && value.kind != Kind::kByteArray &&
         value.kind != Kind::kBigInt)) [[likely]] {
      return value;
    }
    return owned_value(value.kind, view(value), value.flags);
  }
  void note_memoized(const Value& value, uint64_t index) {
    Container& slot = container(value);
    slot.memo_slot = index;
    if (slot.memo_refs < 2) ++slot.memo_refs;
  }
  [[gnu::always_inline]] Value memo_get(uint64_t index) const {
    if (index < memo_.size() && memo_[index].kind != Kind::kUndefined) [[likely]] {
      return memo_[index];
    }
    return memo_get_slow(index);
  }
  Value memo_get_slow(uint64_t index) const;

  // The loop and its opcode families (vm.cc): run() reads an opcode and
  // calls its family's function.
  void read_opcode();
  [[noreturn]] void fail_not_an_opcode() const;
  Value stop();
  void control_op();
  void scalar_op();
  Value read_long4();
  void text_op();
  Value read_python2_string(uint64_t length);
  void empty_container_op();
  void build_container_op();
  void fill_op();
  void set_items(const Value& target, size_t base);
  void memo_op();
  uint64_t read_text_index();
  void object_op();
  std::string pop_call();

  // The fast path for trace entries (flat_reader.cc, whose top comment
  // states its contract): at EMPTY_DICT (pos_ just past it) with a list
  // below, reads the whole dict as a FlatDict, hands it to the observer and
  // pushes its substitute; false, with nothing changed, to leave the dict to
  // the generic loop.
  bool try_flat_dict();
  [[nodiscard]] bool adds_to_list() const;
  struct PendingPut {
    uint64_t index = 0;
    enum class Target : uint8_t { kDict, kList, kItem } target = Target::kItem;
    size_t item = 0;  // index in flat_.items for kItem
  };
  bool flat_dicts_ = false;  // the observer reads flat dicts
  // The flat reader's list cache (see flat_reader.cc): a list's substitute
  // by the list's bytes, emptied by forget_cached_lists.
  absl::flat_hash_map<std::string, Value> list_cache_;
  uint64_t list_cache_bytes_ = 0;
  uint64_t list_cache_longest_ = 0;  // the longest key's bytes
  bool converting_ = false;          // replace_container's memo update
  FlatDict flat_;
  Scratch<PendingPut> pending_puts_;
  // Called when a defined memo slot is overwritten other than by converting
  // its container to a substitute: the slot may mean something else now.
  void forget_cached_lists();

  void append_to_list(Value& list, Value item);
  // APPENDS: items the observer does not want (anything but a dict) are
  // copied in bulk.
  void append_range(Value& list, const Value* first, const Value* last);
  void refuse_or_placeholder(uint8_t opcode, std::string_view name);

  Value parse_int_text(std::string_view text, bool allow_bool);
  Value parse_float_text(std::string_view text);
  Value decode_string_literal(std::string_view text);
  Value decode_raw_unicode_escape(std::string_view text);

  std::span<const uint8_t> input_;
  VmOptions options_;
  uint64_t pos_ = 0;
  uint64_t op_offset_ = 0;
  uint8_t op_ = 0;
  int protocol_ = 0;

  ValueStack stack_;
  std::vector<size_t> marks_;
  std::vector<Container> containers_;
  std::vector<uint32_t> free_containers_;
  // Item vectors of converted containers, kept with their capacity so the
  // next list does not go back to malloc (one frames list per trace entry).
  std::vector<std::vector<Value>> recycled_items_;
  ChunkedArray<Value> memo_;  // grows without copying: see chunked_array.h
  absl::flat_hash_map<uint64_t, Value> sparse_memo_;
  uint64_t memo_count_ = 0;
  bool releases_input_ = false;  // options_.release_before is set
  std::string owned_;
  uint64_t held_bytes_ = 0;
  uint64_t max_held_bytes_ = 0;
  mutable uint64_t big_int_bytes_ = 0;  // wide integers turned into decimal text so far
};

// The widest integer the VM reads (LONG4's byte count; LONG1's is at most
// 255): 64 Ki bits, 19,729 decimal digits. Its decimal text (big_int_decimal)
// takes quadratic time in the width, about a millisecond at this bound.
constexpr uint64_t kMaxLongBytes = 8192;
// The wide-integer bytes one file may have turned into decimal text, in all:
// each takes time quadratic in its width, so a file of thousands of the
// widest took seconds (about 0.25 s at this bound). Real snapshots hold
// none wider than 64 bits.
constexpr uint64_t kMaxBigIntBytesPerFile = uint64_t{1} << 20;

// Refuses input whose first byte is no pickle opcode (an error at byte
// offset 0, as the VM would give), from the first bytes alone: lets the input
// layer stop reading /dev/zero or inflating a gzip of zeros at once.
void check_pickle_start(std::span<const uint8_t> first_bytes);

// Renders a kBigInt as decimal text (exact). Throws for one wider than
// kMaxLongBytes (the VM makes none).
std::string big_int_decimal(const Vm& vm, const Value& value);

}  // namespace memsnap::pickle
