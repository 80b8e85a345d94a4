#include "snapshot/decoder.h"

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <initializer_list>
#include <numeric>
#include <utility>

#include "memsnap/error.h"
#include "pickle/json.h"
#include "pickle/vm.h"
#include "snapshot/allocator_settings.h"
#include "util/utf8.h"

namespace memsnap {
namespace {

using pickle::Kind;
using pickle::Value;
using pickle::Vm;

// Tags of the values the decoder substitutes for what it consumed.
constexpr uint8_t kEventTag = 1;     // id: index of a decoded trace entry
constexpr uint8_t kFrameTag = 2;     // id: an interned frame id
constexpr uint8_t kStackTag = 3;     // id: an interned stack id
constexpr uint8_t kRejectedTag = 4;  // a trace entry counted as malformed (not counted again)

std::optional<uint64_t> as_u64(const Value& value) {
  switch (value.kind) {
    case Kind::kInt:
    case Kind::kUInt:
    case Kind::kBool: return value.payload;
    default: return std::nullopt;
  }
}

// Byte counts beyond 2^44 (16 TiB) are no memory a GPU has: a hostile or
// corrupt value (a negative size, 2^64 - 1), which would wrap the sums. Such
// parts are malformed.
constexpr uint64_t kMaxPlausibleBytes = uint64_t{1} << 44;
// And all the trace entries' sizes together, all the segments' and all the
// blocks' stay within 2^60 (1 EiB; a trace of a billion 1 GiB allocations):
// parts past it are malformed too. Every delta, peak, live total and
// throughput derived from them is then within +-2^60, and sums and
// differences of a few of them (B - A, baselines) cannot overflow an int64.
constexpr uint64_t kMaxTotalBytes = uint64_t{1} << 60;

// Running total of one kind of part against kMaxTotalBytes.
class ByteBudget {
 public:
  // False (and nothing taken) when the part would pass the limit.
  bool take(uint64_t bytes) {
    if (bytes > kMaxTotalBytes - used_) return false;
    used_ += bytes;
    return true;
  }

 private:
  uint64_t used_ = 0;
};
// A time_us beyond 2^53 µs (285 years) is no timestamp; below it every
// difference of two times fits an int64 and a double.
constexpr int64_t kMaxTimeUs = int64_t{1} << 53;
// CUDA device ordinals.
constexpr int64_t kMaxDevice = 65535;

// A byte count: a non-negative int within kMaxPlausibleBytes.
std::optional<uint64_t> as_bytes(const Value& value) {
  if (value.kind != Kind::kInt) return std::nullopt;
  auto signed_value = static_cast<int64_t>(value.payload);
  if (signed_value < 0 || static_cast<uint64_t>(signed_value) > kMaxPlausibleBytes) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(signed_value);
}

std::optional<int64_t> as_i64(const Value& value) {
  if (value.kind == Kind::kInt || value.kind == Kind::kBool) {
    return static_cast<int64_t>(value.payload);
  }
  return std::nullopt;
}

class SnapshotDecoder final : public pickle::ListItemObserver {
 public:
  SnapshotDecoder(Snapshot& model, bool flat) : flat_(flat), model_(model) {}

  // Tells `listener` of the dump's segments and of the rows as they are
  // added, for as long as the columns keep their reservation.
  void listen(ReadListener* listener) {
    const EventColumns& events = model_.events;
    listener_ = listener;
    publish_limit_ = std::min({events.action.capacity(), events.addr.capacity(),
                               events.size.capacity(), events.stream.capacity()});
  }
  // Hands the listener the rows not yet handed over (the read is whole).
  void publish_all() {
    if (listener_ != nullptr) listener_->entries_read(columns(model_.events.count()));
  }

  // Trace entries are the only dicts with an "action" key; each becomes a row
  // of the event columns and its dict storage is recycled at once.
  Value on_list_item(Vm& vm, Value item) override {
    if (item.kind != Kind::kDict) return item;
    // Copies, not pointers: interning the frames below may convert other
    // containers (a hostile file can make the entry its own frame).
    EntryFields fields = scan_entry(vm, vm.items(item));
    if (!present(fields.action)) return item;
    if (!usable(fields)) return reject(vm, item);
    StackId stack = present(fields.frames) ? stack_of(vm, fields.frames) : StackId{};
    if (vm.resolve(item).kind != Kind::kDict) {  // consumed while interning its frames
      ++model_.anomalies.malformed_entries;
      return item;
    }
    Value substitute = add_row(vm, fields, stack);
    vm.replace_container(item, substitute, /*reuse_slot=*/true);
    return substitute;
  }

