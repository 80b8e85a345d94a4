#include "io/input.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <signal.h>
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
// The largest zstd window read (2 GiB: `zstd --long=31`).
constexpr int kMaxZstdWindowLog = 31;

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

std::string format_limit(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) {
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(1 << 30));
  }
  if (bytes >= (uint64_t{1} << 20)) {
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / static_cast<double>(1 << 20));
  }
  return fmt::format("{} bytes", bytes);
}

// A file that is not there, or one that is and cannot be opened.
ErrorCode open_failure(int error_number) {
  return error_number == ENOENT || error_number == ENOTDIR ? ErrorCode::kFileNotFound
                                                           : ErrorCode::kUnreadable;
}

std::string too_large_message(const char* what, uint64_t max_bytes) {
  return fmt::format(
      "{} exceeds the input limit of {}; refusing to read further (the whole pickle is held in "
      "memory: the limit is this machine's memory unless --max-input sets it)",
      what, format_limit(max_bytes));
}

// Reads a pipe, FIFO, character device or stdin to its end, refusing more
// than max_bytes, and shows the first bytes to check_start as soon as they
// arrive, so that /dev/zero or an endless stream of garbage stops at once.
std::vector<uint8_t> read_stream(int fd, const std::string& name, uint64_t max_bytes,
                                 const StartCheck& check_start) {
  std::vector<uint8_t> out;
  bool checked = false;
  for (;;) {
    size_t old_size = out.size();
    if (old_size > max_bytes)
      throw Error(ErrorCode::kLimitExceeded, too_large_message("the input", max_bytes));
    out.resize(old_size + kChunk);
    ssize_t got = ::read(fd, out.data() + old_size, kChunk);
    if (got < 0) {
      out.resize(old_size);
      if (errno == EINTR) continue;
      throw Error(ErrorCode::kUnreadable,
                  fmt::format("{}: read failed: {}", name, std::strerror(errno)));
    }
    out.resize(old_size + static_cast<size_t>(got));
    if (!checked && (out.size() >= kStartCheckBytes || got == 0)) {
      checked = true;
      check_start(out);
    }
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
  // A frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little
  // endian) that a zstd stream may begin with: the decoder passes over it.
  return starts_with(bytes, {0x28, 0xb5, 0x2f, 0xfd}) ||
         (bytes.size() >= 4 && (bytes[0] & 0xf0) == 0x50 && bytes[1] == 0x2a && bytes[2] == 0x4d &&
          bytes[3] == 0x18);
}

}  // namespace

// A file can shrink while it is mapped (a dump still being written, a file
// replaced in place), and touching a page past its new end raises SIGBUS. A
// guard registers its mapping in a fixed table the signal handler can read;
// the handler maps zero pages over the rest of that mapping, marks it
// changed and returns, so the read goes on (over zeros) and the reader turns
// the mark into an error. A SIGBUS outside every mapping gets the previous
// disposition (by default: the process dies, as it would have).
namespace {

struct GuardSlot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // page-rounded
  std::atomic<bool> changed{false};
};
constexpr size_t kGuardSlots = 64;  // mappings open at once: one per file loaded in parallel
std::array<GuardSlot, kGuardSlots> g_guard_slots;
std::atomic<uintptr_t> g_page_size{4096};
struct sigaction g_previous_sigbus {};
std::once_flag g_sigbus_handler_installed;

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t page_size = g_page_size.load(std::memory_order_relaxed);
  for (GuardSlot& slot : g_guard_slots) {
    uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= end) continue;
    // From the faulting page to the end of the mapping.
    char* page = static_cast<char*>(info->si_addr) - address % page_size;
    void* zeros = ::mmap(page, end - (address - address % page_size), PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros != MAP_FAILED) {
      slot.changed.store(true, std::memory_order_release);
      return;
    }
  }
  // Not one of ours: hand the signal to whoever had it before.
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN &&
      g_previous_sigbus.sa_handler != nullptr) {
    g_previous_sigbus.sa_handler(signal);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);  // the fault repeats on return, now fatal
}

void install_sigbus_handler() {
  g_page_size.store(static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)), std::memory_order_relaxed);
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous_sigbus);
}

}  // namespace

