// Reading a snapshot file into the model: the library's front door.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "memsnap/model.h"

namespace memsnap {

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
};

// Opens PATH ("-" is stdin; .gz and .zst by magic bytes) and decodes it.
// Throws memsnap::Error naming the file on unreadable or hostile input.
Snapshot load_snapshot(const std::string& path, const LoadOptions& options = {});

// The same for a snapshot already in memory (a pickle, or its .gz/.zst),
// read in place; `name` is what errors say in place of a path.
Snapshot load_snapshot_bytes(std::span<const uint8_t> bytes, const std::string& name,
                             const LoadOptions& options = {});

}  // namespace memsnap
