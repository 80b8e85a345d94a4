// Unit tests of the snapshot decoder (values -> model) on pickles written in
// the test: the model's devices, event columns, segments and blocks, what is
// counted rather than refused, and the refusals with their messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/core/device_choice.h"
#include "expect_error.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "pickle_writer.h"
#include "snapshot/decoder.h"

namespace memsnap {
namespace {

using testing::PickleWriter;
using testing::Py;

Snapshot decode(const Py& root, EntryReading reading = EntryReading::kFlat,
                bool allow_objects = false) {
  std::string bytes = PickleWriter::write(root);
  InputBuffer input =
      InputBuffer::from_memory(std::vector<uint8_t>(bytes.begin(), bytes.end()), "test");
  LoadOptions options;
  options.allow_objects = allow_objects;
  return decode_snapshot(input, options, reading);
}

Py frame(const std::string& name, const std::string& file, int64_t line) {
  return Py::dict({{"name", Py::str(name)}, {"filename", Py::str(file)}, {"line", Py::num(line)}});
}

Py entry(const std::string& action, int64_t addr, int64_t size, int64_t time_us,
         Py frames = Py::list({}), int64_t stream = 0) {
  return Py::dict({{"action", Py::str(action)},
                   {"addr", Py::num(addr)},
                   {"size", Py::num(size)},
                   {"stream", Py::num(stream)},
                   {"time_us", Py::num(time_us)},
                   {"frames", std::move(frames)}});
}

Py traces(std::vector<Py> per_device) {
  return Py::dict({{"segments", Py::list({})}, {"device_traces", Py::list(std::move(per_device))}});
}

std::vector<Action> actions_of(const Snapshot& s) {
  return s.events.action;
}

TEST(Decoder, DevicesAreContiguousRangesOfTheColumnsInFileOrder) {
  const Snapshot s = decode(traces({
      Py::list({entry("alloc", 0x1000, 512, 10, Py::list({}), 7),
                entry("free_requested", 0x1000, 512, 20),
                entry("free_completed", 0x1000, 512, 30)}),
      Py::list(
          {entry("segment_alloc", 0x20000000, 2 << 20, 5), entry("alloc", 0x20000000, 100, 6)}),
  }));
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, 0);
  EXPECT_EQ(s.devices[0].begin, 0u);
  EXPECT_EQ(s.devices[0].end, 3u);
  EXPECT_EQ(s.devices[1].device, 1);
  EXPECT_EQ(s.devices[1].begin, 3u);
  EXPECT_EQ(s.devices[1].end, 5u);
  // Every column has one row per entry.
  const size_t n = s.events.count();
  ASSERT_EQ(n, 5u);
  EXPECT_EQ(s.events.addr.size(), n);
  EXPECT_EQ(s.events.size.size(), n);
  EXPECT_EQ(s.events.stream.size(), n);
  EXPECT_EQ(s.events.time_us.size(), n);
  EXPECT_EQ(s.events.stack.size(), n);
  EXPECT_EQ(actions_of(s),
            (std::vector<Action>{Action::kAlloc, Action::kFreeRequested, Action::kFreeCompleted,
                                 Action::kSegmentAlloc, Action::kAlloc}));
  EXPECT_EQ(s.events.addr, (std::vector<uint64_t>{0x1000, 0x1000, 0x1000, 0x20000000, 0x20000000}));
  EXPECT_EQ(s.events.size, (std::vector<uint64_t>{512, 512, 512, 2 << 20, 100}));
  EXPECT_EQ(s.events.time_us, (std::vector<int64_t>{10, 20, 30, 5, 6}));
  EXPECT_EQ(s.events.stream[0], 7u);
  EXPECT_EQ(s.devices_in_use(), (std::vector<int>{0, 1}));
  EXPECT_EQ(choose_device(s, std::nullopt).device, 0);
  ASSERT_NE(s.trace_of(1), nullptr);
  EXPECT_EQ(s.trace_of(1)->count(), 2u);
  EXPECT_EQ(s.pickle_protocol, 2);
  EXPECT_FALSE(s.top_level_list);
  EXPECT_EQ(s.anomalies.malformed_entries, 0u);
}

TEST(Decoder, DefaultDeviceIsTheFirstWithEvents) {
  const Snapshot s =
      decode(traces({Py::list({}), Py::list({}), Py::list({entry("alloc", 0x10, 8, 1)})}));
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.devices[2].count(), 1u);
  EXPECT_EQ(choose_device(s, std::nullopt).device, 2);
  EXPECT_EQ(s.devices_in_use(), (std::vector<int>{2}));
}

