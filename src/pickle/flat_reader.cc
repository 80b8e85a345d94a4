// The flat reader: the fast path for trace entries, Vm::try_flat_dict.
//
// Contract. At EMPTY_DICT, when the dict is about to be added to a list and
// the observer reads flat dicts, the VM first tries to read the whole dict
// straight from the bytes as a FlatDict (vm.h), without the value stack or
// a container, and hands it to the observer. It takes exactly this shape:
//
//   EMPTY_DICT puts* MARK (key puts* value puts*)* SETITEMS
//
// where puts are MEMOIZE / BINPUT / LONG_BINPUT that append to the memo, a
// key or value is BININT, BININT1, BININT2, LONG1, NONE, NEWTRUE, NEWFALSE,
// BINFLOAT, SHORT_BINUNICODE, BINUNICODE, BINGET or LONG_BINGET, and at most
// one value is a list of memo references:
//
//   EMPTY_LIST puts* (MARK ref* APPENDS | ref APPEND)*      ref: BINGET | LONG_BINGET
//
// FRAME opcodes may come anywhere in between, as in the generic loop. It
// declines anything else: another opcode, bytes that end (or input still
// arriving) before SETITEMS, a put that is not an append to the memo (a
// sparse memo, a slot written twice), a reference to the dict or list being
// read, a memo reference that is not defined, more than 999 pairs (the
// writer goes on in a second SETITEMS), and the observer's refusal. Nothing
// has changed when it declines (no memo slot, no container, the VM's offset
// as it was): the VM reads the same bytes again the generic way, which gives
// the same result or the error. fuzz/fuzz_pickle_vm.cc checks that both ways
// give the same model or the same error on every input.
//
// Memo effects. The generic path would memoize the dict, its keys and
// values and the list as it meets their puts; here the puts are collected
// (pending_puts_) and made only once the observer has taken the dict, in the
// order of the bytes, with the values the generic path would leave in those
// slots by then: the dict's and the list's substitutes (the generic path
// converts both to them in place) and the items themselves. A memo
// reference inside the dict resolves against the memo plus the pending
// puts, as the generic path would see it at that point. Requiring a dense
// memo makes "the index is the memo's size" the whole test for an append.
//
// The list cache. Frames lists repeat byte for byte (the same memo
// references in the same order). When a list is one MARK ref... APPENDS
// batch, its bytes key the substitute the observer gave it; the next list
// with the same bytes takes that substitute without being read, and the
// observer takes it as its answer (FlatDict::list_substitute with no
// list_items). A list is looked up before its bytes are scanned: each
// APPENDS byte within the longest key's reach ends a candidate key (a few at
// most; a memo index may hold that byte too), and a key the cache holds is
// one a scan would give, since a key is a whole run of references and equal
// bytes scan the same. Scanning first cost more than the rest of the entry:
// each reference's width depends on the byte before it. The cache holds
// while every memo slot keeps its meaning.
// Converting a container to its substitute does not change a slot's meaning
// (every reader resolves the one to the other); any other overwrite of a
// defined slot may, and empties the cache (forget_cached_lists, called by
// Vm::memo_put_slow). It is bounded: 64 Ki lists or 16 MiB of their bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "pickle/arguments.h"
#include "pickle/opcodes.h"
#include "pickle/vm.h"

namespace memsnap::pickle {

namespace args = arguments;

class FlatReader {
 public:
  explicit FlatReader(Vm& vm);
  // Reads the dict (the VM is just past its EMPTY_DICT); false to decline.
  bool read_dict();
  // Gives the dict to the observer and, when it takes it, makes the memo
  // puts and pushes the substitute; false when the observer declines.
  bool hand_over();

 private:
  using Target = Vm::PendingPut::Target;

  // The flat reader's byte source for the shared argument readers
  // (arguments.h): short at the end of the bytes at hand.
  struct Cursor {
    const uint8_t* begin = nullptr;
    const uint8_t* p = nullptr;
    const uint8_t* end = nullptr;
    [[gnu::always_inline]] const uint8_t* take(uint64_t count) {
      if (count > left()) return nullptr;
      const uint8_t* start = p;
      p += count;
      return start;
    }
    [[nodiscard]] uint64_t offset() const { return static_cast<uint64_t>(p - begin); }
    [[nodiscard]] uint64_t left() const { return static_cast<uint64_t>(end - p); }
  };