  // The same for an entry the VM read flat (nearly all of them): its frames
  // list, when it has its own, arrives as the list's items. Anything unusual
  // (a malformed entry, a list under another key) is declined before any
  // side effect and takes the generic path above.
  bool reads_flat_dicts() const override { return flat_; }
  std::optional<Value> on_flat_dict(Vm& vm, pickle::FlatDict& dict) override {
    EntryFields fields = scan_entry(vm, dict.items.span());
    if (!present(fields.action)) return std::nullopt;
    const bool own_frames = dict.list_value != pickle::FlatDict::kNoList;
    if (own_frames && dict.list_value != fields.frames_index) return std::nullopt;
    if (!usable(fields)) return std::nullopt;
    StackId stack;
    if (own_frames && dict.list_substitute && dict.list_substitute->is_external(kStackTag)) {
      // The VM has seen these very list bytes before: our answer then.
      stack = StackId{static_cast<uint32_t>(dict.list_substitute->payload)};
    } else if (own_frames) {
      stack = intern_stack(vm, dict.list_items.span());
      dict.list_substitute = Value::external(kStackTag, stack.value);
    } else if (present(fields.frames)) {
      stack = stack_of(vm, fields.frames);
    }
    return add_row(vm, fields, stack);
  }

  static bool present(const Value& value) { return value.kind != Kind::kUndefined; }

 private:
  enum class EntryKey : uint8_t {
    kOther,
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kDeviceFree,
    kCategory,
    kUserMetadata,
    kCompileContext,
    kPoolId,
  };
  struct EntryFields {
    Value action;
    Value addr;
    Value size;
    Value stream;
    Value time_us;
    Value frames;
    size_t frames_index = pickle::FlatDict::kNoList;  // index of the frames value in the items
    Value device_free;
    Value category;
    Value user_metadata;
    Value compile_context;
    Value pool_id;
  };

  static EntryKey entry_key(std::string_view key) {
    static constexpr std::pair<std::string_view, EntryKey> kKeys[] = {
        {"action", EntryKey::kAction},
        {"addr", EntryKey::kAddr},
        {"size", EntryKey::kSize},
        {"stream", EntryKey::kStream},
        {"time_us", EntryKey::kTimeUs},
        {"frames", EntryKey::kFrames},
        {"device_free", EntryKey::kDeviceFree},
        {"category", EntryKey::kCategory},
        {"user_metadata", EntryKey::kUserMetadata},
        {"compile_context", EntryKey::kCompileContext},
        {"pool_id", EntryKey::kPoolId},
    };
    for (const auto& [name, id] : kKeys) {
      if (key == name) return id;
    }
    return EntryKey::kOther;
  }

  // The fields of one entry, the last of repeated keys winning. Keys are
  // memo references to one string each in every real file, so the k-th key
  // of an entry is nearly always the k-th key of the one before: the same
  // value (offset and length), known without comparing its bytes.
  EntryFields scan_entry(const Vm& vm, std::span<const Value> items) {
    EntryFields fields;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& key = items[i];
      if (key.kind != Kind::kStr) continue;
      KeySlot& slot = key_slots_[(i / 2) % key_slots_.size()];
      if (slot.key.kind != Kind::kStr || slot.key.payload != key.payload ||
          slot.key.size != key.size || slot.key.flags != key.flags) {
        slot = KeySlot{key, entry_key(vm.view(key))};
      }
      const Value& value = items[i + 1];
      switch (slot.id) {
        case EntryKey::kAction: fields.action = value; break;
        case EntryKey::kAddr: fields.addr = value; break;
        case EntryKey::kSize: fields.size = value; break;
        case EntryKey::kStream: fields.stream = value; break;
        case EntryKey::kTimeUs: fields.time_us = value; break;
        case EntryKey::kFrames:
          fields.frames = value;
          fields.frames_index = i + 1;
          break;
        case EntryKey::kDeviceFree: fields.device_free = value; break;
        case EntryKey::kCategory: fields.category = value; break;
        case EntryKey::kUserMetadata: fields.user_metadata = value; break;
        case EntryKey::kCompileContext: fields.compile_context = value; break;
        case EntryKey::kPoolId: fields.pool_id = value; break;
        case EntryKey::kOther: break;
      }
    }
    return fields;
  }

  // An entry with an action whose address and size are usable; takes the
  // size from the entries' byte budget.
  bool usable(const EntryFields& f) {
    if (f.action.kind != Kind::kStr || (present(f.addr) && !as_u64(f.addr))) return false;
    if (!present(f.size)) return true;
    std::optional<uint64_t> bytes = as_bytes(f.size);
    return bytes && entry_bytes_.take(*bytes);
  }