TEST(Decoder, UnknownActionsAreKeptAsOtherAndNamed) {
  const Snapshot s = decode(traces({Py::list({
      entry("alloc", 0x10, 8, 1),
      entry("annotate", 0, 0, 2),
      entry("some_future_action", 0, 0, 3),
      entry("annotate", 0, 0, 4),
  })}));
  ASSERT_EQ(s.events.count(), 4u);
  EXPECT_EQ(actions_of(s),
            (std::vector<Action>{Action::kAlloc, Action::kOther, Action::kOther, Action::kOther}));
  // One name per unknown entry, none for the known one.
  EXPECT_EQ(s.events.other_action.size(), 3u);
  EXPECT_FALSE(s.events.other_action.contains(0));
  EXPECT_EQ(s.action_label(0), "alloc");
  EXPECT_EQ(s.action_label(1), "annotate");
  EXPECT_EQ(s.action_label(2), "some_future_action");
  // Counted, not malformed: they are entries the analysis skips.
  EXPECT_EQ(s.anomalies.malformed_entries, 0u);
}

TEST(Decoder, MalformedEntriesAreCountedAndLeftOutOfTheColumns) {
  Py bad_size =
      Py::dict({{"action", Py::str("alloc")}, {"addr", Py::num(0x40)}, {"size", Py::str("big")}});
  Py negative = entry("alloc", 0x80, -512, 3);
  Py bad_addr =
      Py::dict({{"action", Py::str("alloc")}, {"addr", Py::str("0x40")}, {"size", Py::num(8)}});
  Py huge = entry("alloc", 0x100, int64_t{1} << 50, 4);  // past 16 TiB: no GPU's memory
  const Snapshot s = decode(
      traces({Py::list({entry("alloc", 0x10, 8, 1), std::move(bad_size), std::move(negative),
                        std::move(bad_addr), std::move(huge), entry("alloc", 0x20, 16, 5)})}));
  EXPECT_EQ(s.anomalies.malformed_entries, 4u);
  ASSERT_EQ(s.events.count(), 2u);
  EXPECT_EQ(s.events.addr, (std::vector<uint64_t>{0x10, 0x20}));
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].count(), 2u);
}

TEST(Decoder, AbsentFieldsAndTimesThatAreNoTimestamps) {
  Py no_time =
      Py::dict({{"action", Py::str("alloc")}, {"addr", Py::num(0x10)}, {"size", Py::num(8)}});
  Py no_addr = Py::dict({{"action", Py::str("oom")},
                         {"size", Py::num(1 << 30)},
                         {"device_free", Py::num(1 << 20)},
                         {"time_us", Py::num(9)}});
  const Snapshot s = decode(
      traces({Py::list({std::move(no_time), entry("alloc", 0x20, 8, -5), std::move(no_addr)})}));
  ASSERT_EQ(s.events.count(), 3u);
  EXPECT_EQ(s.events.time_us, (std::vector<int64_t>{0, 0, 9}));
  // A missing time_us is no anomaly (files before PyTorch 2.2); a negative one is.
  EXPECT_EQ(s.anomalies.unusable_times, 1u);
  EXPECT_TRUE(s.events.without_addr.contains(2));
  EXPECT_FALSE(s.events.without_addr.contains(0));
  EXPECT_EQ(s.events.addr[2], 0u);
  EXPECT_EQ(s.events.action[2], Action::kOom);
  ASSERT_TRUE(s.events.device_free.contains(2));
  EXPECT_EQ(s.events.device_free.at(2), uint64_t{1} << 20);
}

