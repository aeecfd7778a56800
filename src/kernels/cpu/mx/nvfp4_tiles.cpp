// The 16x16 tiles' amax of NVFP4's 2-D weight scaling (mx_cast.h, nvfp4_tile_amax): a tile's
// largest magnitude bits (compared as integers, so that NaN, whose bits lie above infinity's,
// wins). One read of the source, in order. The AVX2 loop takes each row's blocks' largest by
// transposed maxima (16 bfloat16 or 8 float32 blocks at a time) and folds them into its tile
// row's; the scalar level folds each row into per-column maxima. Every level gives the same
// maxima.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/common/aligned_vector.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kTile = kNvfp4Block;
// Below this many elements one thread takes every tile row.
constexpr int64_t kParallelFrom = 1 << 16;

uint32_t abs_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu; }

// acc[c] = max(acc[c], |src[c]|'s bits) for c < n.
void fold_row_scalar(const void* src, DType dtype, int64_t n, uint32_t* acc) {
  for (int64_t c = 0; c < n; ++c) acc[c] = std::max(acc[c], abs_bits(scalar::load(src, dtype, c)));
}

// The scalar level's tile row: rows [r, r_end) folded into acc (cols long), then each block's
// largest into acc[0 .. blocks).
void tile_row_scalar(const void* src, DType dtype, int64_t r, int64_t r_end, int64_t cols,
                     uint32_t* acc) {
  const int64_t item = static_cast<int64_t>(dtype.itemsize());
  std::fill(acc, acc + cols, 0u);
  for (; r < r_end; ++r)
    fold_row_scalar(static_cast<const char*>(src) + r * cols * item, dtype, cols, acc);
  for (int64_t b = 0; b * kTile < cols; ++b) {
    const uint32_t* begin = acc + b * kTile;
    acc[b] = *std::max_element(begin, begin + std::min(kTile, cols - b * kTile));
  }
}

// Each of a bfloat16 row's blocks b0 .. b0 + 15 (the first `count` of them; 16 columns each) has
// its largest magnitude bits taken and folded into acc16[b0 .. b0 + 15] (16-bit lanes, the lanes
// past `count` left as they were), by a transposed maximum.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void fold_blocks_bf16(
    const uint16_t* row, int count, uint16_t* acc16) {
  __m256i m[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k)
    m[k] = k < count ? _mm256_and_si256(
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 * k)),
                           _mm256_set1_epi16(0x7FFF))
                     : _mm256_setzero_si256();
  auto* a = reinterpret_cast<__m256i*>(acc16);
  _mm256_storeu_si256(a,
                      _mm256_max_epu16(_mm256_loadu_si256(a), avx2_lanes::transposed_max16<16>(m)));
}

// The same of a float32 row's blocks b0 .. b0 + 7 (two vectors each) into acc[b0 .. b0 + 7].
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void fold_blocks_f32(
    const float* row, int count, uint32_t* acc) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    m[k] = k < count
               ? _mm256_max_epu32(
                     _mm256_and_si256(
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 * k)),
                         magnitude),
                     _mm256_and_si256(
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 * k + 8)),
                         magnitude))
               : _mm256_setzero_si256();
  auto* a = reinterpret_cast<__m256i*>(acc);
  _mm256_storeu_si256(a, _mm256_max_epu32(_mm256_loadu_si256(a), avx2_lanes::transposed_max8(m)));
}

