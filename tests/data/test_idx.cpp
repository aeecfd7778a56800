// IDX reader: plain and gzipped fixtures written by the test, and every failure mode.
#include "mantissa/data/idx.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "data/idx_fixtures.h"

namespace mantissa::data {
namespace {
using namespace testing;

TEST(DataIdx, ReadsPlainAndGzippedImagesAndLabels) {
  TempDir dir;
  const Bytes images = idx_bytes(0x803, {3, 28, 28}, image_data(3));
  const Bytes labels = idx_bytes(0x801, {3}, label_data(3));
  write_plain(dir.file("img"), images);
  write_gzip(dir.file("img.gz"), images);
  write_plain(dir.file("lab"), labels);
  write_gzip(dir.file("lab.gz"), labels);

  for (const char* name : {"img", "img.gz"}) {
    const Tensor t = read_idx_images(dir.file(name));
    EXPECT_EQ(t.dtype(), kUInt8);
    EXPECT_EQ(t.shape(), (Shape{3, 28, 28}));
    const auto v = t.to_vector<int64_t>();
    EXPECT_EQ(v[0], 0);
    EXPECT_EQ(v[300], 300 % 256);
    EXPECT_EQ(v[2 * 784 + 5], (2 * 7 + 5) % 256);
    EXPECT_EQ(v.back(), (2 * 7 + 783) % 256);
  }
  for (const char* name : {"lab", "lab.gz"}) {
    const Tensor t = read_idx_labels(dir.file(name));
    EXPECT_EQ(t.shape(), (Shape{3}));
    EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  }
  // The generic reader takes any unsigned-byte IDX file.
  EXPECT_EQ(read_idx(dir.file("img.gz")).shape(), (Shape{3, 28, 28}));
  EXPECT_EQ(read_idx(dir.file("lab")).shape(), (Shape{3}));
}

TEST(DataIdx, WriterRoundTrips) {
  TempDir dir;
  const Tensor t = tensor<uint8_t>({1, 2, 3, 250, 251, 252}, {2, 3});
  for (bool gz : {false, true}) {
    const std::string path = dir.file(gz ? "t.gz" : "t");
    write_idx(path, t, gz);
    const Bytes raw = read_all(path);
    EXPECT_EQ(raw[0], gz ? 0x1f : 0x00);  // gzip magic, or the IDX magic's zero byte
    if (!gz) EXPECT_EQ(raw.size(), 4u + 8u + 6u);
    const Tensor back = read_idx(path);
    EXPECT_EQ(back.shape(), (Shape{2, 3}));
    EXPECT_EQ(back.to_vector<int64_t>(), t.to_vector<int64_t>());
  }
  EXPECT_THROW(write_idx(dir.file("f"), zeros({2}), false), Error);
}

TEST(DataIdx, MissingFileSaysHowToInstallTheDataset) {
  TempDir dir;
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  expect_error_with([&] { read_idx_images(path); },
                    {"[idx]", path, "dataset-fashion-mnist",
                     "apt-get install dataset-fashion-mnist", "--data-dir", "MANTISSA_DATA_DIR"});
}

TEST(DataIdx, BadMagicNamesFileAndNumber) {
  TempDir dir;
  write_plain(dir.file("labels"), idx_bytes(0x801, {2}, {1, 2}));
  expect_error_with([&] { read_idx_images(dir.file("labels")); },
                    {dir.file("labels"), "bad magic number 0x00000801", "0x00000803"});
  write_gzip(dir.file("floats.gz"), idx_bytes(0x0d01, {1}, {0, 0, 0, 0}));
  expect_error_with([&] { read_idx(dir.file("floats.gz")); }, {"bad magic number 0x00000d01"});
  write_plain(dir.file("text"), {'h', 'e', 'l', 'l', 'o', '\n'});
  expect_error_with([&] { read_idx_labels(dir.file("text")); }, {"bad magic number"});
}

TEST(DataIdx, TruncatedDataIsAnError) {
  TempDir dir;
  Bytes full = idx_bytes(0x803, {3, 28, 28}, image_data(3));
  Bytes cut(full.begin(), full.end() - 100);
  write_plain(dir.file("cut"), cut);
  expect_error_with([&] { read_idx_images(dir.file("cut")); },
                    {dir.file("cut"), "truncated", "[3, 28, 28] = 2352 bytes", "holds only 2252"});
  // Complete gzip stream of incomplete data.
  write_gzip(dir.file("cut.gz"), cut);
  expect_error_with([&] { read_idx_images(dir.file("cut.gz")); },
                    {dir.file("cut.gz"), "truncated", "2352 bytes", "holds only 2252"});
  // A header cut short.
  write_plain(dir.file("short"), Bytes(full.begin(), full.begin() + 10));
  expect_error_with([&] { read_idx_images(dir.file("short")); }, {"truncated header"});
  write_plain(dir.file("tiny"), {0, 0});
  expect_error_with([&] { read_idx(dir.file("tiny")); }, {"truncated"});
  // A header asking for far more than the file could hold fails before allocating it.
  write_gzip(dir.file("huge.gz"), idx_bytes(0x803, {4000000, 28, 28}, {1, 2, 3}));
  const size_t huge_size = read_all(dir.file("huge.gz")).size();
  expect_error_with(
      [&] { read_idx_images(dir.file("huge.gz")); },
      {"truncated", "[4000000, 28, 28] = 3136000000 bytes",
       fmt::format("of the {}-byte file can hold at most {}", huge_size, huge_size * 1032 + 1024)});
  // Extra data beyond what the header describes.
  Bytes longer = full;
  longer.push_back(7);
  write_gzip(dir.file("long.gz"), longer);
  expect_error_with([&] { read_idx_images(dir.file("long.gz")); }, {"1 bytes of extra data"});
}

// A FIFO blocked the open forever (and SIGTERM did not end the run); a directory was "not a
// gzip file (it starts with bytes 0x00 0x00)".
TEST(DataIdx, FifoOrDirectoryIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("train-images-idx3-ubyte.gz");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error_with([&] { read_idx_images(fifo); }, {fifo, "is not a regular file"});
  const std::string sub = dir.file("t10k-labels-idx1-ubyte.gz");
  std::filesystem::create_directories(sub);
  expect_error_with([&] { read_idx_labels(sub); }, {sub, "is a directory, not an IDX file"});
}

// Dims whose product passes 2^64 wrapped to a small byte count and passed the size check; the
// error then came from the tensor's shape, without the file's name.
TEST(DataIdx, DimsWhoseProductOverflowsAreImplausible) {
  TempDir dir;
  write_plain(dir.file("wrap"), idx_bytes(0x803, {1u << 31, 4, 1u << 31}, {}));
  expect_error_with([&] { read_idx_images(dir.file("wrap")); },
                    {dir.file("wrap"), "implausible dims [2147483648, 4, 2147483648]"});
  // A zero dimension is an empty data set, whatever the others.
  write_plain(dir.file("empty"), idx_bytes(0x803, {0, 28, 28}, {}));
  EXPECT_EQ(read_idx_images(dir.file("empty")).shape(), (Shape{0, 28, 28}));
}

TEST(DataIdx, NotGzipAndCorruptGzip) {
  TempDir dir;
  const Bytes plain = idx_bytes(0x803, {3, 28, 28}, image_data(3));
  write_plain(dir.file("plain.gz"), plain);
  expect_error_with([&] { read_idx_images(dir.file("plain.gz")); },
                    {dir.file("plain.gz"), "not a gzip file"});

  write_gzip(dir.file("good.gz"), plain);
  const Bytes gz = read_all(dir.file("good.gz"));
  // Compressed stream cut in half (an incomplete download): "truncated", the bytes the header
  // asks for and those there, and the file's size (it said "truncated gzip data" alone).
  write_plain(dir.file("half.gz"), Bytes(gz.begin(), gz.begin() + gz.size() / 2));
  expect_error_with([&] { read_idx_images(dir.file("half.gz")); },
                    {dir.file("half.gz"),
                     "truncated: the header describes [3, 28, 28] = 2352 bytes "
                     "of data but the decompressed data holds only ",
                     fmt::format("(the {}-byte gzip file ends before its end-of-stream marker: it "
                                 "was cut short, e.g. by an incomplete download)",
                                 gz.size() / 2)});
  // Cut inside the header, and after the data but before the trailer (CRC and length).
  write_plain(dir.file("head.gz"), Bytes(gz.begin(), gz.begin() + 12));
  expect_error_with([&] { read_idx_images(dir.file("head.gz")); },
                    {"truncated", "too short for the 4-byte IDX magic number",
                     "(the 12-byte gzip file ends before its end-of-stream marker"});
  write_plain(dir.file("trailer.gz"), Bytes(gz.begin(), gz.end() - 8));
  expect_error_with([&] { read_idx_images(dir.file("trailer.gz")); },
                    {"truncated: the 2352 bytes of data the header describes are there, but not "
                     "the gzip trailer (CRC and length)",
                     fmt::format("the {}-byte gzip file", gz.size() - 8)});
  // Wrong CRC in the trailer (the last 8 bytes are CRC32 and length).
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xff;
  write_plain(dir.file("crc.gz"), bad_crc);
  expect_error_with([&] { read_idx_images(dir.file("crc.gz")); },
                    {dir.file("crc.gz"), "corrupt gzip data", "incorrect data check"});
  // Garbage deflate data right after the 10-byte gzip header.
  Bytes garbage = gz;
  for (size_t i = 10; i < 20; ++i) garbage[i] = 0xff;
  write_plain(dir.file("garbage.gz"), garbage);
  expect_error_with([&] { read_idx_images(dir.file("garbage.gz")); },
                    {dir.file("garbage.gz"), "corrupt gzip data"});
}

}  // namespace
}  // namespace mantissa::data