TEST(Decoder, PoolIdsOnlyWhereNotTheDefaultPool) {
  auto with_pool = [](int64_t addr, int64_t a, int64_t b) {
    return Py::dict({{"action", Py::str("alloc")},
                     {"addr", Py::num(addr)},
                     {"size", Py::num(8)},
                     {"pool_id", Py::tuple({Py::num(a), Py::num(b)})}});
  };
  const Snapshot s = decode(traces({Py::list({with_pool(0x10, 0, 0), with_pool(0x20, 1, 2)})}));
  EXPECT_TRUE(s.events.entries_carry_pool_id);
  EXPECT_FALSE(s.events.pool_id.contains(0));
  ASSERT_TRUE(s.events.pool_id.contains(1));
  EXPECT_EQ(s.events.pool_id.at(1).first, 1);
  EXPECT_EQ(s.events.pool_id.at(1).second, 2);
}

TEST(Decoder, SharedAndEqualFramesInternToOneStack) {
  // The first entry memoizes its frame dicts and its frames list; the second
  // refers to the list, the third holds equal dicts of its own.
  Py shared = Py::list({std::move(frame("forward", "/w/model.py", 12)).memo(1),
                        std::move(frame("train", "/w/train.py", 40)).memo(2)})
                  .memo(3);
  const Snapshot s = decode(traces({Py::list({
      entry("alloc", 0x10, 8, 1, std::move(shared)),
      entry("alloc", 0x20, 8, 2, Py::get(3)),
      entry("alloc", 0x30, 8, 3,
            Py::list({frame("forward", "/w/model.py", 12), frame("train", "/w/train.py", 40)})),
      entry("alloc", 0x40, 8, 4, Py::list({Py::get(1)})),
  })}));
  ASSERT_EQ(s.events.count(), 4u);
  const StackId first = s.events.stack[0];
  ASSERT_TRUE(first.valid());
  EXPECT_EQ(s.events.stack[1], first);
  EXPECT_EQ(s.events.stack[2], first);
  EXPECT_NE(s.events.stack[3], first);
  std::span<const FrameId> frames = s.stacks.get(first);
  ASSERT_EQ(frames.size(), 2u);  // innermost first, as written
  EXPECT_EQ(s.strings.get(s.frames.get(frames[0]).name), "forward");
  EXPECT_EQ(s.strings.get(s.frames.get(frames[0]).filename), "/w/model.py");
  EXPECT_EQ(s.frames.get(frames[0]).line, 12);
  EXPECT_EQ(s.strings.get(s.frames.get(frames[1]).name), "train");
  std::span<const FrameId> inner = s.stacks.get(s.events.stack[3]);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0], frames[0]);  // the same frame dict (via the memo): the same frame
}

