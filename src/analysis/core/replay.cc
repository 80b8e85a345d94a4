#include "memsnap/replay.h"

namespace memsnap {

ReplayTotals replay_device(const Snapshot& snapshot, const DeviceTrace& trace) {
  Replay replay(snapshot);
  replay.run(trace.begin, trace.end);
  return replay.totals();
}

}  // namespace memsnap
