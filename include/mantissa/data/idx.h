#pragma once
// IDX files (the MNIST family's format): a big-endian header -- magic 0x000008NN where 0x08
// means unsigned bytes and NN the number of dims, then one uint32 per dim -- followed by the
// raw bytes. Files may be gzip-compressed (detected from the content) or plain.
#include <cstdint>
#include <string>

#include "mantissa/core/tensor.h"

namespace mantissa::data {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // [N, rows, cols] uint8
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // [N] uint8

// Reads an unsigned-byte IDX file of 1 to 4 dims into a uint8 tensor shaped like its header.
// Every failure is a mantissa::Error naming the file and the problem: missing file (with how
// to install Fashion-MNIST), bad magic, truncated or over-long data, not gzip / corrupt gzip.
Tensor read_idx(const std::string& path);
// As read_idx, additionally requiring the images magic 0x00000803 ([N, rows, cols]).
Tensor read_idx_images(const std::string& path);
// As read_idx, additionally requiring the labels magic 0x00000801 ([N]).
Tensor read_idx_labels(const std::string& path);

// Writes a uint8 tensor of 1 to 4 dims as an IDX file, gzip-compressed when `gzip` is true
// (for making subsets and test fixtures).
void write_idx(const std::string& path, const Tensor& t, bool gzip);

}  // namespace mantissa::data