  // Appends the entry's row to the event columns; returns its substitute.
  Value add_row(Vm& vm, const EntryFields& f, StackId stack) {
    vm.charge_decoded(kRowBytes);
    EventColumns& events = model_.events;
    uint64_t index = events.count();
    if (listener_ != nullptr) [[unlikely]]
      before_row(vm, index);
    std::string_view action_text = vm.view(f.action);
    std::optional<Action> parsed = parse_action(action_text);
    events.action.push_back(parsed.value_or(Action::kOther));
    if (!parsed) events.other_action.emplace(index, intern_view(vm, f.action));
    if (f.category.kind == Kind::kStr) {
      events.category.emplace(index, intern_view(vm, f.category));
    }
    // PyTorch writes these on every entry: "" and "N/A" when nothing was set,
    // which must cost nothing (the maps hold only entries that say something).
    if (f.user_metadata.kind == Kind::kStr && f.user_metadata.size != 0) {
      events.user_metadata.emplace(index, intern_view(vm, f.user_metadata));
    }
    if (f.compile_context.kind == Kind::kStr && f.compile_context.size != 0 &&
        vm.view(f.compile_context) != "N/A") {
      events.compile_context.emplace(index, intern_view(vm, f.compile_context));
    }
    if (present(f.pool_id)) {
      std::vector<Value> pair = list_items(vm, f.pool_id);
      std::optional<int64_t> first = pair.size() == 2 ? as_i64(vm.resolve(pair[0])) : std::nullopt;
      std::optional<int64_t> second = pair.size() == 2 ? as_i64(vm.resolve(pair[1])) : std::nullopt;
      if (first && second) {
        events.entries_carry_pool_id = true;
        if (*first != 0 || *second != 0) events.pool_id.emplace(index, PoolId{*first, *second});
      }
    }
    if (!present(f.addr)) events.without_addr.insert(index);
    events.addr.push_back(present(f.addr) ? *as_u64(f.addr) : 0);
    events.size.push_back(present(f.size) ? *as_bytes(f.size) : 0);
    events.stream.push_back(present(f.stream) ? as_u64(f.stream).value_or(0) : 0);
    events.time_us.push_back(present(f.time_us) ? timestamp(f.time_us) : 0);
    events.stack.push_back(stack);
    if (present(f.device_free)) {
      if (auto free_bytes = as_bytes(f.device_free)) events.device_free.emplace(index, *free_bytes);
    }
    if (listener_ != nullptr && (index + 1) % kRowsPerHandover == 0) {
      listener_->entries_read(columns(index + 1));
    }
    return Value::external(kEventTag, index);
  }

  // The first row: the dump's segments, when the root dict still holds them
  // unset below the trace; a row past the columns' reservation: the end of
  // listening (they are about to move).
  void before_row(Vm& vm, uint64_t index) {
    if (index == 0) {
      constexpr size_t kRootItems = 16;  // the root dict and a few items of it
      if (const Value* segments = vm.pending_item("segments", kRootItems)) {
        Snapshot dump;
        SnapshotDecoder early(dump, false);
        early.stacks_ = false;
        early.decode_segments(vm, *segments);
        listener_->segments_read(dump);
      }
    }
    if (index >= publish_limit_) {
      listener_->columns_moving();
      listener_ = nullptr;
    }
  }

  TraceColumns columns(uint64_t count) const {
    const EventColumns& events = model_.events;
    return TraceColumns{events.action.data(), events.addr.data(), events.size.data(),
                        events.stream.data(), count};
  }

 public:
  // Counts a malformed trace entry once: the list keeps a marker, so the
  // device list's walk does not count it again.
  Value reject(Vm& vm, const Value& item) {
    // Consecutive ids, so that a run of rejected entries collapses into one
    // kExternalRange instead of costing a list item each.
    Value marker = Value::external(kRejectedTag, model_.anomalies.malformed_entries++);
    vm.replace_container(item, marker, /*reuse_slot=*/true);
    return marker;
  }

  // time_us as the model keeps it: 0 (no time) for values that are no
  // timestamp (float, negative, beyond kMaxTimeUs), which are counted.
  int64_t timestamp(const Value& value) {
    std::optional<int64_t> t = as_i64(value);
    if (t && *t >= 0 && *t < kMaxTimeUs) return *t;
    ++model_.anomalies.unusable_times;
    return 0;
  }

  // Values by copy: interning converts containers and frees their items.
  StackId stack_of(Vm& vm, Value raw) {
    Value value = vm.resolve(raw);
    if (value.is_external(kStackTag)) return StackId{static_cast<uint32_t>(value.payload)};
    if (value.kind != Kind::kList && value.kind != Kind::kTuple) return StackId{};
    // frame_of converts frame dicts only, never this list, and converting
    // allocates no container, so the span stays valid through the loop.
    StackId id = intern_stack(vm, vm.items(value));
    vm.replace_container(value, Value::external(kStackTag, id.value), /*reuse_slot=*/false);
    return id;
  }

  // The stack of a frames list's items.
  StackId intern_stack(Vm& vm, std::span<const Value> items) {
    scratch_frames_.clear();
    scratch_frames_.reserve(items.size());
    for (const Value& item : items) {
      if (item.is_external(kFrameTag)) {  // the memo already holds the interned frame
        scratch_frames_.push_back(FrameId{static_cast<uint32_t>(item.payload)});
        continue;
      }
      if (item.kind == Kind::kExternalRange && item.flags == kFrameTag) {  // APPENDed one by one
        for (uint64_t id = item.payload; id < item.payload + item.size; ++id)
          scratch_frames_.push_back(FrameId{static_cast<uint32_t>(id)});
        continue;
      }
      FrameId id = frame_of(vm, item);
      if (id.valid()) scratch_frames_.push_back(id);
    }
    return model_.stacks.intern(scratch_frames_);
  }

