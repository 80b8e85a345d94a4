// Reading a snapshot file into the model: the library's front door.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "memsnap/model.h"

namespace memsnap {

// The trace entries read so far: the first `count` rows of the model's
// columns (those a read-alongside walk needs).
struct TraceColumns {
  const Action* action = nullptr;
  const uint64_t* addr = nullptr;
  const uint64_t* size = nullptr;
  const uint64_t* stream = nullptr;
  uint64_t count = 0;
};

// Hears of a snapshot while it is read, so that work on it can begin before
// the file is whole (the CLI's allocator replay runs beside the read). Each
// call is made on the reading thread and returns quickly; the rows handed
// over stay where they are, unchanged, until columns_moving() is called.
class ReadListener {
 public:
  virtual ~ReadListener() = default;
  // The dump's segments and blocks, in a model that holds only those (no
  // stacks), when the file has them before its trace (as PyTorch writes it).
  virtual void segments_read(const Snapshot& segments) = 0;
  virtual void entries_read(const TraceColumns& columns) = 0;
  // The columns are about to move (they outgrow what was reserved): the
  // rows handed over must not be read once this returns.
  virtual void columns_moving() = 0;
  // The read has ended, whole or refused; no more calls follow.
  virtual void read_ended() = 0;
};

struct LoadOptions {
  // Read opcodes that would import or call code as inert placeholders
  // instead of refusing the file. Nothing is ever executed either way.
  bool allow_objects = false;
  // The most bytes the pickle may take in memory once read from a stream or
  // decompressed (a plain file is mapped, not held); 0 means the machine's
  // physical memory, at most 64 GiB. Larger input is refused.
  uint64_t max_input_bytes = 0;
  // Called now and then with (bytes done, bytes total) while the pickle is read.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // Told of the file as it is read (not owned). One listener per read:
  // options shared by several loads leave it null. Its work may read the
  // model's columns after the read: whoever holds it stops that work before
  // the model goes (service::Session declares the model first).
  ReadListener* listener = nullptr;
};

// Opens PATH ("-" is stdin; .gz and .zst by magic bytes) and decodes it.
// Throws memsnap::Error naming the file on unreadable or hostile input.
Snapshot load_snapshot(const std::string& path, const LoadOptions& options = {});

// The same for a snapshot already in memory (a pickle, or its .gz/.zst),
// read in place; `name` is what errors say in place of a path.
Snapshot load_snapshot_bytes(std::span<const uint8_t> bytes, const std::string& name,
                             const LoadOptions& options = {});

}  // namespace memsnap
