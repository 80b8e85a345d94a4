// The allocator history's start state derived forward (issue 41) against the
// walk back over every entry, which stays the reference: on every real
// fixture and device, the same start state, check, peak of free memory and
// states at positions through the trace. Reads ../shared/fixtures/real
// (MEMSNAP_FIXTURES_DIR); skipped when it is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/core/allocator_state.h"
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

TEST(StartDerivation, TheForwardStartEqualsTheWalkBackOnEveryFixture) {
  const char* dir = std::getenv("MEMSNAP_FIXTURES_DIR");
  if (dir == nullptr || !std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no fixtures (MEMSNAP_FIXTURES_DIR)";
  }
  int histories = 0;
  int derived = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    const std::string name = file.path().filename().string();
    if (file.path().extension() != ".pickle" && file.path().extension() != ".pkl") continue;
    Snapshot snapshot;
    try {
      snapshot = load_snapshot(file.path().string());
    } catch (const Error&) {
      continue;  // the fixtures that are no snapshot have tests of their own
    }
    for (const DeviceTrace& trace : snapshot.devices) {
      const AllocatorHistory forward(snapshot, trace.device, StartDerivation::kForwardFirst);
      const AllocatorHistory back(snapshot, trace.device, StartDerivation::kWalkBack);
      ++histories;
      derived += forward.derived_forward() ? 1 : 0;
      EXPECT_FALSE(back.derived_forward());
      SCOPED_TRACE(name + " device " + std::to_string(trace.device));
      ASSERT_EQ(describe(forward.check()), describe(back.check()));
      ASSERT_EQ(describe(forward.start()), describe(back.start()));
      EXPECT_EQ(forward.peak_free().bytes, back.peak_free().bytes);
      EXPECT_EQ(forward.peak_free().position, back.peak_free().position);
      EXPECT_EQ(forward.peak_free().reserved, back.peak_free().reserved);
      for (uint64_t step = 1; step <= 8; ++step) {
        const uint64_t position = trace.count() * step / 8;
        ASSERT_EQ(describe(forward.at(position)), describe(back.at(position))) << "at " << position;
      }
    }
  }
  // Most real files take the forward way (44 of the 57 replayable fixtures
  // on 2026-12-06); the rest fall back to the walk back.
  EXPECT_GT(derived, histories / 2) << derived << " of " << histories;
  std::printf("%d of %d histories derived their start forward\n", derived, histories);
}

}  // namespace
}  // namespace memsnap
