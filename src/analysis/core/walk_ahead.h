// The allocator history's walk, run beside the read (issue 41, item 1).
//
// A ReadListener (memsnap/load.h) whose own thread walks the file's first
// trace (StartDiscovery) while the reader is still adding to it, so that
// once the file is whole the history has only the last rows, its checks
// and its corrections left (AllocatorHistory::adopt) instead of a walk
// over the whole trace. It starts when the dump's segments come before the
// trace (as PyTorch writes them) and stops for good when the reader's
// columns move; where it stopped, gave up, or walked another device than
// the one analysed, the history walks as before.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "analysis/core/allocator_state.h"
#include "analysis/core/start_discovery.h"
#include "memsnap/load.h"

namespace memsnap {

class AllocatorWalkAhead final : public ReadListener {
 public:
  AllocatorWalkAhead() = default;
  AllocatorWalkAhead(const AllocatorWalkAhead&) = delete;
  AllocatorWalkAhead& operator=(const AllocatorWalkAhead&) = delete;
  ~AllocatorWalkAhead() override;  // stops the walk and waits for its thread

  void segments_read(const Snapshot& segments) override;
  void entries_read(const TraceColumns& columns) override;
  void columns_moving() override;
  void read_ended() override;

  // Once the read has ended: the walk of `device`'s trace when it walked
  // that one to the end (the trace that starts the file's columns) and did
  // not give up; null otherwise. Waits for the walk. Hands it out once.
  std::unique_ptr<StartDiscovery> take(int device);

 private:
  void run(std::unique_ptr<StartDiscovery> discovery);

  std::mutex mutex_;
  std::condition_variable changed_;
  TraceColumns columns_;      // the rows handed over so far
  bool ended_ = false;        // the read has ended
  bool moving_ = false;       // the rows may no longer be read
  bool reading_ = false;      // the thread is reading rows
  bool done_ = false;         // the thread has finished
  bool abandoned_ = false;    // take() will not wait for the walk
  uint64_t walked_rows_ = 0;  // as of the last batch
  std::unique_ptr<StartDiscovery> walked_;
  std::thread thread_;
};

}  // namespace memsnap
