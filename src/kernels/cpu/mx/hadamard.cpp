#include "kernels/cpu/mx/hadamard.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/cpu/mx/hadamard_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr const char* kWhere = "random Hadamard transform";
// Columns transformed side by side (one vector register of float32 on AVX-512).
constexpr int64_t kStrip = 16;
// The side of the square of src one work item of rht_transpose takes (a multiple of 16).
constexpr int64_t kTile = 128;
// Below this many elements one thread does the whole transform.
constexpr int64_t kParallelFrom = 1 << 16;
// Rows of src (columns of the transposed cast) one work item of rht_transpose_nvfp4 takes: a
// multiple of the stochastic rounding's 256-column groups (philox.h, sr_byte).
constexpr int64_t kRun = 256;

// The transform of 16 blocks at once: v[i][k] is element i of block k. Sign, four butterfly
// stages, 1/4; each statement runs over k, which the compiler vectorizes to the width of the
// function it is inlined into.
[[gnu::always_inline]] inline void transform16(float (&v)[kRhtSize][kStrip]) {
  for (int64_t i = 0; i < kRhtSize; ++i)
    for (int64_t k = 0; k < kStrip; ++k) v[i][k] *= kRhtSigns[i];
  for (int64_t h = 1; h < kRhtSize; h *= 2) {
    for (int64_t i = 0; i < kRhtSize; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        for (int64_t k = 0; k < kStrip; ++k) {
          const float a = v[j][k], b = v[j + h][k];
          v[j][k] = a + b;
          v[j + h][k] = a - b;
        }
      }
    }
  }
  for (int64_t i = 0; i < kRhtSize; ++i)
    for (int64_t k = 0; k < kStrip; ++k) v[i][k] *= 0.25f;
}

// Blocks [b0, b0 + count) of x (count <= 16), in place.
[[gnu::always_inline]] inline void blocks_body(float* x, int64_t b0, int64_t count) {
  float v[kRhtSize][kStrip] = {};
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < kRhtSize; ++i) v[i][k] = x[(b0 + k) * kRhtSize + i];
  transform16(v);
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < kRhtSize; ++i) x[(b0 + k) * kRhtSize + i] = v[i][k];
}

// Rows [m0, m0 + 16) x columns [c0, c0 + 16) of src (cut at its edges) into 16 blocks: block k
// (from column c0 + k) at o + k * stride.
[[gnu::always_inline]] inline void tile_body(const void* src, DType src_dtype, int64_t rows,
                                             int64_t cols, int64_t m0, int64_t c0, float* o,
                                             int64_t stride) {
  const int64_t m_count = std::min(kRhtSize, rows - m0), c_count = std::min(kStrip, cols - c0);
  float v[kRhtSize][kStrip] = {};
  for (int64_t i = 0; i < m_count; ++i) {
    const int64_t base = (m0 + i) * cols + c0;
    if (src_dtype == kFloat32) {
      const float* s = static_cast<const float*>(src) + base;
      for (int64_t k = 0; k < c_count; ++k) v[i][k] = s[k];
    } else {
      const uint16_t* s = static_cast<const uint16_t*>(src) + base;
      for (int64_t k = 0; k < c_count; ++k) v[i][k] = bf16_bits_to_float(s[k]);
    }
  }
  transform16(v);
  // Transposed in registers' order: out row c0 + k takes v[0..15][k].
  float t[kStrip][kRhtSize];
  for (int64_t i = 0; i < kRhtSize; ++i)
    for (int64_t k = 0; k < kStrip; ++k) t[k][i] = v[i][k];
  for (int64_t k = 0; k < c_count; ++k)
    for (int64_t i = 0; i < kRhtSize; ++i) o[k * stride + i] = t[k][i];
}

// The largest |value| of n outputs as its bits, so that every NaN (whose bits lie above
// infinity's) wins: the maximum of the outputs' magnitude bits, compared as integers.
[[gnu::always_inline]] inline uint32_t abs_bits_max(const float* x, int64_t n, uint32_t m) {
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu);
  return m;
}