TEST(Decoder, SegmentsWithTheirBlocks) {
  auto block = [](int64_t address, int64_t size, int64_t requested, const std::string& state) {
    return Py::dict({{"address", Py::num(address)},
                     {"size", Py::num(size)},
                     {"requested_size", Py::num(requested)},
                     {"state", Py::str(state)},
                     {"frames", Py::list({frame("f", "/w/a.py", 1)})}});
  };
  Py large =
      Py::dict({{"device", Py::num(0)},
                {"address", Py::num(0x7f0000000000)},
                {"total_size", Py::num(20 << 20)},
                {"allocated_size", Py::num(4 << 20)},
                {"active_size", Py::num(6 << 20)},
                {"requested_size", Py::num(4000000)},
                {"stream", Py::num(3)},
                {"segment_type", Py::str("large")},
                {"segment_pool_id", Py::tuple({Py::num(1), Py::num(5)})},
                {"is_expandable", Py::boolean(true)},
                {"blocks", Py::list({
                               block(0x7f0000000000, 4 << 20, 4000000, "active_allocated"),
                               block(0x7f0000400000, 2 << 20, 2 << 20, "active_pending_free"),
                               block(0x7f0000600000, 14 << 20, 0, "inactive"),
                           })}});
  // No active_size: it falls back to allocated_size. Another device.
  Py small = Py::dict({{"device", Py::num(1)},
                       {"address", Py::num(0x10000)},
                       {"total_size", Py::num(2 << 20)},
                       {"allocated_size", Py::num(512)},
                       {"segment_type", Py::str("small")},
                       {"blocks", Py::list({block(0x10000, 512, 100, "active_allocated")})}});
  const Snapshot s =
      decode(Py::dict({{"segments", Py::list({std::move(large), std::move(small)})}}));
  ASSERT_EQ(s.segments.size(), 2u);
  const Segment& a = s.segments[0];
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.address, 0x7f0000000000u);
  EXPECT_EQ(a.total_size, 20u << 20);
  EXPECT_EQ(a.allocated_size, 4u << 20);
  EXPECT_EQ(a.active_size, 6u << 20);
  EXPECT_EQ(a.requested_size, 4000000u);
  EXPECT_EQ(a.stream, 3u);
  EXPECT_EQ(s.strings.get(a.segment_type), "large");
  EXPECT_EQ(a.pool_id_first, 1);
  EXPECT_EQ(a.pool_id_second, 5);
  EXPECT_TRUE(a.is_expandable);
  std::span<const Block> blocks = s.blocks_of(a);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[1].address, 0x7f0000400000u);
  EXPECT_EQ(blocks[0].state, BlockState::kActiveAllocated);
  EXPECT_EQ(blocks[1].state, BlockState::kActivePendingFree);
  EXPECT_EQ(blocks[2].state, BlockState::kInactive);
  EXPECT_EQ(blocks[0].requested_size, 4000000u);
  EXPECT_TRUE(blocks[0].stack.valid());
  uint64_t tiled = 0;
  for (const Block& b : blocks) tiled += b.size;
  EXPECT_EQ(tiled, a.total_size);
  const Segment& b = s.segments[1];
  EXPECT_EQ(b.device, 1);
  EXPECT_EQ(b.active_size, b.allocated_size);
  EXPECT_FALSE(b.is_expandable);
  ASSERT_EQ(s.blocks_of(b).size(), 1u);
  EXPECT_EQ(s.blocks_of(b)[0].address, 0x10000u);
  // No trace: the default device is the first with segments.
  EXPECT_TRUE(s.devices.empty());
  EXPECT_EQ(s.devices_in_use(), (std::vector<int>{0, 1}));
  EXPECT_EQ(choose_device(s, std::nullopt).device, 0);
  EXPECT_FALSE(s.legacy_block_history);
}

TEST(Decoder, LegacyBlocksWithoutAddressesTileTheirSegment) {
  // PyTorch 2.0: no block address, the frames in the newest history entry.
  auto block = [](int64_t size, const std::string& state, Py history) {
    return Py::dict(
        {{"size", Py::num(size)}, {"state", Py::str(state)}, {"history", std::move(history)}});
  };
  Py history = Py::list(
      {Py::dict({{"addr", Py::num(0)}, {"frames", Py::list({frame("old", "/w/a.py", 1)})}}),
       Py::dict({{"addr", Py::num(0)}, {"frames", Py::list({frame("new", "/w/a.py", 2)})}})});
  Py segment =
      Py::dict({{"device", Py::num(0)},
                {"address", Py::num(0x100000)},
                {"total_size", Py::num(2 << 20)},
                {"allocated_size", Py::num(1536)},
                {"blocks", Py::list({block(1024, "active_allocated", std::move(history)),
                                     block(512, "active_allocated", Py::list({})),
                                     block((2 << 20) - 1536, "inactive", Py::list({}))})}});
  const Snapshot s = decode(Py::dict({{"segments", Py::list({std::move(segment)})}}));
  EXPECT_TRUE(s.legacy_block_history);
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0].address, 0x100000u);
  EXPECT_EQ(s.blocks[1].address, 0x100000u + 1024);
  EXPECT_EQ(s.blocks[2].address, 0x100000u + 1536);
  ASSERT_TRUE(s.blocks[0].stack.valid());
  std::span<const FrameId> frames = s.stacks.get(s.blocks[0].stack);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(s.strings.get(s.frames.get(frames[0]).name), "new");
}

