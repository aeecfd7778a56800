#pragma once
// Helpers for the safetensors tests: raw file bytes built by hand from the public format
// (length, header, buffer) so the reader is tested against independently produced files.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace mantissa::io::testing {

using Bytes = std::vector<uint8_t>;

inline Bytes le64(uint64_t v) {
  Bytes b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  return b;
}

// 8-byte length + header (unpadded: the format allows it, the reader must too) + buffer.
inline Bytes file_bytes(const std::string& header, const Bytes& buffer) {
  Bytes b = le64(header.size());
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), buffer.begin(), buffer.end());
  return b;
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace mantissa::io::testing
