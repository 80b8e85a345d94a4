#include "io/input.h"

#include <memory>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <utility>

#include "memsnap/error.h"

namespace memsnap {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

std::vector<uint8_t> read_all(int fd, const std::string& name) {
  std::vector<uint8_t> out;
  for (;;) {
    size_t old_size = out.size();
    out.resize(old_size + kChunk);
    ssize_t got = ::read(fd, out.data() + old_size, kChunk);
    if (got < 0) {
      if (errno == EINTR) {
        out.resize(old_size);
        continue;
      }
      throw Error(fmt::format("{}: read failed: {}", name, std::strerror(errno)));
    }
    out.resize(old_size + static_cast<size_t>(got));
    if (got == 0) break;
  }
  out.shrink_to_fit();
  return out;
}

bool starts_with(std::span<const uint8_t> bytes, std::initializer_list<uint8_t> magic) {
  if (bytes.size() < magic.size()) return false;
  size_t i = 0;
  for (uint8_t b : magic) {
    if (bytes[i++] != b) return false;
  }
  return true;
}

bool is_gzip(std::span<const uint8_t> bytes) {
  return starts_with(bytes, {0x1f, 0x8b});
}
bool is_zstd(std::span<const uint8_t> bytes) {
  return starts_with(bytes, {0x28, 0xb5, 0x2f, 0xfd});
}

std::string too_large_message(uint64_t max_output) {
  return fmt::format("decompressed data exceeds {}; refusing to inflate further",
                     max_output >= (uint64_t{1} << 30) ? fmt::format("{} GiB", max_output >> 30)
                                                       : fmt::format("{} bytes", max_output));
}

}  // namespace

InputBuffer::InputBuffer(InputBuffer&& other) noexcept {
  *this = std::move(other);
}

