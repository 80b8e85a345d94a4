// Input layer: the bytes of one snapshot file, mmapped when it is a plain file,
// decompressed into memory when it is gzip or zstd, read fully when it is stdin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memsnap {

enum class Compression { kNone, kGzip, kZstd };

class InputBuffer {
 public:
  InputBuffer() = default;
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;
  InputBuffer(InputBuffer&& other) noexcept;
  InputBuffer& operator=(InputBuffer&& other) noexcept;
  ~InputBuffer();

  [[nodiscard]] std::span<const uint8_t> bytes() const { return {data_, size_}; }
  [[nodiscard]] uint64_t size() const { return size_; }
  // Size on disk (before decompression); equals size() for plain files.
  [[nodiscard]] uint64_t file_size() const { return file_size_; }
  [[nodiscard]] Compression compression() const { return compression_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  // Tells the kernel that bytes before `offset` are not needed soon. For an
  // mmapped file the pages leave the resident set and are read back from the
  // page cache if touched again, which keeps peak RSS near the model size
  // rather than model plus file. A no-op for memory the buffer owns.
  void release_before(uint64_t offset);

  static InputBuffer from_memory(std::vector<uint8_t> bytes, std::string name);

 private:
  friend InputBuffer open_input(const std::string& path);

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t file_size_ = 0;
  uint64_t released_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
  Compression compression_ = Compression::kNone;
  std::string name_;
};

// Opens PATH ("-" is stdin), decompresses .gz/.zst by magic bytes, and refuses
// inputs that are recognisably not a snapshot pickle (empty, zip, JSON).
InputBuffer open_input(const std::string& path);

// Checks the first bytes and throws a clear Error for inputs that are not a
// pickle at all. Exposed for tests.
void check_looks_like_pickle(std::span<const uint8_t> bytes);

// Decompression with a ceiling on the output, so a small hostile file cannot
// make memsnap allocate without bound.
std::vector<uint8_t> gunzip(std::span<const uint8_t> compressed, uint64_t max_output);
std::vector<uint8_t> unzstd(std::span<const uint8_t> compressed, uint64_t max_output);

// The largest decompressed input memsnap accepts.
constexpr uint64_t kMaxDecompressedBytes = uint64_t{64} << 30;

}  // namespace memsnap