  FrameId frame_of(Vm& vm, Value raw) {
    Value value = vm.resolve(raw);
    if (value.is_external(kFrameTag)) return FrameId{static_cast<uint32_t>(value.payload)};
    if (value.kind != Kind::kDict) return FrameId{};
    // One pass over the frame's items (a frame is decoded per distinct frame
    // dict, millions of times in a stacks="all" file); the last of repeated
    // keys wins, as Vm::find would give.
    Value name;
    Value file;
    Value line;
    Value fx_original_trace;
    std::span<const Value> items = vm.items(value);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      if (items[i].kind != Kind::kStr) continue;
      std::string_view key = vm.view(items[i]);
      if (key == "name") {
        name = items[i + 1];
      } else if (key == "filename") {
        file = items[i + 1];
      } else if (key == "line") {
        line = items[i + 1];
      } else if (key == "fx_original_trace") {
        fx_original_trace = items[i + 1];
      }
    }
    Frame frame;
    if (name.kind == Kind::kStr) frame.name = intern_text(vm.view(name));
    if (file.kind == Kind::kStr) frame.filename = intern_text(vm.view(file));
    if (line.kind != Kind::kUndefined) frame.line = as_i64(line).value_or(0);
    if (fx_original_trace.kind == Kind::kStr) {
      frame.fx_original_trace = intern_text(vm.view(fx_original_trace));
    }
    FrameId id = model_.frames.intern(frame);
    vm.replace_container(value, Value::external(kFrameTag, id.value), /*reuse_slot=*/false);
    return id;
  }

  void decode_root(Vm& vm, const Value& raw_root) {
    Value root = vm.resolve(raw_root);
    if (root.kind == Kind::kList) {
      // torch.cuda.memory_snapshot(): a list of segment dicts. A list with
      // items but not one dict among them is some other pickle.
      std::span<const Value> items = vm.items(root);
      bool any_dict = std::any_of(items.begin(), items.end(), [&vm](const Value& item) {
        return vm.resolve(item).kind == Kind::kDict;
      });
      if (!items.empty() && !any_dict) {
        throw Error(
            ErrorCode::kNotASnapshot,
            fmt::format("not a memory snapshot: the pickle is a list of {} items and none is a "
                        "segment dict "
                        "(the first is {})",
                        items.size(), pickle::kind_with_article(vm.resolve(items.front()).kind)));
      }
      model_.top_level_list = true;
      decode_segments(vm, root);
      return;
    }
    if (root.kind != Kind::kDict) {
      throw Error(ErrorCode::kNotASnapshot,
                  fmt::format("not a memory snapshot: the pickle holds {}, not a dict",
                              pickle::kind_with_article(root.kind)));
    }
    // Copies of the fields: decoding one may convert containers the root holds.
    const Value* segments_field = vm.find(root, "segments");
    const Value* traces_field = vm.find(root, "device_traces");
    if (segments_field == nullptr && traces_field == nullptr) {
      throw Error(ErrorCode::kNotASnapshot,
                  "not a memory snapshot: the pickle is a dict without 'segments' or "
                  "'device_traces'");
    }
    std::optional<Value> segments = segments_field ? std::optional(*segments_field) : std::nullopt;
    std::optional<Value> traces = traces_field ? std::optional(*traces_field) : std::nullopt;
    const bool segments_usable = segments && is_list(vm, *segments, "segments");
    const bool traces_usable = traces && is_list(vm, *traces, "device_traces");
    if (!segments_usable && !traces_usable) {
      const auto describe = [&vm](const std::optional<Value>& field) {
        return field ? "is " + pickle::kind_with_article(vm.resolve(*field).kind)
                     : std::string("is absent");
      };
      throw Error(
          ErrorCode::kNotASnapshot,
          fmt::format(
              "not a memory snapshot: 'segments' {} and 'device_traces' {} (a snapshot has lists "
              "there)",
              describe(segments), describe(traces)));
    }
    if (segments_usable) decode_segments(vm, *segments);
    if (traces_usable) decode_traces(vm, *traces);
    if (const Value* notes = vm.find(root, "external_annotations")) {
      if (is_list(vm, *notes, "external_annotations")) decode_annotations(vm, *notes);
    }
    if (const Value* settings = vm.find(root, "allocator_settings")) {
      uint64_t cut = 0;
      model_.allocator_settings =
          decode_allocator_settings(pickle::to_plain_json(vm, *settings, kMaxStringBytes, &cut));
      model_.anomalies.truncated_strings += cut;
    }
  }

 private:
  // A list or tuple; anything else is counted as a malformed field (once,
  // when `field` names it) and left out.
  bool is_list(const Vm& vm, const Value& raw, const char* field) {
    Kind kind = vm.resolve(raw).kind;
    if (kind == Kind::kList || kind == Kind::kTuple) return true;
    model_.anomalies.malformed_fields.push_back({field, pickle::kind_with_article(kind)});
    return false;
  }

