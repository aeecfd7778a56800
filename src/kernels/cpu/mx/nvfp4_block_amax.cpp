// The 1x16 blocks' amax of NVFP4's row cast (mx_cast.h, nvfp4_block_amax): each block's largest
// magnitude bits (compared as integers, so that NaN, whose bits lie above infinity's, wins) and
// the tensor's, in one read of the source, in order. The row cast given them
// (Nvfp4Encoding::block_amax) reads the source once more for its codes instead of taking each
// block's amax as well. Float32 sources only: for a bfloat16 source the pass's writes (a float
// per 16 elements) cost what the cast saves, so its cast takes the blocks' amax itself
// (bench/results/2026-12-01-0225-nvfp410.md). The AVX2 loop takes 8 blocks' largest at a time by
// a transposed maximum; the scalar level and a row's short last block scan. Every level gives
// the same amax.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kBlock = kNvfp4Block;
// Below this many elements one thread takes every block.
constexpr int64_t kParallelFrom = 1 << 16;
// Blocks per work item where the rows are cut into runs of whole blocks.
constexpr int64_t kChunk = 4096;

uint32_t abs_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu; }

// The largest magnitude bits of n elements from src (NaN bits above infinity's).
uint32_t max_bits_scalar(const void* src, DType dtype, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(scalar::load(src, dtype, i)));
  return m;
}

// A block's amax from its largest magnitude bits: NaN bits made the quiet NaN, as
// scalar::block_amax gives it.
float amax_of_bits(uint32_t m) {
  return m > 0x7F800000u ? scalar::float_of(scalar::kQuietNan) : std::bit_cast<float>(m);
}

// The scalar level: `blocks` blocks of 16 from src (the last `last` elements long), their amax
// into out; returns their largest magnitude bits.
uint32_t blocks_scalar(const void* src, DType dtype, int64_t blocks, int64_t last, float* out) {
  const auto item = static_cast<int64_t>(dtype.itemsize());
  uint32_t tm = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint32_t m = max_bits_scalar(static_cast<const char*>(src) + b * kBlock * item, dtype,
                                       b + 1 < blocks ? kBlock : last);
    out[b] = amax_of_bits(m);
    tm = std::max(tm, m);
  }
  return tm;
}

// 8 blocks' largest magnitude bits (32-bit lanes, float32 bits) stored as their amax: lanes
// above infinity's made the quiet NaN.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void store_amax8(float* out,
                                                                                __m256i m) {
  const __m256i nan = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(0x7F800000));
  if (!_mm256_testz_si256(nan, nan))
    m = _mm256_blendv_epi8(m, _mm256_set1_epi32(static_cast<int>(scalar::kQuietNan)), nan);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), m);
}

// The AVX2 level: `blocks` whole blocks of 16 float32 from src, their amax into out; returns
// their largest magnitude bits. 8 blocks a step (two loads a block and a transposed maximum);
// the last 1-7 from zero vectors past them.
__attribute__((target("avx2,fma,f16c"))) uint32_t blocks_avx2(const float* p, int64_t blocks,
                                                              float* out) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i tm = _mm256_setzero_si256();
  for (int64_t b = 0; b < blocks; b += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, blocks - b));
    __m256i m[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const auto* v = reinterpret_cast<const __m256i*>(p + kBlock * (b + k));
      m[k] = k < count ? _mm256_max_epu32(_mm256_and_si256(_mm256_loadu_si256(v), magnitude),
                                          _mm256_and_si256(_mm256_loadu_si256(v + 1), magnitude))
                       : _mm256_setzero_si256();
    }
    const __m256i t = avx2_lanes::transposed_max8(m);
    tm = _mm256_max_epu32(tm, t);
    if (count == 8) {
      store_amax8(out + b, t);
    } else {
      alignas(32) float tail[8];
      store_amax8(tail, t);
      std::copy(tail, tail + count, out + b);
    }
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), tm);
  return *std::max_element(lanes, lanes + 8);
}

}  // namespace

float nvfp4_block_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                       float* block_amax, SimdLevel level) {
  MANTISSA_CHECK(src_dtype == kFloat32, "NVFP4 blocks' amax",
                 "source dtype {} is not float32 (a bfloat16 cast takes its blocks' amax itself)",
                 src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, "block-format cast", "shape [{}, {}] has a negative size",
                 rows, cols);
  const bool avx2 = std::min(level, simd_level()) >= SimdLevel::kAvx2;
  const auto item = static_cast<int64_t>(src_dtype.itemsize());
  const int64_t per_row = (cols + kBlock - 1) / kBlock;
  // Rows of whole blocks lie end to end in src and block_amax alike: runs of kChunk blocks that
  // may span rows. Otherwise row by row, each row's short last block by the scalar scan.
  const bool whole = cols % kBlock == 0;
  const int64_t items = whole ? (rows * per_row + kChunk - 1) / kChunk : rows;
  std::vector<uint32_t> part(static_cast<size_t>(items), 0);
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t i = 0; i < items; ++i) {
    const int64_t b0 = whole ? i * kChunk : i * per_row;
    const int64_t n = whole ? std::min(kChunk, rows * per_row - b0) : per_row;
    const char* x = static_cast<const char*>(src) + (whole ? b0 * kBlock : i * cols) * item;
    float* out = block_amax + b0;
    if (!avx2) {
      part[i] = blocks_scalar(x, src_dtype, n, whole ? kBlock : cols - (n - 1) * kBlock, out);
      continue;
    }
    const int64_t vec = whole ? n : cols / kBlock;  // the blocks of 16 elements
    uint32_t m = vec > 0 ? blocks_avx2(reinterpret_cast<const float*>(x), vec, out) : 0u;
    if (vec < n)
      m = std::max(
          m, blocks_scalar(x + vec * kBlock * item, src_dtype, 1, cols - vec * kBlock, out + vec));
    part[i] = m;
  }
  const uint32_t m = items ? *std::max_element(part.begin(), part.end()) : 0u;
  return amax_of_bits(m);
}

}  // namespace mantissa::kernels::mx