class MappingGuard {
 public:
  MappingGuard(const uint8_t* data, uint64_t size) {
    std::call_once(g_sigbus_handler_installed, install_sigbus_handler);
    const uintptr_t page_size = g_page_size.load(std::memory_order_relaxed);
    const auto begin = reinterpret_cast<uintptr_t>(data);
    const uintptr_t end = begin + (size + page_size - 1) / page_size * page_size;
    for (GuardSlot& slot : g_guard_slots) {
      uintptr_t expected = 0;
      // Claim the slot by its end first, so the handler never sees a begin
      // without its end.
      if (!slot.end.compare_exchange_strong(expected, end, std::memory_order_acq_rel)) continue;
      slot.changed.store(false, std::memory_order_relaxed);
      slot.begin.store(begin, std::memory_order_release);
      slot_ = &slot;
      return;
    }
    // All slots taken (more than 64 files mapped at once): unguarded, as
    // before; a shrinking file then ends the process.
  }
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  ~MappingGuard() {
    if (slot_ == nullptr) return;
    slot_->begin.store(0, std::memory_order_release);
    slot_->end.store(0, std::memory_order_release);
  }
  [[nodiscard]] bool changed() const {
    return slot_ != nullptr && slot_->changed.load(std::memory_order_acquire);
  }

 private:
  GuardSlot* slot_ = nullptr;
};

bool InputBuffer::changed() const {
  return guard_ != nullptr && guard_->changed();
}

Error file_changed_error() {
  return Error(ErrorCode::kFileChanged,
               "file changed while reading: it shrank after it was opened (was it still being "
               "written?); read it again once it is complete");
}

void InputBuffer::throw_if_changed() const {
  if (changed()) throw file_changed_error();
}

