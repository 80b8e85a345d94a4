// The allocator history's start state derived forward (issue 41) against the
// walk back over every entry, which stays the reference: on every real
// fixture and device, the same start state, check, peak of free memory and
// states at positions through the trace. Reads ../shared/fixtures/real
// (MEMSNAP_FIXTURES_DIR); skipped when it is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analysis/core/allocator_state.h"
#include "analysis/core/start_discovery.h"
#include "analysis/core/walk_ahead.h"
#include "memsnap/error.h"
#include "memsnap/load.h"

namespace memsnap {
namespace {

std::string describe(const AllocatorState& state) {
  std::string out =
      "reserved " + std::to_string(state.reserved) + " held " + std::to_string(state.held) + "\n";
  for (const auto& [address, range] : state.ranges) {
    out += "range " + std::to_string(address) + " " + std::to_string(range.size) + " " +
           std::to_string(range.stream) + " " + std::to_string(range.pool.first) + "/" +
           std::to_string(range.pool.second) + " " + std::string(range.kind) +
           (range.expandable ? " expandable" : "") + "\n";
  }
  for (const auto& [address, block] : state.blocks) {
    out += "block " + std::to_string(address) + " " + std::to_string(block.size) + " " +
           std::to_string(block.requested) + " " + std::to_string(static_cast<int>(block.state)) +
           (block.size_inferred ? " inferred" : "") + "\n";
  }
  return out;
}

std::string describe(const HistoryCheck& c) {
  return "possible " + std::to_string(c.possible) + " entries " + std::to_string(c.entries) +
         " misfits " + std::to_string(c.misfits_back) + "/" + std::to_string(c.misfits_forward) +
         " at start " + std::to_string(c.ranges_at_start) + "/" +
         std::to_string(c.blocks_at_start) + " inferred " + std::to_string(c.inferred_sizes) +
         " rounding " + std::string(rounding_rule_name(c.rounding)) + " exact " +
         std::to_string(c.exact) + " differences " + std::to_string(c.differences) + " " +
         c.first_difference + " reason " + c.impossible_reason;
}

// The two histories agree on everything the walk gives: the check, the
// start, the peak of free memory and the state at eight positions (each
// from a checkpoint of the history's own).
void expect_same_history(const AllocatorHistory& tried, const AllocatorHistory& back,
                         uint64_t entries) {
  ASSERT_EQ(describe(tried.check()), describe(back.check()));
  ASSERT_EQ(describe(tried.start()), describe(back.start()));
  EXPECT_EQ(tried.peak_free().bytes, back.peak_free().bytes);
  EXPECT_EQ(tried.peak_free().position, back.peak_free().position);
  EXPECT_EQ(tried.peak_free().reserved, back.peak_free().reserved);
  for (uint64_t step = 1; step <= 8; ++step) {
    const uint64_t position = entries * step / 8;
    ASSERT_EQ(describe(tried.at(position)), describe(back.at(position))) << "at " << position;
  }
}

// Every real fixture's snapshot, with its name (none without the fixtures).
std::vector<std::pair<std::string, Snapshot>> fixture_snapshots() {
  std::vector<std::pair<std::string, Snapshot>> out;
  const char* dir = std::getenv("MEMSNAP_FIXTURES_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) return out;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    if (file.path().extension() != ".pickle" && file.path().extension() != ".pkl") continue;
    try {
      out.emplace_back(file.path().filename().string(), load_snapshot(file.path().string()));
    } catch (const Error&) {
      continue;  // the fixtures that are no snapshot have tests of their own
    }
  }
  return out;
}

TEST(StartDerivation, TheForwardStartEqualsTheWalkBackOnEveryFixture) {
  const auto snapshots = fixture_snapshots();
  if (snapshots.empty()) GTEST_SKIP() << "no fixtures (MEMSNAP_FIXTURES_DIR)";
  int histories = 0;
  int derived = 0;
  for (const auto& [name, snapshot] : snapshots) {
    for (const DeviceTrace& trace : snapshot.devices) {
      const AllocatorHistory forward(snapshot, trace.device, StartDerivation::kForwardFirst);
      const AllocatorHistory back(snapshot, trace.device, StartDerivation::kWalkBack);
      ++histories;
      derived += forward.derived_forward() ? 1 : 0;
      EXPECT_FALSE(back.derived_forward());
      SCOPED_TRACE(name + " device " + std::to_string(trace.device));
      expect_same_history(forward, back, trace.count());
    }
  }
  // Most real files take the forward way (44 of the 57 replayable fixtures
  // on 2026-12-06); the rest fall back to the walk back.
  EXPECT_GT(derived, histories / 2) << derived << " of " << histories;
  std::printf("%d of %d histories derived their start forward\n", derived, histories);
}

// The walk begun before the trace is whole (start_discovery.h), fed the
// trace in pieces as a reader would, under the default settings: where the
// history takes it, the same history as the walk back's; and it takes it
// wherever derive_start would have derived the start, but for the files
// whose settings are not the default or whose dump lacks a segment a block
// lands in.
TEST(StartDerivation, TheDiscoveredWalkEqualsTheWalkBackOnEveryFixture) {
  const auto snapshots = fixture_snapshots();
  if (snapshots.empty()) GTEST_SKIP() << "no fixtures (MEMSNAP_FIXTURES_DIR)";
  int histories = 0;
  int derived = 0;
  int discovered = 0;
  for (const auto& [name, snapshot] : snapshots) {
    for (const DeviceTrace& trace : snapshot.devices) {
      StartDiscovery discovery(state_at_dump(snapshot, trace.device), SplitRule{}, trace.begin);
      for (uint64_t end = trace.begin; end < trace.end;) {
        end = std::min(trace.end, end + 1000);
        discovery.walk(snapshot, end);
      }
      const AllocatorHistory tried(snapshot, trace.device, StartDerivation::kForwardFirst,
                                   &discovery);
      const AllocatorHistory back(snapshot, trace.device, StartDerivation::kWalkBack);
      ++histories;
      derived += tried.derived_forward() ? 1 : 0;
      discovered += tried.discovered() ? 1 : 0;
      SCOPED_TRACE(name + " device " + std::to_string(trace.device));
      expect_same_history(tried, back, trace.count());
    }
  }
  std::printf("%d of %d histories took the discovered walk (%d derived forward)\n", discovered,
              histories, derived);
  EXPECT_GT(discovered, derived / 2) << discovered << " of " << derived;
}

// The walk run beside the read (walk_ahead.h), on its own thread as the
// command runs it: device 0's history takes it where it may, and is the
// walk back's.
TEST(StartDerivation, TheWalkBesideTheReadEqualsTheWalkBackOnEveryFixture) {
  const char* dir = std::getenv("MEMSNAP_FIXTURES_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) GTEST_SKIP() << "no fixtures";
  int histories = 0;
  int discovered = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    if (file.path().extension() != ".pickle" && file.path().extension() != ".pkl") continue;
    Snapshot snapshot;
    // After the model: the walk stops reading its columns before they go.
    auto walk = std::make_unique<AllocatorWalkAhead>();
    LoadOptions options;
    options.listener = walk.get();
    try {
      snapshot = load_snapshot(file.path().string(), options);
    } catch (const Error&) {
      continue;
    }
    if (snapshot.trace_of(0) == nullptr || snapshot.trace_of(0)->count() == 0) continue;
    const std::unique_ptr<StartDiscovery> walked = walk->take(0);
    const AllocatorHistory tried(snapshot, 0, StartDerivation::kForwardFirst, walked.get());
    const AllocatorHistory back(snapshot, 0, StartDerivation::kWalkBack);
    ++histories;
    discovered += tried.discovered() ? 1 : 0;
    SCOPED_TRACE(file.path().filename().string());
    expect_same_history(tried, back, snapshot.trace_of(0)->count());
  }
  std::printf("%d of %d device-0 histories took the walk beside the read\n", discovered, histories);
  EXPECT_GT(discovered, histories / 2) << discovered << " of " << histories;
}

// The same on traces cut short: each fixture's trace from a quarter, half
// and three quarters of the way in is a trace whose recording began later,
// with more held from before it (blocks freed first, segments met late).
TEST(StartDerivation, TheDiscoveredWalkEqualsTheWalkBackOnTracesCutShort) {
  auto snapshots = fixture_snapshots();
  if (snapshots.empty()) GTEST_SKIP() << "no fixtures (MEMSNAP_FIXTURES_DIR)";
  int histories = 0;
  int discovered = 0;
  for (auto& [name, snapshot] : snapshots) {
    for (size_t d = 0; d < snapshot.devices.size(); ++d) {
      const DeviceTrace whole = snapshot.devices[d];
      for (uint64_t quarter = 1; quarter <= 3; ++quarter) {
        snapshot.devices[d].begin = whole.begin + whole.count() * quarter / 4;
        const DeviceTrace& trace = snapshot.devices[d];
        StartDiscovery discovery(state_at_dump(snapshot, trace.device), SplitRule{}, trace.begin);
        discovery.walk(snapshot, trace.end);
        const AllocatorHistory tried(snapshot, trace.device, StartDerivation::kForwardFirst,
                                     &discovery);
        const AllocatorHistory back(snapshot, trace.device, StartDerivation::kWalkBack);
        ++histories;
        discovered += tried.discovered() ? 1 : 0;
        SCOPED_TRACE(name + " device " + std::to_string(trace.device) + " from " +
                     std::to_string(trace.begin));
        expect_same_history(tried, back, trace.count());
      }
      snapshot.devices[d] = whole;
    }
  }
  std::printf("%d of %d cut histories took the discovered walk\n", discovered, histories);
  EXPECT_GT(discovered, histories / 2) << discovered << " of " << histories;
}

}  // namespace
}  // namespace memsnap
