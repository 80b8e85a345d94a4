// Input layer: magic-byte detection, decompression, refusals.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "expect_error.h"
#include "io/input.h"
#include "memsnap/error.h"

namespace memsnap {
namespace {

using memsnap::testing::expect_error_containing;

std::span<const uint8_t> span_of(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

std::string message_of(const std::string& text) {
  try {
    check_looks_like_pickle(span_of(text));
  } catch (const Error& error) {
    return error.what();
  }
  return "accepted";
}

TEST(Input, RecognisesWhatIsNotAPickle) {
  EXPECT_EQ(message_of(""), "empty file: the dump was probably interrupted");
  EXPECT_NE(message_of("PK\x03\x04rest").find("torch.save zip archive"), std::string::npos);
  EXPECT_NE(message_of("  {\"segments\": []}").find("looks like JSON"), std::string::npos);
  EXPECT_EQ(message_of("\x80\x04N."), "accepted");
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

TEST(Input, TruncatedGzipIsReported) {
  std::string data(4096, 'x');
  uLongf bound = compressBound(data.size());
  std::string packed(bound, '\0');
  z_stream stream{};
  deflateInit2(&stream, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY);
  stream.next_in = reinterpret_cast<Bytef*>(data.data());
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(packed.data());
  stream.avail_out = static_cast<uInt>(packed.size());
  deflate(&stream, Z_FINISH);
  packed.resize(stream.total_out);
  deflateEnd(&stream);
  std::string cut = packed.substr(0, packed.size() / 2);
  expect_error_containing<Error>([&] { gunzip(span_of(cut), kMaxDecompressedBytes); },
                                 "gzip: truncated compressed stream (the file was cut short)");
  EXPECT_EQ(gunzip(span_of(packed), kMaxDecompressedBytes).size(), data.size());
  // The output ceiling stops a decompression bomb.
  expect_error_containing<Error>(
      [&] { gunzip(span_of(packed), 1024); },
      "decompressed data exceeds 1024 bytes; refusing to inflate further");
}

TEST(Input, MissingFileAndDirectory) {
  expect_error_containing<Error>([] { open_input("/nonexistent/memsnap.pickle"); },
                                 "No such file or directory");
  expect_error_containing<Error>([] { open_input("/"); }, "is a directory");
  expect_error_containing<Error>([] { open_input(temp_file("")); },
                                 "empty file: the dump was probably interrupted");
}

}  // namespace
}  // namespace memsnap