  // A copy: decoding an item may convert containers (interned frames) and a
  // hostile file can make the list itself one of them.
  static std::vector<Value> list_items(const Vm& vm, Value raw) {
    Value value = vm.resolve(raw);
    if (value.kind != Kind::kList && value.kind != Kind::kTuple) return {};
    std::span<const Value> items = vm.items(value);
    return {items.begin(), items.end()};
  }

  // A view, for loops that convert nothing.
  static std::span<const Value> list_view(const Vm& vm, Value raw) {
    Value value = vm.resolve(raw);
    if (value.kind != Kind::kList && value.kind != Kind::kTuple) return {};
    return vm.items(value);
  }

  // Every present size field is a plausible byte count.
  static bool plausible_sizes(const Vm& vm, const Value& dict,
                              std::initializer_list<std::string_view> keys) {
    for (std::string_view key : keys) {
      const Value* value = vm.find(dict, key);
      if (value != nullptr && value->kind != Kind::kNone && !as_bytes(*value)) return false;
    }
    return true;
  }

  static uint64_t u64_field(const Vm& vm, const Value& dict, std::string_view key,
                            uint64_t fallback = 0) {
    const Value* value = vm.find(dict, key);
    return value != nullptr ? as_u64(*value).value_or(fallback) : fallback;
  }

  void decode_segments(Vm& vm, Value raw) {
    for (const Value& item : list_items(vm, raw)) {
      Value dict = vm.resolve(item);
      Segment segment;
      if (dict.kind != Kind::kDict || !read_segment(vm, dict, segment)) {
        ++model_.anomalies.malformed_segments;
        continue;
      }
      segment.first_block = static_cast<uint32_t>(model_.blocks.size());
      decode_blocks(vm, dict, segment.address);
      segment.block_count = static_cast<uint32_t>(model_.blocks.size() - segment.first_block);
      vm.charge_decoded(sizeof(Segment));
      model_.segments.push_back(segment);
    }
  }

  // A segment dict's own fields into `segment` (its blocks are decode_blocks'):
  // false when it is malformed (a device out of range, an implausible size,
  // sizes past the segments' budget).
  bool read_segment(Vm& vm, const Value& dict, Segment& segment) {
    std::optional<int64_t> device = as_i64(*or_none(vm.find(dict, "device")));
    if (vm.find(dict, "device") != nullptr && (!device || *device < 0 || *device > kMaxDevice)) {
      return false;
    }
    if (!plausible_sizes(vm, dict,
                         {"total_size", "allocated_size", "active_size", "requested_size"})) {
      return false;
    }
    segment.device = static_cast<int>(device.value_or(0));
    segment.address = u64_field(vm, dict, "address");
    segment.total_size = u64_field(vm, dict, "total_size");
    segment.allocated_size = u64_field(vm, dict, "allocated_size");
    segment.active_size = u64_field(vm, dict, "active_size", segment.allocated_size);
    segment.requested_size = u64_field(vm, dict, "requested_size");
    if (!segment_bytes_.take(segment.total_size + segment.allocated_size + segment.active_size +
                             segment.requested_size)) {
      return false;
    }
    segment.stream = u64_field(vm, dict, "stream");
    if (const Value* type = vm.find(dict, "segment_type"); type && type->kind == Kind::kStr) {
      segment.segment_type = intern_text(vm.view(*type));
    }
    std::vector<Value> pool = list_items(vm, *or_none(vm.find(dict, "segment_pool_id")));
    if (pool.size() == 2) {
      segment.pool_id_first = as_i64(vm.resolve(pool[0])).value_or(0);
      segment.pool_id_second = as_i64(vm.resolve(pool[1])).value_or(0);
    }
    if (const Value* expandable = vm.find(dict, "is_expandable")) {
      segment.is_expandable = expandable->kind == Kind::kBool && expandable->payload != 0;
    }
    if (const Value* frames = vm.find(dict, "frames"); frames != nullptr && stacks_) {
      segment.stack = stack_of(vm, *frames);
    }
    return true;
  }

