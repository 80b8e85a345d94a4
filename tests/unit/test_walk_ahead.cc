// Unit tests of the read-alongside hooks (ReadListener, memsnap/load.h) and
// of the allocator walk run beside the read (analysis/core/walk_ahead): what
// the decoder tells a listener and when, and that the history takes the walk
// where it may and walks itself where it may not.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/walk_ahead.h"
#include "io/input.h"
#include "memsnap/error.h"
#include "pickle_writer.h"
#include "service/session.h"
#include "snapshot/decoder.h"

namespace memsnap {
namespace {

using testing::PickleWriter;
using testing::Py;

constexpr int64_t kBase = 0x7f0000000000;
constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = int64_t{1024} * 1024;

Snapshot decode_bytes(const std::string& bytes, ReadListener* listener) {
  InputBuffer input =
      InputBuffer::from_memory(std::vector<uint8_t>(bytes.begin(), bytes.end()), "test");
  LoadOptions options;
  options.listener = listener;
  return decode_snapshot(input, options);
}

Py entry(const std::string& action, int64_t addr, int64_t size) {
  return Py::dict({{"action", Py::str(action)},
                   {"addr", Py::num(addr)},
                   {"size", Py::num(size)},
                   {"stream", Py::num(0)},
                   {"frames", Py::list({})}});
}

Py block(int64_t address, int64_t size, int64_t requested, const std::string& state) {
  return Py::dict({{"address", Py::num(address)},
                   {"size", Py::num(size)},
                   {"requested_size", Py::num(requested)},
                   {"state", Py::str(state)}});
}

// One 2 MiB segment; recording began after a block at +4 KiB was made,
// which the trace frees first; it then allocates at +16 KiB.
Py segments() {
  return Py::list({Py::dict(
      {{"device", Py::num(0)},
       {"address", Py::num(kBase)},
       {"total_size", Py::num(2 * kMiB)},
       {"stream", Py::num(0)},
       {"segment_type", Py::str("small")},
       {"blocks",
        Py::list({block(kBase, 16 * kKiB, 0, "inactive"),
                  block(kBase + 16 * kKiB, 512, 512, "active_allocated"),
                  block(kBase + 16 * kKiB + 512, 2 * kMiB - 16 * kKiB - 512, 0, "inactive")})}})});
}

Py trace() {
  return Py::list({Py::list({entry("free_requested", kBase + 4 * kKiB, 2000),
                             entry("free_completed", kBase + 4 * kKiB, 2000),
                             entry("alloc", kBase + 16 * kKiB, 512)})});
}

void expect_the_walk_backs(const Snapshot& model, const AllocatorHistory& history) {
  const AllocatorHistory back(model, 0, StartDerivation::kWalkBack);
  EXPECT_EQ(history.check().exact, back.check().exact);
  EXPECT_EQ(history.check().blocks_at_start, back.check().blocks_at_start);
  EXPECT_EQ(history.start().held, back.start().held);
  EXPECT_EQ(history.peak_free().bytes, back.peak_free().bytes);
  EXPECT_EQ(history.peak_free().position, back.peak_free().position);
}

TEST(WalkAhead, TheWalkBesideTheReadIsTheHistorysWhereTheSegmentsComeFirst) {
  auto walk = std::make_unique<AllocatorWalkAhead>();
  const Snapshot model = decode_bytes(
      PickleWriter::write(Py::dict({{"segments", segments()}, {"device_traces", trace()}})),
      walk.get());
  const std::unique_ptr<StartDiscovery> walked = walk->take(0);
  ASSERT_NE(walked, nullptr);
  EXPECT_EQ(walked->walked_to(), 3u);
  const AllocatorHistory history(model, 0, StartDerivation::kForwardFirst, walked.get());
  EXPECT_TRUE(history.discovered());
  EXPECT_TRUE(history.check().exact);
  expect_the_walk_backs(model, history);
  EXPECT_EQ(walk->take(0), nullptr);  // handed out once
}

TEST(WalkAhead, NoWalkWhereTheTraceComesBeforeTheSegments) {
  auto walk = std::make_unique<AllocatorWalkAhead>();
  const Snapshot model = decode_bytes(
      PickleWriter::write(Py::dict({{"device_traces", trace()}, {"segments", segments()}})),
      walk.get());
  EXPECT_EQ(walk->take(0), nullptr);
  const AllocatorHistory history(model, 0, StartDerivation::kForwardFirst, nullptr);
  EXPECT_TRUE(history.derived_forward());
  EXPECT_TRUE(history.check().exact);
  expect_the_walk_backs(model, history);
}

// What the decoder tells a listener, in order.
class Recorder final : public ReadListener {
 public:
  void segments_read(const Snapshot& dump) override {
    calls.emplace_back("segments " + std::to_string(dump.segments.size()));
  }
  void entries_read(const TraceColumns& columns) override {
    calls.emplace_back("entries " + std::to_string(columns.count));
  }
  void columns_moving() override { calls.emplace_back("moving"); }
  void read_ended() override { calls.emplace_back("ended"); }
  std::vector<std::string> calls;
};

TEST(WalkAhead, TheDecoderTellsTheSegmentsTheRowsAndTheEnd) {
  Recorder recorder;
  const Snapshot model = decode_bytes(
      PickleWriter::write(Py::dict({{"segments", segments()}, {"device_traces", trace()}})),
      &recorder);
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"segments 1", "entries 3", "ended"}));
}