// A cut tile (rows or columns past src's edge), and the baseline's every tile.
[[gnu::always_inline]] inline uint32_t cut_tile(const void* src, DType src_dtype, int64_t rows,
                                                int64_t cols, int64_t m0, int64_t c0, float* o,
                                                int64_t stride) {
  tile_body(src, src_dtype, rows, cols, m0, c0, o, stride);
  uint32_t m = 0;
  for (int64_t k = 0; k < std::min(kStrip, cols - c0); ++k)
    m = abs_bits_max(o + k * stride, kRhtSize, m);
  return m;
}

// A tile's function of one level: tile_body's blocks, returning their abs_bits_max.
using TileFn = uint32_t (*)(const void* src, DType d, int64_t rows, int64_t cols, int64_t m0,
                            int64_t c0, float* o, int64_t stride);

uint32_t tile_baseline(const void* src, DType d, int64_t rows, int64_t cols, int64_t m0, int64_t c0,
                       float* o, int64_t stride) {
  return cut_tile(src, d, rows, cols, m0, c0, o, stride);
}

// The AVX2 tile: 16 rows x 8 columns of src in 16 registers (hadamard_avx2.h), then the 1/4 and
// two 8x8 transposes into 8 rows of out. Used at the AVX-512 level too (its bits are the same).
// Columns [c0, c0 + 8) of rows [m0, m0 + 16), all inside src; returns the outputs' abs_bits_max
// folded into `m` lane by lane.
__attribute__((target("avx2"))) inline __m256i tile8_avx2(const void* src, DType d, int64_t cols,
                                                          int64_t m0, int64_t c0, float* o,
                                                          int64_t stride, __m256i m) {
  __m256 v[kRhtSize];
  rht_avx2::butterflies8(src, d, cols, m0, c0, v);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
#pragma GCC unroll 16
  for (int64_t i = 0; i < kRhtSize; ++i) {
    v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(0.25f));
    m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
  }
  rht_avx2::transpose8(v);
  rht_avx2::transpose8(v + 8);
  for (int64_t k = 0; k < 8; ++k) {
    _mm256_storeu_ps(o + k * stride, v[k]);
    _mm256_storeu_ps(o + k * stride + 8, v[8 + k]);
  }
  return m;
}

__attribute__((target("avx2"))) uint32_t tile_avx2(const void* src, DType d, int64_t rows,
                                                   int64_t cols, int64_t m0, int64_t c0, float* o,
                                                   int64_t stride) {
  if (rows - m0 < kRhtSize || cols - c0 < kStrip)
    return cut_tile(src, d, rows, cols, m0, c0, o, stride);
  __m256i m = _mm256_setzero_si256();
  m = tile8_avx2(src, d, cols, m0, c0, o, stride, m);
  m = tile8_avx2(src, d, cols, m0, c0 + 8, o + 8 * stride, stride, m);
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  return *std::max_element(lanes, lanes + 8);
}

// The same tile's abs_bits_max without storing its transform: the butterflies' largest magnitude
// times 1/4, taken once (a product by 1/4 rounds monotonically, so the largest product is the
// product of the largest; NaN stays NaN).
__attribute__((target("avx2"))) uint32_t tile_amax_avx2(const void* src, DType d, int64_t rows,
                                                        int64_t cols, int64_t m0, int64_t c0,
                                                        float* scratch, int64_t stride) {
  if (rows - m0 < kRhtSize || cols - c0 < kStrip)
    return cut_tile(src, d, rows, cols, m0, c0, scratch, stride);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int64_t half = 0; half < kStrip; half += 8) {
    __m256 v[kRhtSize];
    rht_avx2::butterflies8(src, d, cols, m0, c0 + half, v);
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i)
      m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  const uint32_t top = *std::max_element(lanes, lanes + 8);
  if (top > 0x7F800000u) return top;
  return std::bit_cast<uint32_t>(std::bit_cast<float>(top) * 0.25f);
}

// One function per SIMD level around the same bodies: the products are by +-1 and 1/4 only, so
// no level's vectors (or fused multiply-adds) can change a bit.
void blocks_baseline(float* x, int64_t b0, int64_t count) { blocks_body(x, b0, count); }
__attribute__((target("avx2"))) void blocks_avx2(float* x, int64_t b0, int64_t count) {
  blocks_body(x, b0, count);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) void blocks_avx512(float* x, int64_t b0,
                                                                        int64_t count) {
  blocks_body(x, b0, count);
}

