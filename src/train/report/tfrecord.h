#pragma once
// The pieces of TensorBoard's event file format, encoded by hand (no protobuf dependency):
// CRC32C, TFRecord framing and the few Event/Summary protobuf fields scalars need.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace mantissa::train::tfrecord {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by TFRecord.
uint32_t crc32c(const void* data, size_t n);
// TFRecord stores CRCs "masked" so a CRC of data that itself contains CRCs stays robust.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// uint64 length, masked CRC of the length bytes, payload, masked CRC of the payload.
std::string frame_record(const std::string& payload);

// Event{wall_time=1, step=2, file_version=3}.
std::string encode_file_version_event(double wall_time, const std::string& version);
// Event{wall_time=1, step=2, summary=5 { value=1 { tag=1, simple_value=2 } ... }}.
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::map<std::string, double>& scalars);

}  // namespace mantissa::train::tfrecord