// A session reads with a walk of its own and hands it to the analysis it
// makes: the history is the walk's, and the walk back's in every figure.
TEST(WalkAhead, ASessionsAnalysisTakesItsWalk) {
  const std::string bytes =
      PickleWriter::write(Py::dict({{"segments", segments()}, {"device_traces", trace()}}));
  const std::unique_ptr<service::Session> session = service::Session::open_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "test", {});
  const AllocatorHistory* history = session->analysis(0).allocator_history();
  ASSERT_NE(history, nullptr);
  EXPECT_TRUE(history->discovered());
  expect_the_walk_backs(session->snapshot(), *history);
  // Without the walk, the history walks itself to the same figures.
  const std::unique_ptr<service::Session> alone = service::Session::open_bytes(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "test",
      {.walk_beside_read = false});
  EXPECT_FALSE(alone->analysis(0).allocator_history()->discovered());
  expect_the_walk_backs(alone->snapshot(), *alone->analysis(0).allocator_history());
}

// Entries of a few bytes each (memo references) outgrow the columns'
// reservation (a row per 24 bytes of input): the listener is told before
// they move, and the walk is not taken.
TEST(WalkAhead, ColumnsThatOutgrowTheirReservationEndTheWalk) {
  // The first entry memoizes its key and value (BINUNICODE, BINPUT).
  static constexpr char kFirst[] =
      "}(X\x06\x00\x00\x00"
      "action"
      "q\x01X\x05\x00\x00\x00"
      "alloc"
      "q\x02u";
  std::string list = "](";  // EMPTY_LIST, MARK
  list.append(kFirst, sizeof(kFirst) - 1);
  for (int k = 1; k < 2000; ++k) list += "}(h\x01h\x02u";  // EMPTY_DICT MARK BINGET BINGET SETITEMS
  list += "e";                                             // APPENDS
  Recorder recorder;
  AllocatorWalkAhead walk;
  const std::string bytes = PickleWriter::write(
      Py::dict({{"segments", Py::list({})}, {"device_traces", Py::list({Py::raw(list)})}}));
  const Snapshot recorded = decode_bytes(bytes, &recorder);
  EXPECT_EQ(recorded.events.count(), 2000u);
  ASSERT_GE(recorder.calls.size(), 3u);
  EXPECT_EQ(recorder.calls[0], "segments 0");
  EXPECT_EQ(recorder.calls[recorder.calls.size() - 2], "moving");
  EXPECT_EQ(recorder.calls.back(), "ended");
  const Snapshot walked = decode_bytes(bytes, &walk);
  EXPECT_EQ(walk.take(0), nullptr);
}

// A file refused mid-trace: the listener is told the rows go, then the end.
TEST(WalkAhead, ARefusedFileEndsTheListening) {
  std::string bytes =
      PickleWriter::write(Py::dict({{"segments", segments()}, {"device_traces", trace()}}));
  bytes.resize(bytes.size() - 20);  // truncated inside the trace
  Recorder recorder;
  EXPECT_THROW(decode_bytes(bytes, &recorder), Error);
  const std::vector<std::string>& calls = recorder.calls;
  const auto ended = std::find(calls.begin(), calls.end(), "ended");
  ASSERT_NE(ended, calls.end());
  ASSERT_NE(ended, calls.begin());
  EXPECT_EQ(*std::prev(ended), "moving");
}

}  // namespace
}  // namespace memsnap