TileFn tile_fn(SimdLevel level) {
  return std::min(level, simd_level()) >= SimdLevel::kAvx2 ? tile_avx2 : tile_baseline;
}

void check_source(const void* src, DType src_dtype, int64_t rows, int64_t cols, const void* out) {
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16, kWhere,
                 "source dtype {} is not float32 or bfloat16", src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, kWhere, "shape [{}, {}] has a negative size", rows, cols);
  MANTISSA_CHECK(rows * cols == 0 || (src && out), kWhere, "null buffer for a [{}, {}] transform",
                 rows, cols);
}

float amax_of_bits(uint32_t m) {
  return m > 0x7F800000u ? std::bit_cast<float>(0x7FC00000u) : std::bit_cast<float>(m);
}

// Rows c0..c0 + cn - 1 (cn <= kStrip) of RHT(src^T), its columns r0..r_end (whole transform
// blocks, at most kRun columns), cast by transforming them into a buffer whose rows are then
// encoded as segments of the transposed tensor's rows.
void cast_through_buffer(TileFn run, const detail::MxKernels& k, const void* src, DType src_dtype,
                         int64_t rows, int64_t cols, int64_t c0, int64_t cn, int64_t r0,
                         int64_t r_end, const Nvfp4Encoding& e, uint8_t* codes, int64_t code_row,
                         uint8_t* scales, int64_t scale_row) {
  alignas(32) float buf[kStrip * kRun];  // [16][kRun]: rows c0.. of the transform, from r0
  for (int64_t m0 = r0; m0 < r_end; m0 += kRhtSize)
    run(src, src_dtype, rows, cols, m0, c0, buf + (m0 - r0), kRun);
  const int64_t rn = r_end - r0;
  for (int64_t c = 0; c < cn; ++c) {
    const float* x = buf + c * kRun;
    uint8_t* cp = codes + (c0 + c) * code_row + r0 / 2;
    uint8_t* sp = scales + (c0 + c) * scale_row + r0 / kNvfp4Block;
    if (e.rounding == Fp4Rounding::kStochastic) {
      k.nvfp4_encode_sr(x, kFloat32, rn, e.tensor_scale, nullptr, e.seed, e.offset, c0 + c, r0, cp,
                        sp);
    } else {
      k.nvfp4_encode(x, kFloat32, rn, e.tensor_scale, nullptr, cp, sp);
    }
  }
}

}  // namespace

void rht_blocks(float* x, int64_t n, SimdLevel level) {
  MANTISSA_CHECK(n >= 0 && n % kRhtSize == 0, kWhere,
                 "{} elements are not whole blocks of {} (pad the rows to a multiple of {})", n,
                 kRhtSize, kRhtSize);
  const SimdLevel l = std::min(level, simd_level());
  auto* run = l >= SimdLevel::kAvx512 ? blocks_avx512
              : l >= SimdLevel::kAvx2 ? blocks_avx2
                                      : blocks_baseline;
  const int64_t blocks = n / kRhtSize;
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t b0 = 0; b0 < blocks; b0 += kStrip) run(x, b0, std::min(kStrip, blocks - b0));
}

void rht_transpose(const void* src, DType src_dtype, int64_t rows, int64_t cols, float* out,
                   SimdLevel level, float* amax) {
  check_source(src, src_dtype, rows, cols, out);
  const TileFn run = tile_fn(level);
  const int64_t padded = rht_padded(rows);
  // Work item: a tile of kTile x kTile of src, in 16 x 16 pieces that become 16 blocks of 16 in
  // 16 rows of out. Tiles that large keep the pages a transposing pass touches few (its reads
  // and writes go a whole row apart).
  const int64_t row_tiles = (padded + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t items = row_tiles * col_tiles;
  std::vector<uint32_t> item_max(static_cast<size_t>(items), 0);
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t tm = (item % row_tiles) * kTile, tc = (item / row_tiles) * kTile;
    uint32_t m = 0;
    for (int64_t m0 = tm; m0 < std::min(tm + kTile, padded); m0 += kRhtSize)
      for (int64_t c0 = tc; c0 < std::min(tc + kTile, cols); c0 += kStrip)
        m = std::max(m, run(src, src_dtype, rows, cols, m0, c0, out + c0 * padded + m0, padded));
    item_max[item] = m;
  }
  if (!amax) return;
  *amax = amax_of_bits(items ? *std::max_element(item_max.begin(), item_max.end()) : 0u);
}

