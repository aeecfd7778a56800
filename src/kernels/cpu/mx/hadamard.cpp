#include "kernels/cpu/mx/hadamard.h"

#include <algorithm>

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

// Rows [m0, m0 + 16) x columns [c0, c0 + 16) of src (cut at its edges) into 16 blocks of out.
[[gnu::always_inline]] inline void tile_body(const void* src, DType src_dtype, int64_t rows,
                                             int64_t cols, int64_t m0, int64_t c0, float* out,
                                             int64_t padded) {
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
  for (int64_t k = 0; k < c_count; ++k) {
    float* o = out + (c0 + k) * padded + m0;
    for (int64_t i = 0; i < kRhtSize; ++i) o[i] = t[k][i];
  }
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
void tile_baseline(const void* src, DType d, int64_t rows, int64_t cols, int64_t m0, int64_t c0,
                   float* out, int64_t padded) {
  tile_body(src, d, rows, cols, m0, c0, out, padded);
}
__attribute__((target("avx2"))) void tile_avx2(const void* src, DType d, int64_t rows, int64_t cols,
                                               int64_t m0, int64_t c0, float* out, int64_t padded) {
  tile_body(src, d, rows, cols, m0, c0, out, padded);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) void tile_avx512(const void* src, DType d,
                                                                      int64_t rows, int64_t cols,
                                                                      int64_t m0, int64_t c0,
                                                                      float* out, int64_t padded) {
  tile_body(src, d, rows, cols, m0, c0, out, padded);
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
                   SimdLevel level) {
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16, kWhere,
                 "source dtype {} is not float32 or bfloat16", src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, kWhere, "shape [{}, {}] has a negative size", rows, cols);
  MANTISSA_CHECK(rows * cols == 0 || (src && out), kWhere, "null buffer for a [{}, {}] transform",
                 rows, cols);
  const SimdLevel l = std::min(level, simd_level());
  auto* run = l >= SimdLevel::kAvx512 ? tile_avx512
              : l >= SimdLevel::kAvx2 ? tile_avx2
                                      : tile_baseline;
  const int64_t padded = rht_padded(rows);
  // Work item: a tile of kTile x kTile of src, in 16 x 16 pieces that become 16 blocks of 16 in
  // 16 rows of out. Tiles that large keep the pages a transposing pass touches few (its reads
  // and writes go a whole row apart).
  const int64_t row_tiles = (padded + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t items = row_tiles * col_tiles;
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t tm = (item % row_tiles) * kTile, tc = (item / row_tiles) * kTile;
    for (int64_t m0 = tm; m0 < std::min(tm + kTile, padded); m0 += kRhtSize)
      for (int64_t c0 = tc; c0 < std::min(tc + kTile, cols); c0 += kStrip)
        run(src, src_dtype, rows, cols, m0, c0, out, padded);
  }
}

}  // namespace mantissa::kernels::mx