  // The blocks of a segment dict, appended to model_.blocks (a malformed one
  // counted and left out). PyTorch 2.0 writes no block address: the blocks
  // tile the segment in order from `segment_address`.
  void decode_blocks(Vm& vm, const Value& dict, uint64_t segment_address) {
    uint64_t legacy_offset = segment_address;
    for (const Value& raw_block : list_items(vm, *or_none(vm.find(dict, "blocks")))) {
      Value block_dict = vm.resolve(raw_block);
      if (block_dict.kind != Kind::kDict) continue;
      if (!plausible_sizes(vm, block_dict, {"size", "requested_size"})) {
        ++model_.anomalies.malformed_blocks;
        continue;
      }
      Block block;
      block.size = u64_field(vm, block_dict, "size");
      block.requested_size = u64_field(vm, block_dict, "requested_size");
      if (!block_bytes_.take(block.size + block.requested_size)) {
        ++model_.anomalies.malformed_blocks;
        continue;
      }
      const Value* address = vm.find(block_dict, "address");
      const Value* frames = vm.find(block_dict, "frames");
      if (address == nullptr) {
        // PyTorch 2.0: no address; blocks tile the segment in order, and the
        // frames live in the newest entry of a `history` list.
        model_.legacy_block_history = true;
        block.address = legacy_offset;
        std::vector<Value> history = list_items(vm, *or_none(vm.find(block_dict, "history")));
        if (!history.empty() && frames == nullptr) {
          Value newest = vm.resolve(history.back());
          if (newest.kind == Kind::kDict) frames = vm.find(newest, "frames");
        }
      } else {
        block.address = as_u64(*address).value_or(0);
      }
      legacy_offset += block.size;
      if (const Value* state = vm.find(block_dict, "state"); state && state->kind == Kind::kStr) {
        std::string_view text = vm.view(*state);
        block.state = text == "active_allocated"      ? BlockState::kActiveAllocated
                      : text == "active_pending_free" ? BlockState::kActivePendingFree
                      : text == "inactive"            ? BlockState::kInactive
                                                      : BlockState::kUnknown;
      }
      if (frames != nullptr && stacks_) block.stack = stack_of(vm, *frames);
      vm.charge_decoded(sizeof(Block));
      model_.blocks.push_back(block);
    }
  }

  static bool is_trace_entry(const Value& item) {
    return item.is_external(kEventTag) || item.is_external(kRejectedTag) ||
           (item.kind == Kind::kExternalRange &&
            (item.flags == kEventTag || item.flags == kRejectedTag));
  }

  void decode_traces(Vm& vm, Value raw) {
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> ranges;
    std::span<const Value> device_lists = list_view(vm, raw);
    // Trace entries right in device_traces (a hand-made or flattened file):
    // read the whole list as device 0's trace, and say so.
    const bool flat = std::any_of(device_lists.begin(), device_lists.end(), is_trace_entry);
    model_.anomalies.flat_device_traces = flat;
    const Value whole_list = vm.resolve(raw);
    std::span<const Value> per_device =
        flat ? std::span<const Value>(&whole_list, 1) : device_lists;
    for (const Value& device_list : per_device) {
      auto& device_ranges = ranges.emplace_back();
      if (!flat && vm.resolve(device_list).kind != Kind::kList &&
          vm.resolve(device_list).kind != Kind::kTuple) {
        ++model_.anomalies.malformed_entries;  // a device's trace that is no list
        continue;
      }
      for (const Value& entry : list_view(vm, device_list)) {
        if (entry.kind == Kind::kExternalRange && entry.flags == kEventTag) {
          vm.charge_decoded(sizeof(device_ranges.back()));
          device_ranges.emplace_back(entry.payload, entry.payload + entry.size);
        } else if (entry.is_external(kEventTag)) {  // a shared entry, via the memo
          vm.charge_decoded(sizeof(device_ranges.back()));
          device_ranges.emplace_back(entry.payload, entry.payload + 1);
        } else if (entry.is_external(kRejectedTag) ||
                   (entry.kind == Kind::kExternalRange && entry.flags == kRejectedTag)) {
          // counted when it was rejected
        } else {
          ++model_.anomalies.malformed_entries;
        }
      }
    }
    // The usual case: device 0's entries, then device 1's, ... each one run.
    uint64_t expected = 0;
    uint64_t listed = 0;  // rows once each device's entries are contiguous
    bool in_order = true;
    for (const auto& device_ranges : ranges) {
      for (const auto& [begin, end] : device_ranges) {
        in_order = in_order && begin == expected;
        expected = end;
        listed += end - begin;
      }
    }
    in_order = in_order && expected == model_.events.count();
    if (!in_order) {
      // A shared entry becomes a row per reference: the rows reordered (and
      // their order) are the model's too, charged before they are made.
      vm.charge_decoded(listed * (kRowBytes + sizeof(uint64_t)));
      reorder_events(ranges);
    }
    uint64_t next = 0;
    for (size_t device = 0; device < ranges.size(); ++device) {
      uint64_t count = 0;
      for (const auto& [begin, end] : ranges[device]) count += end - begin;
      model_.devices.push_back(DeviceTrace{static_cast<int>(device), next, next + count});
      next += count;
    }
  }

