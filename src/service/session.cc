#include "service/session.h"

#include <utility>

namespace memsnap::service {

Session::Session(std::string name, SessionOptions options)
    : name_(std::move(name)), options_(std::move(options)) {
  if (options_.walk_beside_read) walk_ = std::make_unique<AllocatorWalkAhead>();
  options_.load.listener = walk_.get();
}

Session::~Session() = default;

std::unique_ptr<Session> Session::open(const std::string& path, SessionOptions options) {
  std::unique_ptr<Session> session(new Session(path, std::move(options)));
  session->snapshot_ = load_snapshot(path, session->options_.load);
  return session;
}

std::unique_ptr<Session> Session::open_bytes(std::span<const uint8_t> bytes,
                                             const std::string& name, SessionOptions options) {
  std::unique_ptr<Session> session(new Session(name, std::move(options)));
  session->snapshot_ = load_snapshot_bytes(bytes, name, session->options_.load);
  return session;
}

const FileAnalysis& Session::analysis(std::optional<int> device) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<FileAnalysis>& slot = analyses_[device];
  if (!slot) {
    slot = std::make_unique<FileAnalysis>(name_, snapshot_, device, options_.observer,
                                          options_.steps, walk_.get());
  }
  return *slot;
}

}  // namespace memsnap::service