TEST(Decoder, TopLevelListIsASegmentsOnlySnapshot) {
  const Snapshot s = decode(Py::list({Py::dict({{"device", Py::num(3)},
                                                {"address", Py::num(0x1000)},
                                                {"total_size", Py::num(2 << 20)},
                                                {"allocated_size", Py::num(0)},
                                                {"blocks", Py::list({})}})}));
  EXPECT_TRUE(s.top_level_list);
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].device, 3);
  EXPECT_EQ(choose_device(s, std::nullopt).device, 3);
}

TEST(Decoder, AnnotationsAndAllocatorSettings) {
  auto note = [](Py name, const std::string& stage, int64_t device, int64_t time) {
    return Py::dict({{"name", std::move(name)},
                     {"stage", Py::str(stage)},
                     {"device", Py::num(device)},
                     {"time_us", Py::num(time)}});
  };
  Py root = Py::dict({
      {"segments", Py::list({})},
      {"device_traces", Py::list({Py::list({entry("alloc", 0x10, 8, 100)})})},
      {"external_annotations", Py::list({note(Py::str("ProfilerStep#1"), "START", 0, 90),
                                         note(Py::str("ProfilerStep#1"), "END", 0, 200),
                                         note(Py::num(5), "START", 0, 1),  // a name that is no str
                                         note(Py::str("x"), "START", -1, 1)})},
      {"allocator_settings",
       Py::dict({{"max_split_size", Py::num(-1)},
                 {"expandable_segments", Py::boolean(false)},
                 {"roundup_power2_divisions", Py::dict({{"1", Py::num(4)}})}})},
  });
  const Snapshot s = decode(root);
  ASSERT_EQ(s.annotations.size(), 2u);
  EXPECT_EQ(s.strings.get(s.annotations[0].name), "ProfilerStep#1");
  EXPECT_EQ(s.annotations[0].stage, Stage::kStart);
  EXPECT_EQ(s.annotations[1].stage, Stage::kEnd);
  EXPECT_EQ(s.annotations[1].time_us, 200);
  EXPECT_EQ(s.anomalies.malformed_annotations, 2u);
  EXPECT_FALSE(s.allocator_settings.max_split_size);  // -1: unlimited
  EXPECT_EQ(s.allocator_settings.expandable_segments, false);
  ASSERT_EQ(s.allocator_settings.roundup_power2_divisions_by_mib.size(), 1u);
  EXPECT_EQ(s.allocator_settings.roundup_power2_divisions_by_mib[0],
            (std::pair<uint64_t, uint64_t>{1, 4}));
  const auto settings = nlohmann::json::parse(s.allocator_settings.json);
  EXPECT_EQ(settings["max_split_size"], -1);
  EXPECT_EQ(settings["expandable_segments"], false);
  EXPECT_EQ(settings["roundup_power2_divisions"]["1"], 4);
}

TEST(Decoder, AFieldOfTheWrongTypeIsLeftOutAndNamed) {
  const Snapshot s =
      decode(Py::dict({{"segments", Py::list({})}, {"device_traces", Py::str("none")}}));
  ASSERT_EQ(s.anomalies.malformed_fields.size(), 1u);
  EXPECT_EQ(s.anomalies.malformed_fields[0].field, "device_traces");
  EXPECT_EQ(s.anomalies.malformed_fields[0].found, "a str");
  EXPECT_TRUE(s.devices.empty());
}

