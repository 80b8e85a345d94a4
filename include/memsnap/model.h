// The snapshot model: typed, interned, columnar, per device. Decoders write it
// once; everything after reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

namespace memsnap {

// Typed ids into the model's tables; 0 always means "none".
template <typename Tag>
struct Id {
  uint32_t value = 0;
  [[nodiscard]] bool valid() const { return value != 0; }
  friend bool operator==(Id a, Id b) { return a.value == b.value; }
  friend bool operator<(Id a, Id b) { return a.value < b.value; }
  template <typename H>
  friend H AbslHashValue(H state, Id id) {
    return H::combine(std::move(state), id.value);
  }
};
using StringId = Id<struct StringTag>;
using FrameId = Id<struct FrameTag>;
using StackId = Id<struct StackTag>;
static_assert(sizeof(FrameId) == sizeof(uint32_t), "stacks are hashed as raw id bytes");

class StringTable {
 public:
  StringTable();
  StringId intern(std::string_view text);
  [[nodiscard]] std::string_view get(StringId id) const { return strings_[id.value]; }
  [[nodiscard]] size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: interned views stay valid as it grows
  absl::flat_hash_map<std::string_view, StringId> index_;
};

struct Frame {
  StringId name;
  StringId filename;
  int64_t line = 0;
  // FX provenance: the frame's `fx_original_trace` (the traceback of the model
  // line a torch.compile'd node came from), when the snapshot was augmented
  // with FX traces; the empty string otherwise.
  StringId fx_original_trace;
};

class FrameTable {
 public:
  FrameTable();
  FrameId intern(const Frame& frame);
  [[nodiscard]] const Frame& get(FrameId id) const { return frames_[id.value]; }
  [[nodiscard]] size_t size() const { return frames_.size(); }

 private:
  struct Key {
    uint32_t name, filename;
    int64_t line;
    uint32_t fx_original_trace;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H state, const Key& key) {
      return H::combine(std::move(state), key.name, key.filename, key.line, key.fx_original_trace);
    }
  };
  std::vector<Frame> frames_;
  absl::flat_hash_map<Key, FrameId> index_;
};

// Stacks are frame lists, innermost first, interned by content.
class StackTable {
 public:
  StackTable();
  StackTable(const StackTable&) = delete;
  StackTable& operator=(const StackTable&) = delete;
  StackTable(StackTable&& other) noexcept;
  StackTable& operator=(StackTable&& other) noexcept;
  StackId intern(std::span<const FrameId> frames);
  [[nodiscard]] std::span<const FrameId> get(StackId id) const;
  [[nodiscard]] size_t size() const { return offsets_.size() - 1; }

 private:
  // The index holds stack ids and hashes/compares the frames they point to,
  // so a lookup needs no key allocation (transparent lookup by span).
  struct Hash {
    using is_transparent = void;
    const StackTable* table;
    size_t operator()(std::span<const FrameId> frames) const;
    size_t operator()(uint32_t id) const { return (*this)(table->get(StackId{id})); }
  };
  struct Eq {
    using is_transparent = void;
    const StackTable* table;
    static bool same(std::span<const FrameId> a, std::span<const FrameId> b);
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t a, std::span<const FrameId> b) const {
      return same(table->get(StackId{a}), b);
    }
    bool operator()(std::span<const FrameId> a, uint32_t b) const {
      return same(a, table->get(StackId{b}));
    }
  };
  std::vector<FrameId> frames_;
  std::vector<uint64_t> offsets_;  // stack i is frames_[offsets_[i-1], offsets_[i])
  absl::flat_hash_set<uint32_t, Hash, Eq> index_;
};

enum class Action : uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kSnapshot,
  kOom,
  kOther,  // anything else; its name is in EventColumns::other_action
};
constexpr int kActionCount = 10;
std::string_view action_name(Action action);
std::optional<Action> parse_action(std::string_view name);

// Trace entries of all devices, in file order, one column per field.
// A memory pool: (0, 0) is the allocator's default pool; others are CUDA
// graphs' private pools or user MemPools.
struct PoolId {
  int64_t first = 0;
  int64_t second = 0;
  [[nodiscard]] bool is_default() const { return first == 0 && second == 0; }
};

struct EventColumns {
  std::vector<Action> action;
  std::vector<uint64_t> addr;  // two's complement bit pattern; 0 when absent
  std::vector<uint64_t> size;
  std::vector<uint64_t> stream;  // cudaStream_t bit pattern
  std::vector<int64_t> time_us;  // 0 when absent
  std::vector<StackId> stack;
  // Sparse extras, keyed by event index.
  absl::flat_hash_map<uint64_t, StringId> other_action;
  // The entry's own `category` (written by torch.profiler's memory profiler,
  // e.g. "activation"), for the entries that carry one.
  absl::flat_hash_map<uint64_t, StringId> category;
  // Recent PyTorch: the string set with torch.cuda.memory._set_memory_metadata
  // and the torch.compile context active at the allocation, when present.
  absl::flat_hash_map<uint64_t, StringId> user_metadata;
  absl::flat_hash_map<uint64_t, StringId> compile_context;
  // The entry's `pool_id` (recent PyTorch), kept only where it is not the
  // default pool (0, 0), so files that write it on every entry pay nothing.
  absl::flat_hash_map<uint64_t, PoolId> pool_id;
  bool entries_carry_pool_id = false;                   // some entry had a readable pool_id
  absl::flat_hash_map<uint64_t, uint64_t> device_free;  // oom entries
  absl::flat_hash_set<uint64_t> without_addr;           // entries that had no addr key

