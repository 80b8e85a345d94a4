// Uses only the installed public headers: load a snapshot, replay the first
// device with an observer, print what a user would compute.
#include <cstdio>

#include <memsnap/error.h>
#include <memsnap/load.h>
#include <memsnap/replay.h>
#include <memsnap/version.h>

namespace {

struct CountFrees {
  unsigned long long matched = 0;
  unsigned long long unmatched = 0;
  void on_free(uint64_t /*event*/, const memsnap::LiveAllocation& /*freed*/) { ++matched; }
  void on_unmatched_free(uint64_t /*event*/, uint64_t /*size*/) { ++unmatched; }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer SNAPSHOT\n");
    return 2;
  }
  try {
    memsnap::Snapshot snapshot = memsnap::load_snapshot(argv[1]);
    const memsnap::DeviceTrace* trace = snapshot.trace_of(snapshot.default_device());
    memsnap::Replay replay(snapshot);
    CountFrees frees;
    if (trace != nullptr) replay.run(trace->begin, trace->end, frees);
    memsnap::ReplayTotals totals = replay.totals();
    std::printf(
        "memsnap %.*s\nevents %llu\nallocs %llu\nfrees %llu\nunmatched %llu\npeak_delta %lld\n",
        static_cast<int>(memsnap::kVersion.size()), memsnap::kVersion.data(),
        static_cast<unsigned long long>(trace != nullptr ? trace->count() : 0),
        static_cast<unsigned long long>(totals.alloc_count), frees.matched, frees.unmatched,
        static_cast<long long>(totals.peak_delta));
  } catch (const memsnap::Error& error) {
    std::fprintf(stderr, "consumer: %s\n", error.what());
    return 1;
  }
  return 0;
}