void InputBuffer::unmap() {
  guard_.reset();  // unregister before the address range can be reused
  if (mapped_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

InputBuffer::InputBuffer() = default;

InputBuffer::InputBuffer(InputBuffer&& other) noexcept {
  *this = std::move(other);
}

InputBuffer& InputBuffer::operator=(InputBuffer&& other) noexcept {
  if (this == &other) return *this;
  unmap();
  guard_ = std::move(other.guard_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  file_size_ = std::exchange(other.file_size_, 0);
  released_ = std::exchange(other.released_, 0);
  mapped_ = std::exchange(other.mapped_, false);
  borrowed_ = std::exchange(other.borrowed_, false);
  owned_ = std::move(other.owned_);
  stream_ = std::move(other.stream_);
  compression_ = other.compression_;
  name_ = std::move(other.name_);
  if (!mapped_ && !borrowed_) data_ = stream_ ? data_ : owned_.data();
  return *this;
}

InputBuffer::~InputBuffer() {
  unmap();
}

bool InputBuffer::drop_pages_before(uint64_t offset) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t end = offset / page * page;
  if (end <= released_) return false;
  ::madvise(const_cast<uint8_t*>(data_) + released_, end - released_, MADV_DONTNEED);
  released_ = end;
  return true;
}

void InputBuffer::release_before(uint64_t offset) {
  // MADV_DONTNEED on a private read-only file mapping only drops the pages;
  // the data stays correct because a later touch faults it back in.
  if (mapped_) drop_pages_before(offset);
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
    if (inflateInit2(&stream_, 32 + 15) != Z_OK)
      throw Error(ErrorCode::kInternalError, "gzip: cannot initialise zlib");
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

namespace {

// Where a decompressor writes: room() is the free space after what was
// produced (growing it when it can), produced(n) takes n bytes of it.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual std::span<uint8_t> room(uint64_t at_least) = 0;
  virtual void produced(uint64_t bytes) = 0;
  [[nodiscard]] virtual uint64_t size() const = 0;
  [[nodiscard]] virtual std::span<const uint8_t> written() const = 0;
  // Checked between steps: true when the reader has gone (stop early).
  [[nodiscard]] virtual bool cancelled() const { return false; }
  // The compressed bytes before `offset` have been decompressed.
  virtual void input_read(uint64_t /*offset*/) {}
};

// Runs a start check once the sink holds enough bytes.
class StartGate {
 public:
  explicit StartGate(const StartCheck& check) : check_(check) {}
  void see(const OutputSink& out, bool at_end) {
    if (done_ || !check_ || (out.size() < kStartCheckBytes && !at_end)) return;
    done_ = true;
    check_(out.written());
  }

 private:
  const StartCheck& check_;
  bool done_ = false;
};

// A vector that grows by half its size (1 MiB steps until the start check).
class VectorSink final : public OutputSink {
 public:
  std::span<uint8_t> room(uint64_t at_least) override {
    const size_t old_size = out_.size();
    out_.resize(old_size + std::max<uint64_t>({kChunk, old_size / 2, at_least}));
    size_ = old_size;
    return {out_.data() + old_size, out_.size() - old_size};
  }
  void produced(uint64_t bytes) override {
    size_ += bytes;
    out_.resize(size_);
  }
  [[nodiscard]] uint64_t size() const override { return size_; }
  [[nodiscard]] std::span<const uint8_t> written() const override { return {out_.data(), size_}; }
  std::vector<uint8_t> take() {
    out_.resize(size_);
    out_.shrink_to_fit();
    return std::move(out_);
  }

 private:
  std::vector<uint8_t> out_;
  uint64_t size_ = 0;
};

void check_output_limit(const OutputSink& out, uint64_t max_output) {
  if (out.size() > max_output)
    throw Error(ErrorCode::kLimitExceeded, too_large_message("decompressed data", max_output));
}

// Returns how many bytes after the last member start no member (ignored).
uint64_t gunzip_into(std::span<const uint8_t> compressed, uint64_t max_output,
                     const StartCheck& check_start, OutputSink& out) {
  StartGate gate(check_start);
  InflateStream owner;
  z_stream& stream = owner.get();
  size_t consumed = 0;
  size_t member_end = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (out.cancelled()) return 0;
    if (stream.avail_in == 0) {
      if (consumed == compressed.size()) break;
      size_t take = std::min<size_t>(compressed.size() - consumed, 1u << 30);
      stream.next_in = const_cast<Bytef*>(compressed.data() + consumed);
      stream.avail_in = static_cast<uInt>(take);
      consumed += take;
    }
    if (out.size() >= max_output)
      throw Error(ErrorCode::kLimitExceeded, too_large_message("decompressed data", max_output));
    // Small steps until the start is checked, so a bomb stops after 1 MiB.
    std::span<uint8_t> room = out.room(kChunk);
    const auto grow = static_cast<uInt>(std::min<uint64_t>(room.size(), 1u << 30));
    stream.next_out = room.data();
    stream.avail_out = grow;
    status = inflate(&stream, Z_NO_FLUSH);
    out.produced(grow - stream.avail_out);
    out.input_read(consumed - stream.avail_in);
    check_output_limit(out, max_output);
    // Concatenated gzip members (as `cat a.gz b.gz` makes, or a writer that
    // flushes members) decompress as one stream, wherever the member ends in
    // our input window; an empty first member is no empty file. Bytes after
    // the last member that do not start another one are ignored, as gunzip
    // does, and counted so that the report can say so.
    const size_t next = consumed - stream.avail_in;  // offset of what follows the member
    if (status == Z_STREAM_END) member_end = next;
    const bool another = status == Z_STREAM_END && next + 1 < compressed.size() &&
                         compressed[next] == 0x1f && compressed[next + 1] == 0x8b;
    gate.see(out, status == Z_STREAM_END && !another);
    if (another) status = inflateReset(&stream);
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
      throw Error(ErrorCode::kBadCompression,
                  std::string("gzip: ") + (stream.msg != nullptr ? stream.msg : "corrupt data"));
    }
    if (status == Z_BUF_ERROR && stream.avail_in == 0 && consumed == compressed.size()) break;
  }
  if (status != Z_STREAM_END)
    throw Error(ErrorCode::kTruncated,
                "gzip: truncated compressed stream (the file was cut short)");
  gate.see(out, true);
  return compressed.size() - member_end;
}

void unzstd_into(std::span<const uint8_t> compressed, uint64_t max_output,
                 const StartCheck& check_start, OutputSink& out) {
  StartGate gate(check_start);
  std::unique_ptr<ZSTD_DCtx, ZstdContextDeleter> owner(ZSTD_createDCtx());
  ZSTD_DCtx* context = owner.get();
  if (context == nullptr)
    throw Error(ErrorCode::kInternalError, "zstd: cannot create a decompression context");
  // Files written with `zstd --long` (or -19 --long=31) need a window beyond
  // the decoder's default 128 MiB: any window up to 2 GiB is read. The window
  // is memory the decoder holds, within what the inflated pickle takes.
  ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, kMaxZstdWindowLog);
  ZSTD_inBuffer input{compressed.data(), compressed.size(), 0};
  size_t last = 1;
  while (input.pos < input.size || last != 0) {
    if (out.cancelled()) return;
    if (out.size() >= max_output)
      throw Error(ErrorCode::kLimitExceeded, too_large_message("decompressed data", max_output));
    std::span<uint8_t> room = out.room(kChunk);
    ZSTD_outBuffer output{room.data(), room.size(), 0};
    size_t before = input.pos;
    last = ZSTD_decompressStream(context, &output, &input);
    out.produced(output.pos);
    out.input_read(input.pos);
    check_output_limit(out, max_output);
    if (ZSTD_isError(last) != 0u) {
      throw Error(ErrorCode::kBadCompression, std::string("zstd: ") + ZSTD_getErrorName(last));
    }
    // A frame ended (0): the end only when no frame follows (a skippable or
    // empty frame may come first).
    gate.see(out, last == 0 && input.pos == input.size);
    if (input.pos == input.size && output.pos == 0 && before == input.pos && last != 0) {
      throw Error(ErrorCode::kTruncated,
                  "zstd: truncated compressed stream (the file was cut short)");
    }
  }
  gate.see(out, true);
}

}  // namespace

