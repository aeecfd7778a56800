#pragma once
// An NVFP4 cast's codes, scales and statistics at one SIMD level, and the check that another
// level gives them bit for bit (with statistics and without), for the kernel tests that hold
// every level to the scalar body.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"

namespace mantissa::testing {

struct Nvfp4Cast {
  std::vector<uint8_t> codes, scales;
  kernels::mx::MxCastStats stats;
};

// The cast of a rows x cols float32 or bfloat16 source at `level`, with statistics.
inline Nvfp4Cast nvfp4_cast_at(const void* x, DType dtype, int64_t rows, int64_t cols,
                               const kernels::mx::Nvfp4Encoding& e, SimdLevel level) {
  Nvfp4Cast out{std::vector<uint8_t>(static_cast<size_t>(rows * ((cols + 1) / 2)), 0xAB),
                std::vector<uint8_t>(static_cast<size_t>(rows * ((cols + 15) / 16)), 0xAB),
                {}};
  kernels::mx::nvfp4_quantize(x, dtype, rows, cols, e, out.codes.data(), out.scales.data(), level,
                              &out.stats);
  return out;
}

// The cast at `level` gives `want`'s codes, scales and statistics, and the same codes and scales
// without statistics.
inline void expect_nvfp4_cast(const void* x, DType dtype, int64_t rows, int64_t cols,
                              const kernels::mx::Nvfp4Encoding& e, SimdLevel level,
                              const Nvfp4Cast& want) {
  const Nvfp4Cast got = nvfp4_cast_at(x, dtype, rows, cols, e, level);
  EXPECT_EQ(got.codes, want.codes);
  EXPECT_EQ(got.scales, want.scales);
  EXPECT_EQ(got.stats.saturated, want.stats.saturated);
  EXPECT_EQ(got.stats.flushed, want.stats.flushed);
  EXPECT_EQ(std::bit_cast<uint32_t>(got.stats.amax), std::bit_cast<uint32_t>(want.stats.amax));
  EXPECT_EQ(std::bit_cast<uint32_t>(got.stats.scale), std::bit_cast<uint32_t>(want.stats.scale));
  EXPECT_EQ(std::bit_cast<uint64_t>(got.stats.peak), std::bit_cast<uint64_t>(want.stats.peak));
  std::vector<uint8_t> codes(want.codes.size(), 0xCD), scales(want.scales.size(), 0xCD);
  kernels::mx::nvfp4_quantize(x, dtype, rows, cols, e, codes.data(), scales.data(), level);
  EXPECT_EQ(codes, want.codes);
  EXPECT_EQ(scales, want.scales);
}

}  // namespace mantissa::testing
