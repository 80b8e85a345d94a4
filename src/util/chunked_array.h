// An array that grows by fixed chunks and never moves what it holds.
//
// A std::vector that outgrows its capacity copies everything into one twice
// as large: for a few million elements, both copies are resident at once. The
// VM's memo grows that way to millions of slots (protocol 4 memoizes every
// trace entry's dict and most of its strings), and its last doubling was the
// largest spike of a parse. Growing by chunks adds at most one chunk at a
// time; an index is a shift and a mask.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace memsnap {

template <typename T, unsigned kChunkBits = 16>
class ChunkedArray {
 public:
  static constexpr uint64_t kChunkSize = uint64_t{1} << kChunkBits;

  [[nodiscard]] uint64_t size() const { return size_; }
  [[nodiscard]] T& operator[](uint64_t index) {
    return chunks_[index >> kChunkBits][index & (kChunkSize - 1)];
  }
  [[nodiscard]] const T& operator[](uint64_t index) const {
    return chunks_[index >> kChunkBits][index & (kChunkSize - 1)];
  }
  void push_back(const T& value) {
    if ((size_ & (kChunkSize - 1)) == 0) chunks_.push_back(std::make_unique<T[]>(kChunkSize));
    (*this)[size_] = value;
    ++size_;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  uint64_t size_ = 0;
};

}  // namespace memsnap