std::vector<uint8_t> gunzip(std::span<const uint8_t> compressed, uint64_t max_output,
                            const StartCheck& check_start) {
  VectorSink out;
  gunzip_into(compressed, max_output, check_start, out);
  return out.take();
}

// Inflates a .gz or .zst file on a thread of its own into one reserved
// mapping, which grows (in resident memory) as it is written and never
// moves: the VM reads the first megabytes while the rest inflates, so a
// compressed file takes about max(inflate, VM), not their sum, and there is
// no copy of a growing vector (which peaked at 1.5x the pickle).
class InflatingStream final : public OutputSink {
 public:
  InflatingStream(InputBuffer compressed, bool gzip, uint64_t max_bytes, StartCheck check_start)
      : compressed_(std::move(compressed)) {
    reserve_region(max_bytes);
    // Nothing is published before the start check has passed, so that a
    // reader (open_input) sees the refusal of a file that is no pickle
    // rather than its first bytes.
    thread_ = std::thread([this, gzip, start = std::move(check_start)] {
      const StartCheck check = [this, &start](std::span<const uint8_t> first_bytes) {
        if (start) start(first_bytes);
        checked_ = true;
      };
      try {
        if (gzip) {
          ignored_after_stream_ = gunzip_into(compressed_.bytes(), capacity_, check, *this);
        } else {
          unzstd_into(compressed_.bytes(), capacity_, check, *this);
        }
        compressed_.throw_if_changed();
      } catch (...) {
        error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (checked_) available_.store(produced_, std::memory_order_release);
      done_ = true;
      changed_.notify_all();
    });
  }
  InflatingStream(const InflatingStream&) = delete;
  InflatingStream& operator=(const InflatingStream&) = delete;
  ~InflatingStream() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true, std::memory_order_relaxed);
      reader_moved_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    if (region_ != nullptr) ::munmap(region_, capacity_);
  }

  [[nodiscard]] const uint8_t* data() const { return region_; }

  // Waits until `end` bytes are there or the stream has ended; returns how
  // many there are. Rethrows the decompressor's error once everything before
  // it has been read.
  uint64_t wait_for(uint64_t end) {
    uint64_t have = available_.load(std::memory_order_acquire);
    if (have >= end) return have;
    std::unique_lock<std::mutex> lock(mutex_);
    // However far ahead the inflating thread is, the reader needs these.
    wanted_ = std::max(wanted_, end);
    reader_moved_.notify_all();
    changed_.wait(lock, [&] { return done_ || available_.load(std::memory_order_acquire) >= end; });
    have = available_.load(std::memory_order_acquire);
    if (have < end && error_) std::rethrow_exception(error_);
    return have;
  }
  uint64_t finish() { return wait_for(UINT64_MAX); }
  // Bytes after the compressed stream that were ignored (gunzip_into),
  // once the stream has ended.
  uint64_t ignored_after_stream() {
    finish();
    std::lock_guard<std::mutex> lock(mutex_);
    return ignored_after_stream_;
  }
  [[nodiscard]] bool done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

  // The reader will not read before `offset` again (InputBuffer::discard_before):
  // from then on the inflating thread keeps at most kMaxAhead bytes ahead
  // of it, so that the inflated pickle is never resident whole.
  void consumed(uint64_t offset) {
    consumed_.store(offset, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex_);
    reader_moved_.notify_all();
  }

  // OutputSink, on the inflating thread.
  std::span<uint8_t> room(uint64_t at_least) override {
    wait_for_reader();
    const uint64_t size = produced_;
    const uint64_t step = std::max<uint64_t>(at_least, kChunk);
    if (size >= capacity_)
      throw Error(ErrorCode::kLimitExceeded, too_large_message("decompressed data", capacity_));
    return {region_ + size, static_cast<size_t>(std::min(step, capacity_ - size))};
  }
  void produced(uint64_t bytes) override {
    produced_ += bytes;
    if (!checked_) return;
    available_.store(produced_, std::memory_order_release);
    // Wake a reader that waits; a lock per MiB is nothing beside inflating it.
    std::lock_guard<std::mutex> lock(mutex_);
    changed_.notify_all();
  }
  [[nodiscard]] uint64_t size() const override { return produced_; }
  [[nodiscard]] std::span<const uint8_t> written() const override {
    return {region_, static_cast<size_t>(produced_)};
  }
  [[nodiscard]] bool cancelled() const override { return stop_.load(std::memory_order_relaxed); }
  // The compressed file's pages, like the inflated ones, need not stay.
  void input_read(uint64_t offset) override { compressed_.release_before(offset); }

 private:
  // Address space for the largest pickle allowed; pages cost memory only
  // once written. Where the system will not map that much (strict
  // overcommit), the limit shrinks until it will.
  void reserve_region(uint64_t max_bytes) {
    const uint64_t smallest = std::clamp<uint64_t>(max_bytes, 1, uint64_t{64} << 20);
    for (uint64_t size = std::max<uint64_t>(max_bytes, 1);; size = std::max(smallest, size / 2)) {
      void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (map != MAP_FAILED) {
        region_ = static_cast<uint8_t*>(map);
        capacity_ = size;
        return;
      }
      if (size == smallest) break;
    }
    throw Error(
        ErrorCode::kInternalError,
        fmt::format("cannot reserve address space to decompress into: {}", std::strerror(errno)));
  }

  // Holds the inflating thread while it is kMaxAhead past what the reader
  // consumed, unless the reader waits for more than that (a long string).
  void wait_for_reader() {
    const uint64_t consumed = consumed_.load(std::memory_order_relaxed);
    if (consumed == 0 || produced_ < consumed + kMaxAhead) return;
    std::unique_lock<std::mutex> lock(mutex_);
    reader_moved_.wait(lock, [&] {
      return stop_.load(std::memory_order_relaxed) || wanted_ > produced_ ||
             produced_ < consumed_.load(std::memory_order_relaxed) + kMaxAhead;
    });
  }

  static constexpr uint64_t kMaxAhead = uint64_t{32} << 20;
  InputBuffer compressed_;
  uint8_t* region_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t produced_ = 0;               // on the inflating thread
  bool checked_ = false;                // on the inflating thread: the start check has passed
  std::atomic<uint64_t> available_{0};  // published to readers
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable reader_moved_;  // consumed_ or wanted_ grew, or stop_
  std::atomic<uint64_t> consumed_{0};     // InputBuffer::discard_before's offset
  uint64_t wanted_ = 0;                   // under mutex_: the most a reader waited for
  bool done_ = false;                     // under mutex_
  uint64_t ignored_after_stream_ = 0;     // written by the thread before done_
  std::exception_ptr error_;
  std::thread thread_;
};