  [[nodiscard]] size_t count() const { return action.size(); }
  void reserve(size_t n);
};

// One device's trace: a contiguous range of the model's event columns.
struct DeviceTrace {
  int device = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  [[nodiscard]] uint64_t count() const { return end - begin; }
};

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive, kUnknown };

struct Block {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;
  BlockState state = BlockState::kUnknown;
  StackId stack;
};

struct Segment {
  int device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t requested_size = 0;
  uint64_t stream = 0;
  StringId segment_type;
  int64_t pool_id_first = 0;
  int64_t pool_id_second = 0;
  bool is_expandable = false;
  StackId stack;
  uint32_t first_block = 0;
  uint32_t block_count = 0;
};

enum class Stage : uint8_t { kStart, kEnd, kOther };

struct Annotation {
  StringId name;
  Stage stage = Stage::kOther;
  int device = 0;
  int64_t time_us = 0;
};

// Anomalies the decoder counted and skipped rather than failing on.
// A top-level field of the snapshot dict that has the wrong type and was
// left out: {"segments", "a str"}.
struct MalformedField {
  std::string field;
  std::string found;  // what the file holds there, with its article
};

struct DecodeAnomalies {
  std::vector<MalformedField> malformed_fields;
  // device_traces held trace entries directly instead of one list per
  // device: they were read as device 0's trace.
  bool flat_device_traces = false;
  uint64_t malformed_entries = 0;  // trace entries without a usable action/size
  uint64_t malformed_segments = 0;
  uint64_t malformed_annotations = 0;
  uint64_t malformed_blocks = 0;  // blocks with implausible sizes, left out of their segment
  uint64_t unusable_times = 0;    // time_us that is no timestamp (float, negative, huge): kept as 0
  // Strings (frame names, file names, annotations, metadata, settings) longer
  // than kMaxStringBytes, kept cut to it.
  uint64_t truncated_strings = 0;
  // Bytes after the pickle's STOP opcode (not read), and bytes after the
  // last gzip member that start no member (ignored, as gunzip does): a file
  // appended to, or two dumps in one.
  uint64_t bytes_after_stop = 0;
  uint64_t bytes_after_compressed = 0;
};

// The longest string the model keeps (1 MiB): a frame name or setting longer
// than that is cut, at a character's start, and counted in
// DecodeAnomalies::truncated_strings. Real ones are under a few KB; a 1 GiB
// name in a 33 KB .zst took 6 GiB to print.
inline constexpr size_t kMaxStringBytes = size_t{1} << 20;

// The allocator_settings dict, decoded once: the fields memsnap's analyses
// use, typed, and the whole dict as text for display and comparison.
struct AllocatorSettings {
  // The dict as JSON text (tuples as arrays, keys as strings, invalid UTF-8
  // replaced); empty when the file has none.
  std::string json;
  std::optional<bool> expandable_segments;
  // Blocks at least this large are never split; unset: unlimited (absent,
  // -1, or not positive).
  std::optional<uint64_t> max_split_size;
  std::optional<double> garbage_collection_threshold;
  // roundup_power2_divisions: one value for every size, or per size interval
  // as (interval start in MiB, a power of two; divisions).
  std::optional<uint64_t> roundup_power2_divisions;
  std::vector<std::pair<uint64_t, uint64_t>> roundup_power2_divisions_by_mib;
  // The settings above whose value is of another type (expandable_segments
  // as the string 'yes'): key and value as JSON text, read as if absent.
  std::vector<std::pair<std::string, std::string>> unread;
};

struct Snapshot {
  StringTable strings;
  FrameTable frames;
  StackTable stacks;
  EventColumns events;
  std::vector<DeviceTrace> devices;  // indexed by position in device_traces
  std::vector<Segment> segments;
  std::vector<Block> blocks;
  std::vector<Annotation> annotations;
  AllocatorSettings allocator_settings;
  bool top_level_list = false;        // torch.cuda.memory_snapshot() pickled
  bool legacy_block_history = false;  // PyTorch 2.0 blocks without address
  int pickle_protocol = 0;
  uint64_t file_size = 0;            // on disk
  uint64_t pickle_size = 0;          // after decompression
  std::string compression = "none";  // "gzip", "zstd"
  DecodeAnomalies anomalies;

  [[nodiscard]] std::span<const Block> blocks_of(const Segment& segment) const {
    return std::span<const Block>(blocks).subspan(segment.first_block, segment.block_count);
  }
  // Ordinals that have trace events or segments, ascending.
  [[nodiscard]] std::vector<int> devices_in_use() const;
  // The device a report is about when none is asked for, the one rule every
  // command follows: the first device whose trace has an oom entry, else the
  // one with the most trace entries, else the one whose segments reserve the
  // most (ties: the lower ordinal); 0 when the file holds no data.
  [[nodiscard]] int default_device() const;
  // Devices whose trace has an oom entry, ascending.
  [[nodiscard]] std::vector<int> devices_with_oom() const;
  // Entries of `trace` with this action.
  [[nodiscard]] uint64_t count_of(const DeviceTrace& trace, Action action) const;
  [[nodiscard]] const DeviceTrace* trace_of(int device) const;
  [[nodiscard]] std::string_view action_label(uint64_t event_index) const;
};

}  // namespace memsnap
