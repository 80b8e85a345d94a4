// One loaded snapshot and everything memsnap computes of it, for as long as a
// front end asks about it: the model, its analyses (one per device asked
// for, each part computed once), and the allocator walk that ran beside the
// read. The command line, the Python package and the server hold sessions
// and nothing else, so that the order in which these must live and die is
// written once, here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "analysis/core/file_analysis.h"
#include "analysis/core/walk_ahead.h"
#include "memsnap/load.h"
#include "memsnap/model.h"

namespace memsnap::service {

struct SessionOptions {
  // How the file is read (LoadOptions::listener is the session's own).
  LoadOptions load;
  // Walk the allocator's history beside the read, on another core (one or
  // two files at a time; not for a folder of ranks: a thread per file).
  bool walk_beside_read = true;
  // Hears of every part of an analysis computed (--timings); may be empty.
  PartObserver observer;
  StepSource steps = StepSource::kAuto;
};

class Session {
 public:
  // Reads PATH ("-": stdin; .gz and .zst by magic bytes), or a snapshot
  // already in memory (`name` stands for a path in messages). Throws
  // memsnap::Error naming the file on unreadable or hostile input.
  static std::unique_ptr<Session> open(const std::string& path, SessionOptions options);
  static std::unique_ptr<Session> open_bytes(std::span<const uint8_t> bytes,
                                             const std::string& name, SessionOptions options);

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;
  ~Session();

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const Snapshot& snapshot() const { return snapshot_; }
  // The analysis of one device (nullopt: the device choose_device picks),
  // made on first use and shared by every report asked of it; safe to call
  // from several threads. Throws a usage Error for a device the file lacks.
  const FileAnalysis& analysis(std::optional<int> device) const;

 private:
  Session(std::string name, SessionOptions options);

  std::string name_;
  SessionOptions options_;
  Snapshot snapshot_;
  // Declared after the model: it stops, and its thread stops reading the
  // model's columns, before they go.
  std::unique_ptr<AllocatorWalkAhead> walk_;
  mutable std::mutex mutex_;
  mutable std::map<std::optional<int>, std::unique_ptr<FileAnalysis>> analyses_;
};

}  // namespace memsnap::service