TEST(Decoder, EntriesRightInDeviceTracesAreDeviceZero) {
  const Snapshot s = decode(Py::dict(
      {{"device_traces", Py::list({entry("alloc", 0x10, 8, 1), entry("alloc", 0x20, 8, 2)})}}));
  EXPECT_TRUE(s.anomalies.flat_device_traces);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].count(), 2u);
}

// The flat fast path and the generic VM must build the same model; a rich
// file (shared frames, unknown actions, a malformed entry, pools, an OOM).
TEST(Decoder, FlatAndGenericReadingsBuildTheSameModel) {
  Py shared = Py::list({std::move(frame("f", "/w/a.py", 1)).memo(10)}).memo(11);
  Py root = traces({
      Py::list({entry("segment_alloc", 0x100000, 2 << 20, 1, std::move(shared)),
                entry("alloc", 0x100000, 700, 2, Py::get(11), 5),
                entry("annotate", 0, 0, 3, Py::list({Py::get(10), frame("g", "/w/b.py", 2)})),
                Py::dict({{"action", Py::str("alloc")}, {"size", Py::str("?")}}),
                Py::dict({{"action", Py::str("oom")},
                          {"size", Py::num(1 << 30)},
                          {"device_free", Py::num(12345)},
                          {"time_us", Py::num(4)}}),
                entry("free_completed", 0x100000, 700, 5, Py::get(11))}),
      Py::list({entry("alloc", 0x900000, 64, 6, Py::list({frame("h", "/w/c.py", 3)}))}),
  });
  const Snapshot flat = decode(root, EntryReading::kFlat);
  const Snapshot generic = decode(root, EntryReading::kGenericOnly);
  ASSERT_EQ(flat.events.count(), 6u);
  EXPECT_EQ(flat.events.action, generic.events.action);
  EXPECT_EQ(flat.events.addr, generic.events.addr);
  EXPECT_EQ(flat.events.size, generic.events.size);
  EXPECT_EQ(flat.events.stream, generic.events.stream);
  EXPECT_EQ(flat.events.time_us, generic.events.time_us);
  ASSERT_EQ(flat.devices.size(), generic.devices.size());
  for (size_t d = 0; d < flat.devices.size(); ++d) {
    EXPECT_EQ(flat.devices[d].begin, generic.devices[d].begin);
    EXPECT_EQ(flat.devices[d].end, generic.devices[d].end);
  }
  EXPECT_EQ(flat.anomalies.malformed_entries, 1u);
  EXPECT_EQ(generic.anomalies.malformed_entries, 1u);
  // Stacks by content: ids may differ, the frames they name may not.
  for (size_t i = 0; i < flat.events.count(); ++i) {
    auto render = [](const Snapshot& s, StackId id) {
      std::string out;
      for (FrameId f : s.stacks.get(id)) {
        out += std::string(s.strings.get(s.frames.get(f).name)) + "@" +
               std::string(s.strings.get(s.frames.get(f).filename)) + ";";
      }
      return out;
    };
    EXPECT_EQ(render(flat, flat.events.stack[i]), render(generic, generic.events.stack[i]))
        << "entry " << i;
    EXPECT_EQ(flat.action_label(i), generic.action_label(i));
  }
  EXPECT_EQ(flat.events.device_free.size(), 1u);
}

