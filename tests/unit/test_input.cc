// Input layer: magic-byte detection, decompression, refusals.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "expect_error.h"
#include "io/input.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

using memsnap::testing::expect_error_code;
using memsnap::testing::expect_error_code_saying;
using memsnap::testing::expect_error_containing;

std::span<const uint8_t> span_of(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

void check_start(const std::string& text) {
  check_looks_like_pickle(span_of(text));
}

// Each refusal is its code, and says what the file is instead.
TEST(Input, RecognisesWhatIsNotAPickle) {
  expect_error_code([] { check_start(""); }, ErrorCode::kEmptyFile);
  expect_error_code_saying([] { check_start("PK\x03\x04rest"); }, ErrorCode::kNotAPickle,
                           "torch.save zip archive");
  expect_error_code_saying([] { check_start("  {\"segments\": []}"); }, ErrorCode::kNotAPickle,
                           "looks like JSON");
  EXPECT_NO_THROW(check_start("\x80\x04N."));
}

std::string temp_file(const std::string& contents) {
  std::string path = ::testing::TempDir() + "memsnap_input_" +
                     std::to_string(std::hash<std::string>{}(contents)) + ".bin";
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(Input, GzipAndZstdByMagicNotExtension) {
  std::string pickle("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.", 14);
  // gzip via zlib's gz* API into a file named .pickle.
  std::string gz_path = ::testing::TempDir() + "memsnap_gz.pickle";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  gzwrite(gz, pickle.data(), static_cast<unsigned>(pickle.size()));
  gzclose(gz);
  InputBuffer from_gzip = open_input(gz_path);
  EXPECT_EQ(from_gzip.compression(), Compression::kGzip);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(from_gzip.bytes().data()), from_gzip.size()),
            pickle);

  std::string zst(ZSTD_compressBound(pickle.size()), '\0');
  zst.resize(ZSTD_compress(zst.data(), zst.size(), pickle.data(), pickle.size(), 3));
  InputBuffer from_zstd = open_input(temp_file(zst));
  EXPECT_EQ(from_zstd.compression(), Compression::kZstd);
  EXPECT_EQ(from_zstd.size(), pickle.size());
}

// open_memory (the Python package's load(bytes)): the same magic bytes, the
// same refusals, a plain pickle read in place and surviving a move.
TEST(Input, MemoryInputReadsInPlaceAndInflatesByMagic) {
  const std::string pickle("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.", 14);
  InputBuffer plain = open_memory(span_of(pickle), "<bytes>");
  InputBuffer moved = std::move(plain);
  EXPECT_EQ(moved.bytes().data(), reinterpret_cast<const uint8_t*>(pickle.data()));
  EXPECT_EQ(moved.size(), pickle.size());
  EXPECT_EQ(moved.compression(), Compression::kNone);

  std::string zst(ZSTD_compressBound(pickle.size()), '\0');
  zst.resize(ZSTD_compress(zst.data(), zst.size(), pickle.data(), pickle.size(), 3));
  InputBuffer inflated = open_memory(span_of(zst), "<bytes>");
  EXPECT_EQ(inflated.compression(), Compression::kZstd);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(inflated.bytes().data()), inflated.size()),
            pickle);
  EXPECT_EQ(inflated.file_size(), zst.size());

  expect_error_code([] { open_memory(span_of(std::string("  {\"a\": 1}")), "x"); },
                    ErrorCode::kNotAPickle);
  expect_error_code([] { open_memory({}, "x"); }, ErrorCode::kEmptyFile);
}