  // Rebuilds the columns so that each device's entries are contiguous (only
  // for unusual files: shared entries, or entries outside device_traces).
  void reorder_events(const std::vector<std::vector<std::pair<uint64_t, uint64_t>>>& ranges) {
    if (listener_ != nullptr) {  // the rows it was given go
      listener_->columns_moving();
      listener_ = nullptr;
    }
    std::vector<uint64_t> order;
    for (const auto& device_ranges : ranges) {
      for (const auto& [begin, end] : device_ranges) {
        for (uint64_t i = begin; i < end; ++i) order.push_back(i);
      }
    }
    EventColumns& old = model_.events;
    EventColumns fresh;
    fresh.reserve(order.size());
    fresh.entries_carry_pool_id = old.entries_carry_pool_id;
    for (uint64_t i = 0; i < order.size(); ++i) {
      uint64_t from = order[i];
      fresh.action.push_back(old.action[from]);
      fresh.addr.push_back(old.addr[from]);
      fresh.size.push_back(old.size[from]);
      fresh.stream.push_back(old.stream[from]);
      fresh.time_us.push_back(old.time_us[from]);
      fresh.stack.push_back(old.stack[from]);
      if (auto it = old.other_action.find(from); it != old.other_action.end()) {
        fresh.other_action.emplace(i, it->second);
      }
      for (auto [from_map, to_map] : {std::pair{&old.category, &fresh.category},
                                      std::pair{&old.user_metadata, &fresh.user_metadata},
                                      std::pair{&old.compile_context, &fresh.compile_context}}) {
        if (auto it = from_map->find(from); it != from_map->end()) to_map->emplace(i, it->second);
      }
      if (auto it = old.device_free.find(from); it != old.device_free.end()) {
        fresh.device_free.emplace(i, it->second);
      }
      if (auto it = old.pool_id.find(from); it != old.pool_id.end()) {
        fresh.pool_id.emplace(i, it->second);
      }
      if (old.without_addr.contains(from)) fresh.without_addr.insert(i);
    }
    model_.events = std::move(fresh);
  }

  void decode_annotations(Vm& vm, Value raw) {
    for (const Value& item : list_items(vm, raw)) {
      Value dict = vm.resolve(item);
      const Value* name = dict.kind == Kind::kDict ? vm.find(dict, "name") : nullptr;
      if (name == nullptr || name->kind != Kind::kStr) {
        ++model_.anomalies.malformed_annotations;
        continue;
      }
      Annotation note;
      note.name = intern_text(vm.view(*name));
      if (const Value* stage = vm.find(dict, "stage"); stage && stage->kind == Kind::kStr) {
        std::string_view text = vm.view(*stage);
        note.stage = text == "START" ? Stage::kStart : text == "END" ? Stage::kEnd : Stage::kOther;
      }
      std::optional<int64_t> device = as_i64(*or_none(vm.find(dict, "device")));
      std::optional<int64_t> time = as_i64(*or_none(vm.find(dict, "time_us")));
      if ((device && (*device < 0 || *device > kMaxDevice)) ||
          (time && (*time < 0 || *time >= kMaxTimeUs))) {
        ++model_.anomalies.malformed_annotations;
        continue;
      }
      note.device = static_cast<int>(device.value_or(0));
      note.time_us = time.value_or(0);
      model_.annotations.push_back(note);
    }
  }

  static const Value* or_none(const Value* value) {
    static const Value kNoneValue{Kind::kNone, 0, 0, 0};
    return value != nullptr ? value : &kNoneValue;
  }

  struct KeySlot {
    Value key;
    EntryKey id = EntryKey::kOther;
  };
  // A row of the event columns, as charged to the VM's memory bound (action,
  // address, size, stream, time, stack, and a little of the maps).
  static constexpr uint64_t kRowBytes = 48;
  // Rows handed to the listener at a time: its thread wakes a few hundred
  // times per million entries.
  static constexpr uint64_t kRowsPerHandover = 4096;
  bool flat_;
  bool stacks_ = true;  // segments' and blocks' frames interned (not for the listener's copy)
  ReadListener* listener_ = nullptr;
  uint64_t publish_limit_ = 0;  // rows the columns hold without moving
  // Interns a string of the pickle. A long one is interned once per place
  // in the input: the memo hands the same value to every entry that shares
  // it (one 1 MiB user_metadata named by 100k entries was hashed 100k times),
  // and a value's offset and length name its bytes for the whole read.
  StringId intern_view(const Vm& vm, const Value& text) {
    if (text.size < kViewCacheMinBytes) return intern_text(vm.view(text));
    const auto [at, added] = view_ids_.try_emplace(
        std::pair{text.payload, (uint64_t{text.flags} << 32) | text.size}, StringId{});
    if (added) {
      at->second = intern_text(vm.view(text));
    } else if (text.size > kMaxStringBytes) {
      ++model_.anomalies.truncated_strings;  // as often as without the cache
    }
    return at->second;
  }
  static constexpr uint32_t kViewCacheMinBytes = 256;

  // Interns `text` into the model, cut to kMaxStringBytes (counted).
  StringId intern_text(std::string_view text) {
    if (text.size() > kMaxStringBytes) [[unlikely]] {
      ++model_.anomalies.truncated_strings;
      text = utf8_prefix(text, kMaxStringBytes);
    }
    return model_.strings.intern(text);
  }

  Snapshot& model_;
  std::array<KeySlot, 16> key_slots_{};
  std::vector<FrameId> scratch_frames_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, StringId> view_ids_;  // see intern_view
  ByteBudget entry_bytes_;
  ByteBudget segment_bytes_;
  ByteBudget block_bytes_;
};

}  // namespace