// The flat reader finds a cached frames list by the APPENDS byte that ends
// it, before scanning: memo slot 101 is that byte (0x65), so a candidate end
// falls inside a reference, and one list is the other's first reference.
// Each must read as the generic VM reads it.
TEST(Decoder, CachedFramesListsAreFoundByTheirEndNotByAnAppendsByteInAReference) {
  std::vector<Py> frames;
  for (int slot = 0; slot < 103; ++slot) {
    frames.push_back(frame("f" + std::to_string(slot), "/w/a.py", slot).memo(slot));
  }
  std::vector<Py> entries;
  entries.push_back(entry("alloc", 0x1000, 512, 0, Py::list(std::move(frames))));
  const std::vector<std::vector<int>> lists = {{101, 102}, {101},           {101, 102}, {101},
                                               {100, 101}, {101, 102, 101}, {100, 101}, {101, 102}};
  int64_t time = 1;
  for (const std::vector<int>& slots : lists) {
    std::vector<Py> refs;
    for (int slot : slots) refs.push_back(Py::get(slot));
    entries.push_back(entry("alloc", 0x1000 + time * 0x1000, 512, time, Py::list(std::move(refs))));
    ++time;
  }
  const Py root = traces({Py::list(std::move(entries))});
  const Snapshot flat = decode(root, EntryReading::kFlat);
  const Snapshot generic = decode(root, EntryReading::kGenericOnly);
  ASSERT_EQ(flat.events.count(), lists.size() + 1);
  ASSERT_EQ(generic.events.count(), lists.size() + 1);
  auto names = [](const Snapshot& s, size_t i) {
    std::string out;
    for (FrameId f : s.stacks.get(s.events.stack[i])) {
      out += std::string(s.strings.get(s.frames.get(f).name)) + ";";
    }
    return out;
  };
  for (size_t i = 1; i < flat.events.count(); ++i) {
    std::string expected;
    for (int slot : lists[i - 1]) expected += "f" + std::to_string(slot) + ";";
    EXPECT_EQ(names(flat, i), expected) << "entry " << i;
    EXPECT_EQ(names(generic, i), expected) << "entry " << i;
  }
}

// Refusals: each is not_a_snapshot, and says what the pickle holds instead.
TEST(DecoderRefusals, NotADict) {
  testing::expect_error_code_saying([] { decode(Py::num(5)); }, ErrorCode::kNotASnapshot,
                                    "holds an int");
  testing::expect_error_code_saying([] { decode(Py::str("x")); }, ErrorCode::kNotASnapshot,
                                    "holds a str");
}

TEST(DecoderRefusals, AListOfNoSegmentDicts) {
  testing::expect_error_code_saying(
      [] {
        decode(Py::list({Py::num(1), Py::num(2)}));
      },
      ErrorCode::kNotASnapshot, "a list of 2 items");
}

TEST(DecoderRefusals, ADictWithNeitherKey) {
  testing::expect_error_code(
      [] {
        decode(Py::dict({{"state_dict", Py::dict({})}}));
      },
      ErrorCode::kNotASnapshot);
}

TEST(DecoderRefusals, BothKeysOfTheWrongType) {
  testing::expect_error_code_saying(
      [] {
        decode(Py::dict({{"segments", Py::str("s")}, {"device_traces", Py::num(3)}}));
      },
      ErrorCode::kNotASnapshot, "'segments' is a str and 'device_traces' is an int");
  testing::expect_error_code_saying(
      [] {
        decode(Py::dict({{"segments", Py::none()}}));
      },
      ErrorCode::kNotASnapshot, "'segments' is None and 'device_traces' is absent");
}

TEST(DecoderRefusals, CodeIsRefusedAndEvenAsAPlaceholderIsNoSnapshot) {
  // GLOBAL os system: refused by the VM, naming the opcode.
  Py code = Py::raw("cos\nsystem\n");
  testing::expect_error_code_saying([&] { decode(code); }, ErrorCode::kRefusedOpcode, "GLOBAL");
  // With --allow-objects it is an inert object, which is still no snapshot.
  testing::expect_error_code_saying(
      [&] { decode(code, EntryReading::kFlat, /*allow_objects=*/true); }, ErrorCode::kNotASnapshot,
      "holds an object");
}

}  // namespace
}  // namespace memsnap