void InputBuffer::discard_before(uint64_t offset) {
  if (!stream_) {
    release_before(offset);
    return;
  }
  // Never past what has been handed out: the inflating thread writes there.
  if (drop_pages_before(std::min(offset, size_))) stream_->consumed(released_);
}

std::span<const uint8_t> InputBuffer::wait_for(uint64_t end) {
  if (stream_) size_ = stream_->wait_for(end);
  return available();
}

std::span<const uint8_t> InputBuffer::bytes() const {
  if (stream_) size_ = stream_->finish();
  return available();
}

uint64_t InputBuffer::ignored_after_stream() const {
  return stream_ ? stream_->ignored_after_stream() : 0;
}

bool InputBuffer::streaming() const {
  return stream_ && !stream_->done();
}

void check_looks_like_pickle(std::span<const uint8_t> bytes) {
  if (bytes.empty())
    throw Error(ErrorCode::kEmptyFile, "empty file: the dump was probably interrupted");
  if (starts_with(bytes, {'P', 'K', 0x03, 0x04}) || starts_with(bytes, {'P', 'K', 0x05, 0x06})) {
    throw Error(ErrorCode::kNotAPickle,
                "this is a zip archive (a torch.save zip archive?), not a memory snapshot pickle; "
                "write snapshots with torch.cuda.memory._dump_snapshot()");
  }
  // A UTF-8 byte order mark, as some editors write before JSON text.
  size_t i = starts_with(bytes, {0xef, 0xbb, 0xbf}) ? 3 : 0;
  while (i < bytes.size() && i < 64 &&
         (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\r' || bytes[i] == '\t')) {
    ++i;
  }
  if (i < bytes.size() && (bytes[i] == '{' || bytes[i] == '[')) {
    throw Error(ErrorCode::kNotAPickle,
                "this looks like JSON, not a pickle; memsnap reads the pickle written by "
                "torch.cuda.memory._dump_snapshot()");
  }
}

uint64_t default_max_input_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return kMaxInputBytes;
  return std::min(kMaxInputBytes, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size));
}