// The AVX2 tile row: each whole block's largest magnitude bits over rows [r, r_end) of src into
// out[0 .. whole) (out and acc16 hold whole + 16), a short last block's by the scalar fold. Each
// row is read once in order, its blocks' maxima folded into a row of them (the memory streams
// one row best: reading a tile's 16 rows side by side, or folding each row's columns into
// per-column maxima, ran at 60-80 % of its speed).
__attribute__((target("avx2,fma,f16c"))) void tile_row_avx2(const void* src, DType dtype, int64_t r,
                                                            int64_t r_end, int64_t cols,
                                                            uint32_t* out, uint16_t* acc16) {
  const int64_t whole = cols / kTile;
  if (dtype == kFloat32) {
    std::fill(out, out + whole + 8, 0u);
    for (int64_t i = r; i < r_end; ++i) {
      const float* row = static_cast<const float*>(src) + i * cols;
      for (int64_t b = 0; b < whole; b += 8)
        fold_blocks_f32(row + kTile * b, static_cast<int>(std::min<int64_t>(8, whole - b)),
                        out + b);
    }
  } else {
    std::fill(acc16, acc16 + whole + 16, uint16_t{0});
    for (int64_t i = r; i < r_end; ++i) {
      const uint16_t* row = static_cast<const uint16_t*>(src) + i * cols;
      for (int64_t b = 0; b < whole; b += 16)
        fold_blocks_bf16(row + kTile * b, static_cast<int>(std::min<int64_t>(16, whole - b)),
                         acc16 + b);
    }
    for (int64_t b = 0; b < whole; ++b) out[b] = static_cast<uint32_t>(acc16[b]) << 16;
  }
  if (whole * kTile < cols) {
    const int64_t item = static_cast<int64_t>(dtype.itemsize()), c = whole * kTile;
    uint32_t acc[kTile] = {};
    for (int64_t i = r; i < r_end; ++i)
      fold_row_scalar(static_cast<const char*>(src) + (i * cols + c) * item, dtype, cols - c, acc);
    out[whole] = *std::max_element(acc, acc + (cols - c));
  }
}

}  // namespace

float nvfp4_tensor_scale_of(float amax) {
  if (amax != amax) return scalar::float_of(scalar::kTensorAmaxNan) / kNvfp4TensorScaleDivisor;
  return scalar::nvfp4_tensor_scale_of_amax(amax);
}

float nvfp4_tile_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                      float* tile_amax, SimdLevel level) {
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16, "block-format cast",
                 "source dtype {} is not float32 or bfloat16", src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, "block-format cast", "shape [{}, {}] has a negative size",
                 rows, cols);
  const bool avx2 = std::min(level, simd_level()) >= SimdLevel::kAvx2;
  const int64_t tile_rows = (rows + kTile - 1) / kTile, blocks = (cols + kTile - 1) / kTile;
  std::vector<uint32_t> row_max(static_cast<size_t>(tile_rows), 0);
#pragma omp parallel if (tile_rows > 1 && rows * cols >= kParallelFrom)
  {
    // The scalar fold's per-column maxima, or the AVX2 tile row's per-block ones (16 spare for
    // a whole-vector store).
    AlignedVector<uint32_t> acc_buffer(static_cast<size_t>(avx2 ? blocks + 16 : cols));
    AlignedVector<uint16_t> acc16_buffer(static_cast<size_t>(avx2 ? blocks + 16 : 0));
    uint32_t* acc = acc_buffer.data();
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tile_rows; ++t) {
      const int64_t r_end = std::min(rows, (t + 1) * kTile);
      if (avx2) {
        tile_row_avx2(src, src_dtype, t * kTile, r_end, cols, acc, acc16_buffer.data());
      } else {
        tile_row_scalar(src, src_dtype, t * kTile, r_end, cols, acc);
      }
      // acc[b]: block b's largest magnitude bits.
      uint32_t tm = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint32_t m = acc[b];
        tile_amax[t * blocks + b] =
            m > 0x7F800000u ? scalar::float_of(scalar::kQuietNan) : std::bit_cast<float>(m);
        tm = std::max(tm, m);
      }
      row_max[t] = tm;
    }
  }
  const uint32_t m = tile_rows ? *std::max_element(row_max.begin(), row_max.end()) : 0u;
  return m > 0x7F800000u ? scalar::float_of(scalar::kQuietNan) : std::bit_cast<float>(m);
}

}  // namespace mantissa::kernels::mx