InputBuffer& InputBuffer::operator=(InputBuffer&& other) noexcept {
  if (this == &other) return *this;
  if (mapped_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  file_size_ = std::exchange(other.file_size_, 0);
  released_ = std::exchange(other.released_, 0);
  mapped_ = std::exchange(other.mapped_, false);
  owned_ = std::move(other.owned_);
  compression_ = other.compression_;
  name_ = std::move(other.name_);
  if (!mapped_) data_ = owned_.data();
  return *this;
}

InputBuffer::~InputBuffer() {
  if (mapped_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void InputBuffer::release_before(uint64_t offset) {
  if (!mapped_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t end = offset / page * page;
  if (end <= released_) return;
  // MADV_DONTNEED on a private read-only file mapping only drops the pages;
  // the data stays correct because a later touch faults it back in.
  ::madvise(const_cast<uint8_t*>(data_) + released_, end - released_, MADV_DONTNEED);
  released_ = end;
}

InputBuffer InputBuffer::from_memory(std::vector<uint8_t> bytes, std::string name) {
  InputBuffer buffer;
  buffer.owned_ = std::move(bytes);
  buffer.data_ = buffer.owned_.data();
  buffer.size_ = buffer.owned_.size();
  buffer.file_size_ = buffer.size_;
  buffer.name_ = std::move(name);
  return buffer;
}

namespace {

// zlib's stream state, ended on every path out.
class InflateStream {
 public:
  InflateStream() {
    // 32 + 15: accept gzip and zlib headers, largest window.
    if (inflateInit2(&stream_, 32 + 15) != Z_OK) throw Error("gzip: cannot initialise zlib");
  }
  InflateStream(const InflateStream&) = delete;
  InflateStream& operator=(const InflateStream&) = delete;
  ~InflateStream() { inflateEnd(&stream_); }
  z_stream& get() { return stream_; }

 private:
  z_stream stream_{};
};

struct ZstdContextDeleter {
  void operator()(ZSTD_DCtx* context) const { ZSTD_freeDCtx(context); }
};

}  // namespace

std::vector<uint8_t> gunzip(std::span<const uint8_t> compressed, uint64_t max_output) {
  InflateStream owner;
  z_stream& stream = owner.get();
  std::vector<uint8_t> out;
  size_t consumed = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (stream.avail_in == 0) {
      if (consumed == compressed.size()) break;
      size_t take = std::min<size_t>(compressed.size() - consumed, 1u << 30);
      stream.next_in = const_cast<Bytef*>(compressed.data() + consumed);
      stream.avail_in = static_cast<uInt>(take);
      consumed += take;
    }
    if (out.size() >= max_output) throw Error(too_large_message(max_output));
    size_t old_size = out.size();
    size_t grow = std::max<size_t>(kChunk, old_size / 2);
    out.resize(old_size + grow);
    stream.next_out = out.data() + old_size;
    stream.avail_out = static_cast<uInt>(grow);
    status = inflate(&stream, Z_NO_FLUSH);
    out.resize(old_size + grow - stream.avail_out);
    if (out.size() > max_output) throw Error(too_large_message(max_output));
    if (status == Z_STREAM_END) {
      // Concatenated gzip members (as `cat a.gz b.gz` makes, or a writer that
      // flushes members) decompress as one stream, wherever the member ends in
      // our input window. Bytes after the last member that do not start
      // another one are ignored, as gunzip does.
      size_t next = consumed - stream.avail_in;  // offset of what follows the member
      bool another =
          next + 1 < compressed.size() && compressed[next] == 0x1f && compressed[next + 1] == 0x8b;
      if (another) status = inflateReset(&stream);
    }
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
      throw Error(std::string("gzip: ") + (stream.msg != nullptr ? stream.msg : "corrupt data"));
    }
    if (status == Z_BUF_ERROR && stream.avail_in == 0 && consumed == compressed.size()) break;
  }
  if (status != Z_STREAM_END)
    throw Error("gzip: truncated compressed stream (the file was cut short)");
  out.shrink_to_fit();
  return out;
}

std::vector<uint8_t> unzstd(std::span<const uint8_t> compressed, uint64_t max_output) {
  std::unique_ptr<ZSTD_DCtx, ZstdContextDeleter> owner(ZSTD_createDCtx());
  ZSTD_DCtx* context = owner.get();
  if (context == nullptr) throw Error("zstd: cannot create a decompression context");
  std::vector<uint8_t> out;
  ZSTD_inBuffer input{compressed.data(), compressed.size(), 0};
  size_t last = 1;
  while (input.pos < input.size || last != 0) {
    if (out.size() >= max_output) throw Error(too_large_message(max_output));
    size_t old_size = out.size();
    size_t grow = std::max<size_t>(kChunk, old_size / 2);
    out.resize(old_size + grow);
    ZSTD_outBuffer output{out.data() + old_size, grow, 0};
    size_t before = input.pos;
    last = ZSTD_decompressStream(context, &output, &input);
    out.resize(old_size + output.pos);
    if (out.size() > max_output) throw Error(too_large_message(max_output));
    if (ZSTD_isError(last) != 0u) {
      throw Error(std::string("zstd: ") + ZSTD_getErrorName(last));
    }
    if (input.pos == input.size && output.pos == 0 && before == input.pos && last != 0) {
      throw Error("zstd: truncated compressed stream (the file was cut short)");
    }
  }
  out.shrink_to_fit();
  return out;
}

void check_looks_like_pickle(std::span<const uint8_t> bytes) {
  if (bytes.empty()) throw Error("empty file: the dump was probably interrupted");
  if (starts_with(bytes, {'P', 'K', 0x03, 0x04}) || starts_with(bytes, {'P', 'K', 0x05, 0x06})) {
    throw Error(
        "this is a zip archive (a torch.save zip archive?), not a memory snapshot pickle; "
        "write snapshots with torch.cuda.memory._dump_snapshot()");
  }
  size_t i = 0;
  while (i < bytes.size() && i < 64 &&
         (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\r' || bytes[i] == '\t')) {
    ++i;
  }
  if (i < bytes.size() && (bytes[i] == '{' || bytes[i] == '[')) {
    throw Error(
        "this looks like JSON, not a pickle; memsnap reads the pickle written by "
        "torch.cuda.memory._dump_snapshot()");
  }
}

InputBuffer open_input(const std::string& path) {
  InputBuffer buffer;
  buffer.name_ = path;
  if (path == "-") {
    buffer.owned_ = read_all(STDIN_FILENO, "stdin");
  } else {
    int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw < 0) throw Error(std::strerror(errno));
    FileDescriptor fd(raw);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) {
      throw Error(std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) throw Error("is a directory");
    if (S_ISREG(info.st_mode) && info.st_size > 0) {
      void* map =
          ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
      if (map == MAP_FAILED) throw Error(fmt::format("mmap: {}", std::strerror(errno)));
      ::madvise(map, static_cast<size_t>(info.st_size), MADV_SEQUENTIAL);
      buffer.data_ = static_cast<const uint8_t*>(map);
      buffer.size_ = static_cast<uint64_t>(info.st_size);
      buffer.mapped_ = true;
    } else {
      // Pipes, FIFOs, process substitution and empty files.
      buffer.owned_ = read_all(fd.get(), path);
    }
  }
  if (!buffer.mapped_) {
    buffer.data_ = buffer.owned_.data();
    buffer.size_ = buffer.owned_.size();
  }
  buffer.file_size_ = buffer.size_;

  std::span<const uint8_t> raw_bytes = buffer.bytes();
  if (is_gzip(raw_bytes) || is_zstd(raw_bytes)) {
    bool gzip = is_gzip(raw_bytes);
    std::vector<uint8_t> inflated;
    inflated =
        gzip ? gunzip(raw_bytes, kMaxDecompressedBytes) : unzstd(raw_bytes, kMaxDecompressedBytes);
    uint64_t file_size = buffer.file_size_;
    buffer = InputBuffer::from_memory(std::move(inflated), path);
    buffer.file_size_ = file_size;
    buffer.compression_ = gzip ? Compression::kGzip : Compression::kZstd;
  }
  check_looks_like_pickle(buffer.bytes());
  return buffer;
}

}  // namespace memsnap
