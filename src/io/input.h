// Input layer: the bytes of one snapshot file, mmapped when it is a plain file,
// decompressed into memory when it is gzip or zstd, read fully when it is stdin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memsnap {

enum class Compression { kNone, kGzip, kZstd };

// Checks the first bytes of the (decompressed) pickle; throws Error to refuse.
using StartCheck = std::function<void(std::span<const uint8_t> first_bytes)>;

class MappingGuard;
class InflatingStream;
struct InputLimits;

class InputBuffer {
 public:
  InputBuffer();
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;
  InputBuffer(InputBuffer&& other) noexcept;
  InputBuffer& operator=(InputBuffer&& other) noexcept;
  ~InputBuffer();

  // All the bytes: for a compressed file still inflating, after waiting
  // for the rest.
  [[nodiscard]] std::span<const uint8_t> bytes() const;
  [[nodiscard]] uint64_t size() const { return bytes().size(); }
  // A compressed file inflates on a thread of its own while it is read:
  // available() is what is there now (never less than before, at the same
  // address), wait_for(end) blocks until `end` bytes are there or the file
  // has ended and returns available(). It rethrows the decompressor's error
  // (corrupt or truncated data, over the limit) when the bytes asked for lie
  // past it. For other input both return everything at once.
  [[nodiscard]] std::span<const uint8_t> available() const { return {data_, size_}; }
  std::span<const uint8_t> wait_for(uint64_t end);
  // Whether the bytes are still arriving (a compressed file being inflated).
  [[nodiscard]] bool streaming() const;
  // Bytes after the last gzip member that start no member: ignored, as
  // gunzip does (0 for other input). Waits for the stream to end.
  [[nodiscard]] uint64_t ignored_after_stream() const;
  // Size on disk (before decompression); equals size() for plain files.
  [[nodiscard]] uint64_t file_size() const { return file_size_; }
  [[nodiscard]] Compression compression() const { return compression_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  // Tells the kernel that bytes before `offset` are not needed soon. For an
  // mmapped file the pages leave the resident set and are read back from the
  // page cache if touched again, which keeps peak RSS near the model size
  // rather than model plus file. A no-op for memory the buffer owns.
  void release_before(uint64_t offset);
  // Bytes before `offset` will never be read again. An inflated file's pages
  // are freed: they are the only copy and read as zeros afterwards, so only
  // a reader that keeps no views into them may call this (the VM with
  // VmOptions::release_before). For other input, release_before(offset).
  void discard_before(uint64_t offset);
  // Whether discard_before frees memory that release_before keeps: the
  // bytes inflate into memory of their own.
  [[nodiscard]] bool inflated() const { return stream_ != nullptr; }

  // A mapped file that shrank while it was read: the pages past its new end
  // read as zeros (instead of killing the process with SIGBUS) and this turns
  // true. Whatever was read from the buffer is then not to be trusted.
  [[nodiscard]] bool changed() const;
  // Throws "file changed while reading" when changed().
  void throw_if_changed() const;

  static InputBuffer from_memory(std::vector<uint8_t> bytes, std::string name);

 private:
  friend InputBuffer open_input(const std::string& path, const InputLimits& limits);
  friend InputBuffer open_memory(std::span<const uint8_t> bytes, std::string name,
                                 const InputLimits& limits);
  friend InputBuffer inflate_if_compressed(InputBuffer buffer, uint64_t max_bytes,
                                           const StartCheck& check_pickle_start);
  void unmap();
  // MADV_DONTNEED on the whole pages before `offset` not dropped yet;
  // returns whether there were any (released_ is then past them).
  bool drop_pages_before(uint64_t offset);

  const uint8_t* data_ = nullptr;
  mutable uint64_t size_ = 0;  // grows while a stream inflates
  uint64_t file_size_ = 0;
  uint64_t released_ = 0;
  bool mapped_ = false;
  bool borrowed_ = false;  // open_memory's bytes: the caller's, read in place
  std::unique_ptr<MappingGuard> guard_;
  std::vector<uint8_t> owned_;
  std::shared_ptr<InflatingStream> stream_;
  Compression compression_ = Compression::kNone;
  std::string name_;
};

class Error;
// "file changed while reading ...": what InputBuffer::throw_if_changed throws.
Error file_changed_error();

struct InputLimits {
  // The most bytes the pickle may take once read or decompressed; 0 means
  // default_max_input_bytes(). Input beyond it is refused, not truncated.
  uint64_t max_bytes = 0;
  // Called once, with at least kStartCheckBytes (or all there is), as soon
  // as they are read or inflated and before anything more is: the layer
  // that knows the pickle format refuses /dev/zero or a gzip of zeros at
  // its first byte instead of after reading or inflating all of it.
  StartCheck check_start;
};

// Bytes that check_looks_like_pickle and InputLimits::check_start see first.
constexpr size_t kStartCheckBytes = 64;

// Opens PATH ("-" is stdin), decompresses .gz/.zst by magic bytes, and refuses
// inputs that are recognisably not a snapshot pickle (empty, zip, JSON, and
// whatever limits.check_start refuses), or larger than the limit.
InputBuffer open_input(const std::string& path, const InputLimits& limits = {});

// The same for bytes already in memory (the Python package's load(bytes)):
// a plain pickle is read in place, so `bytes` must outlive the buffer;
// .gz/.zst are inflated into the buffer. `name` is what errors say.
InputBuffer open_memory(std::span<const uint8_t> bytes, std::string name,
                        const InputLimits& limits = {});

// Checks the first bytes and throws a clear Error for inputs that are not a
// pickle at all. Exposed for tests.
void check_looks_like_pickle(std::span<const uint8_t> bytes);

// Decompression with a ceiling on the output, so a small hostile file cannot
// make memsnap allocate without bound; check_start (may be empty) sees the
// first inflated bytes before more are inflated. (zstd inflates only as a
// stream, into the reserved mapping of a loaded file.)
std::vector<uint8_t> gunzip(std::span<const uint8_t> compressed, uint64_t max_output,
                            const StartCheck& check_start = {});

// The default input limit: the machine's physical memory (the whole pickle
// is held in memory), and never more than kMaxInputBytes.
uint64_t default_max_input_bytes();

// All of stdin, as it comes (not decompressed), refused beyond `max_bytes`:
// for the callers that tell a summary from a snapshot by its first bytes.
std::vector<uint8_t> read_stdin(uint64_t max_bytes);

// The first `bytes` of a file read as it lies on disk (not decompressed), at
// most that many: a summary's file identity and a cheap sniff of its kind.
std::vector<uint8_t> read_file_head(const std::string& path, uint64_t bytes);
constexpr uint64_t kMaxInputBytes = uint64_t{64} << 30;

// A small file the user names (a budget, category rules), read whole: at
// most kMaxSmallFileBytes. `what` ("--budget", "budget") leads every error;
// one that cannot be read is bad input (exit 1) like any other input.
constexpr uint64_t kMaxSmallFileBytes = uint64_t{1} << 20;
std::string read_small_file(const std::string& path, std::string_view what);

}  // namespace memsnap
