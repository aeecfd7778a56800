// TFRecord framing and a minimal protobuf encoder for TensorBoard scalar events.
#include "train/report/tfrecord.h"

#include <array>
#include <cstring>

namespace mantissa::train::tfrecord {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Protobuf base-128 varint.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double_field(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_tag(out, field, 1);
  put_le(out, bits, 8);
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_double_field(e, 1, wall_time);
  if (step != 0) {  // proto3 omits default values
    put_tag(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));  // negative int64 -> 10-byte varint, as protobuf
  }
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string frame_record(const std::string& payload) {
  std::string out;
  put_le(out, payload.size(), 8);
  put_le(out, mask_crc(crc32c(out.data(), 8)), 4);
  out += payload;
  put_le(out, mask_crc(crc32c(payload.data(), payload.size())), 4);
  return out;
}

std::string encode_file_version_event(double wall_time, const std::string& version) {
  std::string e = event_header(wall_time, 0);
  put_bytes_field(e, 3, version);
  return e;
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::map<std::string, double>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes_field(v, 1, tag);
    const float f = static_cast<float>(value);  // simple_value is a float in the schema
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put_tag(v, 2, 5);
    put_le(v, bits, 4);
    put_bytes_field(summary, 1, v);
  }
  std::string e = event_header(wall_time, step);
  put_bytes_field(e, 5, summary);
  return e;
}

}  // namespace mantissa::train::tfrecord