  int next_op();
  bool lookup(uint64_t index, Value& out) const;
  template <unsigned Width>
  bool read_get(Value& out);
  bool read_puts(Target target, size_t item);
  bool read_value(int op, Value& out);
  bool read_pair(int key_op);
  bool read_list_value();
  bool read_reference(int op);
  [[nodiscard]] std::string_view single_batch() const;
  [[nodiscard]] bool ends_list(const uint8_t* appends) const;
  [[nodiscard]] bool find_cached_list();
  bool take_cached_list();
  bool read_list();
  void remember_list();

  Vm& vm_;
  FlatDict& dict_;
  Cursor in_;
  uint64_t memo_end_;  // the memo's size once the pending puts are made
  // The bytes of a list that is one batch, not in the cache yet.
  std::string_view list_key_;
};

FlatReader::FlatReader(Vm& vm)
    : vm_(vm),
      dict_(vm.flat_),
      in_{vm.input_.data(), vm.input_.data() + vm.pos_, vm.input_.data() + vm.input_.size()},
      memo_end_(vm.memo_.size()) {
  dict_.items.clear();
  dict_.list_value = FlatDict::kNoList;
  dict_.list_items.clear();
  dict_.list_substitute.reset();
  vm_.pending_puts_.clear();
}

// The next opcode, FRAME opcodes skipped as the generic loop does; -1 at the
// end or at a FRAME longer than the rest (the cursor is then before it).
[[gnu::always_inline]] inline int FlatReader::next_op() {
  while (in_.p != in_.end && *in_.p == kFrame) {
    const uint8_t* frame = in_.p++;
    uint64_t length = 0;
    if (!args::read_le<8>(in_, length) || length > in_.left()) {
      in_.p = frame;
      return -1;
    }
  }
  return in_.p == in_.end ? -1 : *in_.p++;
}

// Pending puts only ever append to the memo, so an index below its size is
// the memo's own; one above is an item of this dict; the dict or list being
// read, or an undefined slot, declines.
[[gnu::always_inline]] inline bool FlatReader::lookup(uint64_t index, Value& out) const {
  if (index < vm_.memo_.size()) [[likely]] {
    out = vm_.memo_[index];
    return true;
  }
  for (const Vm::PendingPut& put : vm_.pending_puts_) {
    if (put.index != index) continue;
    if (put.target != Target::kItem) return false;
    out = dict_.items[put.item];
    return true;
  }
  return false;
}

// BINGET (Width 1) or LONG_BINGET (4), past the opcode.
template <unsigned Width>
[[gnu::always_inline]] inline bool FlatReader::read_get(Value& out) {
  uint64_t index = 0;
  return args::read_le<Width>(in_, index) && lookup(index, out);
}

// MEMOIZE / BINPUT / LONG_BINPUT after a value, as many as there are.
[[gnu::always_inline]] inline bool FlatReader::read_puts(Target target, size_t item) {
  for (;;) {
    const uint8_t* before = in_.p;
    const int op = next_op();
    uint64_t index = memo_end_;
    const bool put = op == kMemoize || (op == kBinPut && args::read_le<1>(in_, index)) ||
                     (op == kLongBinPut && args::read_le<4>(in_, index));
    if (!put) {
      in_.p = before;
      return true;
    }
    // Anything but an append to the memo: the generic path.
    if (index != memo_end_) return false;
    ++memo_end_;
    vm_.pending_puts_.push_back(Vm::PendingPut{index, target, item});
  }
}

// One key or value: the cursor is past its opcode.
[[gnu::always_inline]] inline bool FlatReader::read_value(int op, Value& out) {
  switch (op) {
    case kBinInt: return args::read_bin_int(in_, out);
    case kBinInt1: return args::read_small_int<1>(in_, out);
    case kBinInt2: return args::read_small_int<2>(in_, out);
    case kLong1: return args::read_long1(in_, out);
    case kNone: out = args::none_value(); return true;
    case kNewTrue: out = args::bool_value(true); return true;
    case kNewFalse: out = args::bool_value(false); return true;
    case kBinFloat: return args::read_bin_float(in_, out);
    case kShortBinUnicode: return args::read_counted<1>(in_, Kind::kStr, out);
    case kBinUnicode: return args::read_counted<4>(in_, Kind::kStr, out);
    case kBinGet: return read_get<1>(out);
    case kLongBinGet: return read_get<4>(out);
    default: return false;
  }
}

bool FlatReader::read_dict() {
  // A dict of 1000 pairs may go on in another SETITEMS: the generic path.
  constexpr size_t kMaxFlatItems = size_t{2} * 999;
  if (!read_puts(Target::kDict, 0) || next_op() != kMark) return false;
  for (int op = next_op(); op != kSetItems; op = next_op()) {
    if (dict_.items.size() >= kMaxFlatItems || !read_pair(op)) return false;
  }
  return true;
}

// A key (its opcode read), its puts, and its value with its puts.
[[gnu::always_inline]] inline bool FlatReader::read_pair(int key_op) {
  Value key;
  if (!read_value(key_op, key)) return false;
  dict_.items.push_back(key);
  if (!read_puts(Target::kItem, dict_.items.size() - 1)) return false;
  const int op = next_op();
  if (op == kEmptyList) return read_list_value();
  Value value;
  if (!read_value(op, value)) return false;
  dict_.items.push_back(value);
  return read_puts(Target::kItem, dict_.items.size() - 1);
}

// The list value, past its EMPTY_LIST: a placeholder in items, the list's
// items in list_items.
bool FlatReader::read_list_value() {
  if (dict_.list_value != FlatDict::kNoList) return false;
  dict_.list_value = dict_.items.size();
  dict_.items.push_back(Value{});
  return read_puts(Target::kList, 0) && read_list();
}

// A memo reference as a list item, its opcode read.
[[gnu::always_inline]] inline bool FlatReader::read_reference(int op) {
  Value item;
  const bool found =
      (op == kBinGet && read_get<1>(item)) || (op == kLongBinGet && read_get<4>(item));
  if (!found) return false;
  dict_.list_items.push_back(item);
  return true;
}

// With the cursor past a list's first MARK: when the list is that one
// MARK ref... APPENDS batch and nothing more, the bytes of its refs (the
// list cache's key), else empty.
std::string_view FlatReader::single_batch() const {
  const uint8_t* q = in_.p;
  while (q != in_.end && (*q == kBinGet || *q == kLongBinGet)) {
    const uint64_t width = *q == kBinGet ? 2 : 5;
    if (static_cast<uint64_t>(in_.end - q) < width) return {};
    q += width;
  }
  if (q == in_.end || *q != kAppends || !ends_list(q)) return {};
  return {reinterpret_cast<const char*>(in_.p), static_cast<size_t>(q - in_.p)};
}

// Whether the list ends with the APPENDS at `appends`: what follows must not
// go on with it (another batch, ref APPEND).
bool FlatReader::ends_list(const uint8_t* appends) const {
  const uint8_t* after = appends + 1;
  if (after != in_.end && (*after == kMark || *after == kFrame)) return false;
  if (after != in_.end && (*after == kBinGet || *after == kLongBinGet)) {
    const uint64_t width = *after == kBinGet ? 2 : 5;
    if (static_cast<uint64_t>(in_.end - after) <= width || after[width] == kAppend) return false;
  }
  return true;
}

// At a list's first MARK, before any scan: the cached list whose bytes come
// next, ended by an APPENDS byte (see the list cache above). On a hit the
// substitute is the answer and the cursor is past its APPENDS.
bool FlatReader::find_cached_list() {
  constexpr int kMaxCandidates = 4;  // APPENDS bytes tried; then the scan
  const uint64_t reach = std::min(in_.left(), vm_.list_cache_longest_ + 1);
  const uint8_t* const limit = in_.p + reach;
  const uint8_t* from = in_.p;
  for (int tried = 0; tried < kMaxCandidates && from != limit; ++tried) {
    const auto* appends =
        static_cast<const uint8_t*>(std::memchr(from, kAppends, static_cast<size_t>(limit - from)));
    if (appends == nullptr) return false;
    from = appends + 1;
    if (appends == in_.p) continue;  // no references: never cached
    const absl::string_view key(reinterpret_cast<const char*>(in_.p),
                                static_cast<size_t>(appends - in_.p));
    const auto known = vm_.list_cache_.find(key);
    if (known == vm_.list_cache_.end()) continue;
    if (!ends_list(appends)) return false;  // the scan would find the same end
    dict_.list_substitute = known->second;
    in_.p = appends + 1;
    return true;
  }
  return false;
}

// At a list's first MARK: true when its bytes are in the list cache; the
// substitute is then the answer and the cursor is past its APPENDS. Else
// list_key_ holds the bytes to cache once the list is read (when it is one
// batch).
bool FlatReader::take_cached_list() {
  list_key_ = {};
  if (vm_.list_cache_.empty() || !find_cached_list()) {
    list_key_ = single_batch();
    if (list_key_.empty() || vm_.list_cache_.empty()) return false;
    // Past the candidates find_cached_list tries: the scan's key, looked up.
    // (abseil's own string_view: Debian builds it without std's.)
    const auto known = vm_.list_cache_.find(absl::string_view(list_key_.data(), list_key_.size()));
    if (known == vm_.list_cache_.end()) return false;
    dict_.list_substitute = known->second;
    in_.p += list_key_.size() + 1;  // the refs and APPENDS
    list_key_ = {};
  }
  return true;
}

// The list's items after EMPTY_LIST and its puts: MARK ref... APPENDS
// batches and single ref APPEND pairs, up to the next key.
bool FlatReader::read_list() {
  for (bool first = true;; first = false) {
    const uint8_t* before = in_.p;
    const int op = next_op();
    if (op == kMark) {
      if (first && take_cached_list()) return true;
      for (int item = next_op(); item != kAppends; item = next_op()) {
        if (!read_reference(item)) return false;
      }
      continue;
    }
    if (op == kBinGet || op == kLongBinGet) {
      const size_t count = dict_.list_items.size();
      if (read_reference(op) && next_op() == kAppend) continue;
      dict_.list_items.shrink_to(count);  // a key, not an item: the list has ended
    }
    in_.p = before;
    return true;
  }
}

bool FlatReader::hand_over() {
  std::optional<Value> substitute = vm_.options_.observer->on_flat_dict(vm_, dict_);
  if (!substitute || (dict_.list_value != FlatDict::kNoList && !dict_.list_substitute)) {
    return false;
  }
  remember_list();
  for (const Vm::PendingPut& put : vm_.pending_puts_) {
    vm_.memo_put(put.index, put.target == Target::kDict   ? *substitute
                            : put.target == Target::kList ? *dict_.list_substitute
                                                          : dict_.items[put.item]);
  }
  vm_.pos_ = in_.offset();
  vm_.push(*substitute);
  return true;
}

// Puts a list read as one batch in the list cache, while it has room.
void FlatReader::remember_list() {
  constexpr size_t kMaxCachedLists = size_t{1} << 16;
  constexpr uint64_t kMaxCachedListBytes = uint64_t{16} << 20;
  if (list_key_.empty() || vm_.list_cache_.size() >= kMaxCachedLists ||
      vm_.list_cache_bytes_ + list_key_.size() > kMaxCachedListBytes) {
    return;
  }
  vm_.charge(list_key_.size() + sizeof(Value) + 32);
  vm_.list_cache_bytes_ += list_key_.size();
  vm_.list_cache_longest_ = std::max<uint64_t>(vm_.list_cache_longest_, list_key_.size());
  vm_.list_cache_.emplace(std::string(list_key_), *dict_.list_substitute);
}

bool Vm::try_flat_dict() {
  // Memo indices are resolved ahead of the puts, which is simple only while
  // the memo is dense (every real pickle's is).
  if (!sparse_memo_.empty() || memo_count_ != memo_.size()) return false;
  FlatReader reader(*this);
  return reader.read_dict() && reader.hand_over();
}

void Vm::forget_cached_lists() {
  if (list_cache_.empty()) return;
  list_cache_.clear();
  give_back(list_cache_bytes_);
  list_cache_bytes_ = 0;
  list_cache_longest_ = 0;
}

}  // namespace memsnap::pickle