std::string gzip_of(const std::string& data) {
  std::string packed(compressBound(data.size()) + 64, '\0');
  z_stream stream{};
  deflateInit2(&stream, 9, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(packed.data());
  stream.avail_out = static_cast<uInt>(packed.size());
  deflate(&stream, Z_FINISH);
  packed.resize(stream.total_out);
  deflateEnd(&stream);
  return packed;
}

// Issue 40, finding 17: a stream may begin with an empty gzip member, an
// empty zstd frame or a zstd skippable frame; each was refused ("empty
// file", or the skippable frame read as a raw pickle) though gunzip and zstd
// read them.
TEST(Input, StreamsThatBeginWithNothingAreRead) {
  const std::string pickle("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.", 14);
  const auto read = [](const std::string& packed) {
    InputBuffer input = open_input(temp_file(packed));
    return std::string(reinterpret_cast<const char*>(input.bytes().data()), input.size());
  };
  EXPECT_EQ(read(gzip_of("") + gzip_of(pickle)), pickle);
  std::string zst(ZSTD_compressBound(pickle.size()), '\0');
  zst.resize(ZSTD_compress(zst.data(), zst.size(), pickle.data(), pickle.size(), 3));
  std::string empty_frame(ZSTD_compressBound(0), '\0');
  empty_frame.resize(ZSTD_compress(empty_frame.data(), empty_frame.size(), "", 0, 3));
  EXPECT_EQ(read(empty_frame + zst), pickle);
  // Skippable frame 0x184D2A53 of 5 bytes, little endian.
  const std::string skippable("\x53\x2a\x4d\x18\x05\x00\x00\x00hello", 13);
  EXPECT_EQ(read(skippable + zst), pickle);
  expect_error_code([&] { open_input(temp_file(gzip_of(""))); }, ErrorCode::kEmptyFile);
}

// Issue 40, finding 17: bytes after the last gzip member that start no
// member are ignored, as gunzip does, but counted so the report says so
// (they were dropped silently); a second member is read, not counted.
TEST(Input, BytesAfterTheLastGzipMemberAreCounted) {
  const std::string pickle("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.", 14);
  InputBuffer clean = open_input(temp_file(gzip_of(pickle) + gzip_of("")));
  EXPECT_EQ(clean.size(), pickle.size());
  EXPECT_EQ(clean.ignored_after_stream(), 0U);
  InputBuffer appended = open_input(temp_file(gzip_of(pickle) + "garbage!"));
  EXPECT_EQ(appended.size(), pickle.size());
  EXPECT_EQ(appended.ignored_after_stream(), 8U);
  // One byte of gzip's magic is no member either.
  InputBuffer half_magic = open_input(temp_file(gzip_of(pickle) + "\x1f"));
  EXPECT_EQ(half_magic.ignored_after_stream(), 1U);
  EXPECT_EQ(open_input(temp_file(pickle + "tail")).ignored_after_stream(), 0U);
}

TEST(Input, TruncatedGzipIsReported) {
  std::string data(4096, 'x');
  std::string packed = gzip_of(data);
  std::string cut = packed.substr(0, packed.size() / 2);
  expect_error_code([&] { gunzip(span_of(cut), kMaxInputBytes); }, ErrorCode::kTruncated);
  EXPECT_EQ(gunzip(span_of(packed), kMaxInputBytes).size(), data.size());
  // The output ceiling stops a decompression bomb.
  expect_error_code([&] { gunzip(span_of(packed), 1024); }, ErrorCode::kLimitExceeded);
}

TEST(Input, StartIsCheckedBeforeTheRestIsInflated) {
  // 256 MiB of zeros: the check sees the first inflated chunk, and the
  // inflater stops there instead of producing the rest.
  std::string packed = gzip_of(std::string(size_t{256} << 20, '\0'));
  uint64_t seen = 0;
  StartCheck refuse = [&seen](std::span<const uint8_t> first_bytes) {
    seen = first_bytes.size();
    throw Error(ErrorCode::kNotAPickle, "refused at the start");
  };
  expect_error_containing<Error>([&] { gunzip(span_of(packed), kMaxInputBytes, refuse); },
                                 "refused at the start");
  EXPECT_GE(seen, kStartCheckBytes);
  EXPECT_LE(seen, uint64_t{2} << 20);
  // The same through open_input, with the check an InputLimits carries.
  InputLimits limits;
  limits.check_start = refuse;
  expect_error_containing<Error>([&] { open_input(temp_file(packed), limits); },
                                 "refused at the start");
  // A check that accepts sees the start exactly once, even for short input.
  int calls = 0;
  limits.check_start = [&calls](std::span<const uint8_t>) { ++calls; };
  std::string short_pickle("\x80\x04N.", 4);
  EXPECT_EQ(open_input(temp_file(gzip_of(short_pickle)), limits).size(), short_pickle.size());
  EXPECT_EQ(open_input(temp_file(short_pickle), limits).size(), short_pickle.size());
  EXPECT_EQ(calls, 2);
}

// A compressed file inflates on its own thread while it is read: what is
// there grows in place, the whole is the original, and an error in the data
// shows when the reader reaches it (not before: the bytes before it are good).
TEST(Input, CompressedInputArrivesInPlaceWhileItInflates) {
  std::string data;
  for (int i = 0; data.size() < (size_t{24} << 20); ++i) data += "entry " + std::to_string(i) + ";";
  data.insert(0, "\x80\x04");
  const std::string gz = temp_file(gzip_of(data));
  InputBuffer input = open_input(gz);
  const uint8_t* start = input.available().data();
  EXPECT_GE(input.available().size(), kStartCheckBytes);
  std::span<const uint8_t> part = input.wait_for(5 << 20);
  EXPECT_GE(part.size(), size_t{5} << 20);
  EXPECT_EQ(part.data(), start);
  EXPECT_EQ(std::memcmp(part.data(), data.data(), part.size()), 0);
  EXPECT_EQ(input.size(), data.size());  // waits for the rest
  EXPECT_FALSE(input.streaming());
  EXPECT_EQ(input.available().data(), start);
  EXPECT_EQ(std::memcmp(input.bytes().data(), data.data(), data.size()), 0);

  // Cut short: the first part reads, the error comes at its end.
  std::string packed = gzip_of(data);
  InputBuffer cut = open_input(temp_file(packed.substr(0, packed.size() / 2)));
  EXPECT_GT(cut.wait_for(1 << 20).size(), size_t{1} << 20);
  expect_error_code([&] { cut.wait_for(data.size()); }, ErrorCode::kTruncated);

  // Dropped while it inflates: the thread stops, nothing hangs or leaks.
  for (int i = 0; i < 4; ++i) (void)open_input(gz);
}

TEST(Input, StreamsStopAtTheirFirstBytesAndAtTheLimit) {
  InputLimits limits;
  limits.check_start = [](std::span<const uint8_t> first_bytes) {
    if (first_bytes[0] == 0) throw Error(ErrorCode::kNotAPickle, "zero first byte");
  };
  // /dev/zero never ends: the start check is what stops it.
  expect_error_containing<Error>([&] { open_input("/dev/zero", limits); }, "zero first byte");
  // A stream past the limit is refused, not truncated.
  limits.check_start = {};
  limits.max_bytes = 3 << 20;
  std::string fifo = ::testing::TempDir() + "memsnap_input_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader stops early and closes its end: the writer must not die of it.
  auto previous_sigpipe = std::signal(SIGPIPE, SIG_IGN);
  std::thread writer([&fifo] {
    std::ofstream out(fifo, std::ios::binary);
    std::string chunk(1 << 20, ']');
    for (int i = 0; i < 8 && out; ++i) out << chunk;
  });
  expect_error_code([&] { open_input(fifo, limits); }, ErrorCode::kLimitExceeded);
  writer.join();
  std::signal(SIGPIPE, previous_sigpipe);
  std::remove(fifo.c_str());
  EXPECT_GE(default_max_input_bytes(), uint64_t{1} << 20);
  EXPECT_LE(default_max_input_bytes(), kMaxInputBytes);
}

TEST(Input, AFileThatShrinksWhileMappedIsReportedNotASigbus) {
  std::string path = temp_file(std::string(size_t{4} << 20, 'N'));
  InputBuffer input = open_input(path);
  ASSERT_FALSE(input.changed());
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  // Past the new end: without the guard this read is a SIGBUS.
  uint64_t sum = 0;
  for (uint64_t i = 0; i < input.size(); i += 4096) sum += input.bytes()[i];
  EXPECT_EQ(sum, uint64_t{'N'});  // the first page is still the file; the rest reads as zeros
  EXPECT_TRUE(input.changed());
  expect_error_code([&] { input.throw_if_changed(); }, ErrorCode::kFileChanged);
  std::remove(path.c_str());
}

TEST(Input, MissingFileAndDirectory) {
  expect_error_code([] { open_input("/nonexistent/memsnap.pickle"); }, ErrorCode::kFileNotFound);
  expect_error_code([] { open_input("/"); }, ErrorCode::kUnreadable);
  expect_error_code([] { open_input(temp_file("")); }, ErrorCode::kEmptyFile);
}

}  // namespace
}  // namespace memsnap
