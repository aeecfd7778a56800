#pragma once
// Writes small IDX files into a per-test temporary directory, byte by byte (big-endian header
// then data), plain or gzipped with zlib, so the reader is tested against independently
// produced files. Also hosts helpers shared by the data tests.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace mantissa::data::testing {

using Bytes = std::vector<uint8_t>;

using mantissa::testing::TempDir;  // support/temp_dir.h

inline Bytes idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b;
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
  };
  put32(magic);
  for (uint32_t d : dims) put32(d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

inline void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

inline Bytes read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// n images of 28x28 whose pixel j of image i is (i * 7 + j) % 256, and labels i % 10.
inline Bytes image_data(uint32_t n) {
  Bytes d(n * 784);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < 784; ++j) d[i * 784 + j] = static_cast<uint8_t>((i * 7 + j) % 256);
  return d;
}
inline Bytes label_data(uint32_t n) {
  Bytes d(n);
  for (uint32_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i % 10);
  return d;
}

// Expects fn to throw a mantissa::Error whose message contains every needle.
template <class Fn>
void expect_error_with(Fn&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a mantissa::Error";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message lacks '" << n << "': " << e.what();
  }
}

}  // namespace mantissa::data::testing