namespace {

// The listener hears the read end however it ends (and, when the read
// fails, that the rows it was given go with the model).
class ReadEnding {
 public:
  explicit ReadEnding(ReadListener* listener) : listener_(listener) {}
  ReadEnding(const ReadEnding&) = delete;
  ReadEnding& operator=(const ReadEnding&) = delete;
  ~ReadEnding() {
    if (listener_ == nullptr) return;
    if (!whole_) listener_->columns_moving();
    listener_->read_ended();
  }
  void whole() { whole_ = true; }

 private:
  ReadListener* listener_;
  bool whole_ = false;
};

}  // namespace

Snapshot decode_snapshot(InputBuffer& input, const LoadOptions& options, EntryReading reading) {
  Snapshot model;
  model.file_size = input.file_size();
  model.compression = input.compression() == Compression::kGzip   ? "gzip"
                      : input.compression() == Compression::kZstd ? "zstd"
                                                                  : "none";
  SnapshotDecoder decoder(model, reading != EntryReading::kGenericOnly);
  pickle::VmOptions vm_options;
  vm_options.allow_objects = options.allow_objects;
  vm_options.observer = &decoder;
  // A compressed file is read as it inflates: the total is known once it
  // has (0 until then: progress without a percentage).
  vm_options.on_progress = [&input, &options](uint64_t offset) {
    input.release_before(offset);
    if (options.on_progress) options.on_progress(offset, input.streaming() ? 0 : input.size());
  };
  // (Only slow paths call it: for a plain file, it returns what is there.)
  vm_options.more_input = [&input](uint64_t end) { return input.wait_for(end); };
  // An inflated pickle is memory of its own, as large as the plain file:
  // freed behind the reader, it never is resident whole (the VM then copies
  // the few strings it keeps; a snapshot's are memoized keys and frames).
  if (input.inflated()) {
    vm_options.release_before = [&input](uint64_t offset) { input.discard_before(offset); };
  } else if (reading == EntryReading::kFlatScrubbed) {
    vm_options.progress_interval = 1;
    vm_options.release_before = [&input, scrubbed = uint64_t{0}](uint64_t offset) mutable {
      const std::span<const uint8_t> bytes = input.available();
      offset = std::min<uint64_t>(offset, bytes.size());
      if (offset <= scrubbed) return;
      // The buffer is from_memory's own vector (see EntryReading).
      std::fill(const_cast<uint8_t*>(bytes.data()) + scrubbed,
                const_cast<uint8_t*>(bytes.data()) + offset, uint8_t{0});
      scrubbed = offset;
    };
  }
  uint64_t expected = input.available().size();
  if (input.streaming()) {
    // Snapshot pickles deflate about 8-15x; reservations are address space only.
    constexpr uint64_t kExpectedRatio = 16;
    expected = std::max(expected, input.file_size() * kExpectedRatio);
    vm_options.expected_input_bytes = expected;
  }
  // Columns grow to the entry count; reserving address space up front avoids
  // the copy-on-growth peak. Untouched capacity costs no resident memory.
  model.events.reserve(std::min<uint64_t>(expected / 24, uint64_t{1} << 28));
  ReadEnding ending(options.listener);
  if (options.listener != nullptr) decoder.listen(options.listener);
  pickle::Vm vm(input.available(), vm_options);
  try {
    Value root = vm.run();
    decoder.publish_all();
    model.pickle_size = input.size();  // all of it inflated (an error after STOP shows here)
    model.anomalies.bytes_after_stop =
        model.pickle_size - std::min(vm.end_offset(), model.pickle_size);
    model.anomalies.bytes_after_compressed = input.ignored_after_stream();
    if (options.on_progress) options.on_progress(model.pickle_size, model.pickle_size);
    model.pickle_protocol = vm.protocol();
    decoder.decode_root(vm, root);
  } catch (const Error&) {
    // Zeros where a shrinking file's pages were make any error; say why.
    input.throw_if_changed();
    throw;
  }
  input.throw_if_changed();
  ending.whole();
  return model;
}

namespace {

InputLimits input_limits(const LoadOptions& options) {
  InputLimits limits;
  limits.max_bytes = options.max_input_bytes;
  limits.check_start = pickle::check_pickle_start;
  return limits;
}

}  // namespace

Snapshot load_snapshot(const std::string& path, const LoadOptions& options) {
  try {
    InputBuffer input = open_input(path, input_limits(options));
    return decode_snapshot(input, options);
  } catch (const Error& error) {
    throw error.in_file(path == "-" ? "<stdin>" : path);
  }
}

Snapshot load_snapshot_bytes(std::span<const uint8_t> bytes, const std::string& name,
                             const LoadOptions& options) {
  try {
    InputBuffer input = open_memory(bytes, name, input_limits(options));
    return decode_snapshot(input, options);
  } catch (const Error& error) {
    throw error.in_file(name);
  }
}

}  // namespace memsnap