InputBuffer inflate_if_compressed(InputBuffer buffer, uint64_t max_bytes,
                                  const StartCheck& check_pickle_start);

namespace {

// The checks every pickle's first bytes get, wherever they come from.
// (By value: a compressed file's check runs on the inflating thread.)
StartCheck pickle_start_check(const InputLimits& limits) {
  return [check = limits.check_start](std::span<const uint8_t> first_bytes) {
    check_looks_like_pickle(first_bytes);
    if (check) check(first_bytes);
  };
}

}  // namespace

InputBuffer open_input(const std::string& path, const InputLimits& limits) {
  const uint64_t max_bytes = limits.max_bytes != 0 ? limits.max_bytes : default_max_input_bytes();
  const StartCheck check_pickle_start = pickle_start_check(limits);
  // Raw bytes: compressed input is checked after inflating, not before.
  const StartCheck check_raw_start = [&](std::span<const uint8_t> first_bytes) {
    if (!is_gzip(first_bytes) && !is_zstd(first_bytes)) check_pickle_start(first_bytes);
  };

  InputBuffer buffer;
  buffer.name_ = path;
  if (path == "-") {
    buffer.owned_ = read_stream(STDIN_FILENO, "stdin", max_bytes, check_raw_start);
  } else {
    int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw < 0) throw Error(open_failure(errno), std::strerror(errno));
    FileDescriptor fd(raw);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) {
      throw Error(ErrorCode::kUnreadable, std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) throw Error(ErrorCode::kUnreadable, "is a directory");
    if (S_ISREG(info.st_mode) && info.st_size > 0) {
      void* map =
          ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
      if (map == MAP_FAILED)
        throw Error(ErrorCode::kUnreadable, fmt::format("mmap: {}", std::strerror(errno)));
      ::madvise(map, static_cast<size_t>(info.st_size), MADV_SEQUENTIAL);
      buffer.data_ = static_cast<const uint8_t*>(map);
      buffer.size_ = static_cast<uint64_t>(info.st_size);
      buffer.mapped_ = true;
      buffer.guard_ = std::make_unique<MappingGuard>(buffer.data_, buffer.size_);
      check_raw_start(buffer.bytes().first(std::min<size_t>(buffer.size_, kStartCheckBytes)));
    } else {
      // Pipes, FIFOs, process substitution, devices and empty files.
      buffer.owned_ = read_stream(fd.get(), path, max_bytes, check_raw_start);
    }
  }
  if (!buffer.mapped_) {
    buffer.data_ = buffer.owned_.data();
    buffer.size_ = buffer.owned_.size();
  }
  buffer.file_size_ = buffer.size_;

  return inflate_if_compressed(std::move(buffer), max_bytes, check_pickle_start);
}