float rht_transpose_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         SimdLevel level) {
  check_source(src, src_dtype, rows, cols, src);
  const TileFn run =
      std::min(level, simd_level()) >= SimdLevel::kAvx2 ? tile_amax_avx2 : tile_baseline;
  // Work item: 16 rows of src, across all its columns (rows read whole, in order).
  const int64_t padded = rht_padded(rows), row_blocks = padded / kRhtSize;
  std::vector<uint32_t> row_max(static_cast<size_t>(row_blocks), 0);
#pragma omp parallel for schedule(static) if (row_blocks > 1 && rows * cols >= kParallelFrom)
  for (int64_t b = 0; b < row_blocks; ++b) {
    alignas(32) float scratch[kStrip * kRhtSize];
    uint32_t m = 0;
    for (int64_t c0 = 0; c0 < cols; c0 += kStrip)
      m = std::max(m, run(src, src_dtype, rows, cols, b * kRhtSize, c0, scratch, kRhtSize));
    row_max[b] = m;
  }
  return amax_of_bits(row_blocks ? *std::max_element(row_max.begin(), row_max.end()) : 0u);
}

void rht_transpose_nvfp4(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         const Nvfp4Encoding& encoding, uint8_t* codes, uint8_t* scales,
                         SimdLevel level) {
  check_source(src, src_dtype, rows, cols, codes);
  MANTISSA_CHECK(!encoding.tiles_16x16, kWhere,
                 "the transformed transpose is cast in 1x16 blocks, not 16x16 tiles");
  const TileFn run = tile_fn(level);
  const bool avx2 = std::min(level, simd_level()) >= SimdLevel::kAvx2;
  const detail::MxKernels& k = detail::kernels_for(level);
  const int64_t padded = rht_padded(rows), strips = (cols + kStrip - 1) / kStrip;
  const int64_t code_row = padded / 2, scale_row = padded / kNvfp4Block;
  // The transform blocks whose 16 rows all lie inside src end here.
  const int64_t whole = rows / kRhtSize * kRhtSize;
  // Work item: kStrip columns of src over kRun of its rows (a multiple of the stochastic
  // rounding's 256-column groups). With AVX2, 8 columns at a time are transformed and encoded in
  // registers (detail::nvfp4_rht_columns_avx2); what that leaves (a block cut by src's last
  // row, columns short of 8) goes through cast_through_buffer.
  const int64_t runs = (padded + kRun - 1) / kRun, items = strips * runs;
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t item = 0; item < items; ++item) {
    // Neighbouring strips of the same rows one after the other: they share src's cache lines.
    const int64_t s0 = (item % strips) * kStrip, s1 = std::min(s0 + kStrip, cols);
    const int64_t r0 = (item / strips) * kRun, r_end = std::min(r0 + kRun, padded);
    int64_t c0 = s0;
    if (avx2) {
      const int64_t m_end = std::clamp(whole, r0, r_end);
      for (; c0 + 8 <= s1; c0 += 8)
        detail::nvfp4_rht_columns_avx2(src, src_dtype, cols, c0, r0, m_end, encoding, codes,
                                       code_row, scales, scale_row);
      if (c0 > s0 && m_end < r_end)
        cast_through_buffer(run, k, src, src_dtype, rows, cols, s0, c0 - s0, m_end, r_end, encoding,
                            codes, code_row, scales, scale_row);
    }
    if (c0 < s1)
      cast_through_buffer(run, k, src, src_dtype, rows, cols, c0, s1 - c0, r0, r_end, encoding,
                          codes, code_row, scales, scale_row);
  }
}

}  // namespace mantissa::kernels::mx
