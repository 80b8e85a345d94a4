#include "analysis/core/walk_ahead.h"

#include <algorithm>
#include <system_error>
#include <utility>

namespace memsnap {

namespace {

// Rows walked between looks at the listener's state: a few milliseconds,
// so that columns_moving() and the end of the model never wait long.
constexpr uint64_t kRowsPerLook = uint64_t{1} << 16;
// The history waits for a walk with at most 1/kMostRowsLeft of the rows
// (or a look's worth) left to walk when the read ends.
constexpr uint64_t kMostRowsLeft = 4;

}  // namespace

AllocatorWalkAhead::~AllocatorWalkAhead() {
  columns_moving();
  if (thread_.joinable()) thread_.join();
}

void AllocatorWalkAhead::segments_read(const Snapshot& segments) {
  // The rows start with device_traces[0]'s trace, device 0's.
  auto discovery = std::make_unique<StartDiscovery>(state_at_dump(segments, 0), SplitRule{}, 0);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable() || moving_ || ended_) return;
  try {
    thread_ = std::thread([this, walk = std::move(discovery)]() mutable { run(std::move(walk)); });
  } catch (const std::system_error&) {
    done_ = true;  // no thread to be had: the history walks as before
  }
}

void AllocatorWalkAhead::entries_read(const TraceColumns& columns) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;  // one read only: the rows of a second are another model's
  columns_ = columns;
  changed_.notify_all();
}

void AllocatorWalkAhead::columns_moving() {
  std::unique_lock<std::mutex> lock(mutex_);
  moving_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return !reading_; });
}

void AllocatorWalkAhead::read_ended() {
  const std::lock_guard<std::mutex> lock(mutex_);
  ended_ = true;
  changed_.notify_all();
}

void AllocatorWalkAhead::run(std::unique_ptr<StartDiscovery> discovery) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] {
      return moving_ || abandoned_ || ended_ || columns_.count > discovery->walked_to();
    });
    if (moving_ || abandoned_ || discovery->given_up()) {
      discovery.reset();
      break;
    }
    if (columns_.count == discovery->walked_to()) break;  // the read ended, all walked
    TraceColumns rows = columns_;
    rows.count = std::min(rows.count, discovery->walked_to() + kRowsPerLook);
    reading_ = true;
    lock.unlock();
    discovery->walk(rows);
    lock.lock();
    reading_ = false;
    walked_rows_ = discovery->walked_to();
    changed_.notify_all();
  }
  walked_ = std::move(discovery);
  done_ = true;
  changed_.notify_all();
}

std::unique_ptr<StartDiscovery> AllocatorWalkAhead::take(int device) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_.joinable()) return nullptr;  // no segments before the trace
  // When the read ends with the walk far behind it (a trace it walks
  // slower than it is read), the history walks itself rather than wait.
  changed_.wait(lock, [this] { return done_ || ended_; });
  const uint64_t left = columns_.count - walked_rows_;
  if (!done_ && left > kRowsPerLook && left > columns_.count / kMostRowsLeft) {
    abandoned_ = true;
    changed_.notify_all();
  }
  changed_.wait(lock, [this] { return done_; });
  // Done, and past its last use of the lock: its stack goes now, not with the model.
  thread_.join();
  if (device != 0) return nullptr;
  return std::move(walked_);
}

}  // namespace memsnap