// A gzip or zstd buffer becomes the stream that inflates it; any other is
// returned as it is.
InputBuffer inflate_if_compressed(InputBuffer buffer, uint64_t max_bytes,
                                  const StartCheck& check_pickle_start) {
  std::span<const uint8_t> raw_bytes = buffer.available();
  if (!is_gzip(raw_bytes) && !is_zstd(raw_bytes)) return buffer;
  const bool gzip = is_gzip(raw_bytes);
  const uint64_t file_size = buffer.file_size_;
  std::string name = buffer.name_;
  InputBuffer inflated;
  inflated.stream_ =
      std::make_shared<InflatingStream>(std::move(buffer), gzip, max_bytes, check_pickle_start);
  inflated.data_ = inflated.stream_->data();
  inflated.name_ = std::move(name);
  inflated.file_size_ = file_size;
  inflated.compression_ = gzip ? Compression::kGzip : Compression::kZstd;
  // The first bytes' verdict (not a pickle, a bomb of zeros) before
  // anything reads on.
  inflated.wait_for(kStartCheckBytes);
  return inflated;
}

InputBuffer open_memory(std::span<const uint8_t> bytes, std::string name,
                        const InputLimits& limits) {
  const uint64_t max_bytes = limits.max_bytes != 0 ? limits.max_bytes : default_max_input_bytes();
  const StartCheck check_pickle_start = pickle_start_check(limits);
  // Bytes already in memory need no limit; what they inflate to does.
  const std::span<const uint8_t> head =
      bytes.first(std::min<size_t>(bytes.size(), kStartCheckBytes));
  if (!is_gzip(head) && !is_zstd(head)) check_pickle_start(head);
  InputBuffer buffer;
  buffer.name_ = std::move(name);
  buffer.data_ = bytes.data();
  buffer.size_ = bytes.size();
  buffer.file_size_ = bytes.size();
  buffer.borrowed_ = true;
  return inflate_if_compressed(std::move(buffer), max_bytes, check_pickle_start);
}

std::vector<uint8_t> read_stdin(uint64_t max_bytes) {
  return read_stream(STDIN_FILENO, "stdin", max_bytes, [](std::span<const uint8_t>) {});
}

std::vector<uint8_t> read_file_head(const std::string& path, uint64_t bytes) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int open_errno = errno;
    throw Error(open_failure(open_errno), fmt::format("{}: {}", path, std::strerror(open_errno)));
  }
  std::vector<uint8_t> head(static_cast<size_t>(bytes));
  const size_t got = std::fread(head.data(), 1, head.size(), file);
  const int read_errno = std::ferror(file) != 0 ? errno : 0;  // EISDIR for a folder
  std::fclose(file);
  if (read_errno != 0) {
    throw Error(ErrorCode::kUnreadable, fmt::format("{}: {}", path, std::strerror(read_errno)));
  }
  head.resize(got);
  return head;
}

std::string read_small_file(const std::string& path, std::string_view what) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_head(path, kMaxSmallFileBytes + 1);
  } catch (const Error& error) {
    // A file that cannot be read is bad input (exit 1) like any other input;
    // what it says, if wrong, is the user's usage error (read_budget).
    throw Error(error.code(), fmt::format("{} {}", what, error.what()));
  }
  if (bytes.size() > kMaxSmallFileBytes) {
    throw Error(ErrorCode::kLimitExceeded, fmt::format("{} {}: larger than 1 MiB", what, path));
  }
  return {bytes.begin(), bytes.end()};
}

}  // namespace memsnap
