// The 16x16 tiles' amax of NVFP4's 2-D weight scaling (mx_cast.h, nvfp4_tile_amax): the rows of
// a tile row are folded column by column into the largest magnitude bits seen (compared as
// integers, so that NaN, whose bits lie above infinity's, wins), then each 16 columns' largest
// is the tile's. One read of the source, vertical maxima only; the AVX2 loop takes 8 float32
// columns or 16 bfloat16 columns a vector, and every level gives the same maxima.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kTile = kNvfp4Block;
// Below this many elements one thread takes every tile row.
constexpr int64_t kParallelFrom = 1 << 16;

uint32_t abs_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu; }

// Where in `buffer` (bytes + 4096 + 64 long) an accumulator of `bytes` starts: on a cache line,
// half a page (in address bits 0-11) away from `src`. The folds load a source row and store the
// accumulator in step; where the two lie a multiple of 4 KiB apart, every load waits on the
// store before it (the core matches them by those 12 bits), which costs the fold most of its
// speed.
template <class T>
T* accumulator_in(std::vector<T>& buffer, const void* src) {
  const auto base = reinterpret_cast<uintptr_t>(buffer.data());
  const uintptr_t want = (reinterpret_cast<uintptr_t>(src) + 2048) & 4095 & ~uintptr_t{63};
  return reinterpret_cast<T*>(base + ((want - base) & 4095));
}

// acc[c] = max(acc[c], |src[c]|'s bits) for c < n.
void fold_row_scalar(const void* src, DType dtype, int64_t n, uint32_t* acc) {
  for (int64_t c = 0; c < n; ++c) acc[c] = std::max(acc[c], abs_bits(scalar::load(src, dtype, c)));
}

__attribute__((target("avx2"))) void fold_row_avx2(const void* src, DType dtype, int64_t n,
                                                   uint32_t* acc) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const int64_t full = n / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) {
    __m256i x;
    if (dtype == kFloat32) {
      x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + c));
    } else {
      x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                static_cast<const uint16_t*>(src) + c))),
                            16);
    }
    auto* a = reinterpret_cast<__m256i*>(acc + c);
    _mm256_storeu_si256(a, _mm256_max_epu32(_mm256_loadu_si256(a), _mm256_and_si256(x, abs_mask)));
  }
  fold_row_scalar(static_cast<const char*>(src) + full * static_cast<int64_t>(dtype.itemsize()),
                  dtype, n - full, acc + full);
}

// fold_row_avx2 of bfloat16 in 16-bit lanes: acc16[c] = max(acc16[c], |src[c]|'s 16 bits), 16
// columns a vector.
__attribute__((target("avx2"))) void fold_row_bf16_avx2(const uint16_t* src, int64_t n,
                                                        uint16_t* acc16) {
  const __m256i abs_mask = _mm256_set1_epi16(0x7FFF);
  const int64_t full = n / 16 * 16;
  for (int64_t c = 0; c < full; c += 16) {
    auto* a = reinterpret_cast<__m256i*>(acc16 + c);
    _mm256_storeu_si256(
        a, _mm256_max_epu16(
               _mm256_loadu_si256(a),
               _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c)),
                                abs_mask)));
  }
  for (int64_t c = full; c < n; ++c)
    acc16[c] = std::max<uint16_t>(acc16[c], static_cast<uint16_t>(src[c] & 0x7FFFu));
}

// Each 16 columns' largest of acc16 (the last group may be shorter) as float32 bits, into
// out[0 .. blocks): the largest of 16 lanes is the smallest of their complements.
__attribute__((target("avx2"))) void block_max_bf16_avx2(const uint16_t* acc16, int64_t n,
                                                         uint32_t* out) {
  const int64_t full = n / kTile;
  for (int64_t b = 0; b < full; ++b) {
    const auto* a = reinterpret_cast<const __m128i*>(acc16 + b * kTile);
    const __m128i m = _mm_max_epu16(_mm_loadu_si128(a), _mm_loadu_si128(a + 1));
    out[b] =
        static_cast<uint32_t>(
            ~_mm_extract_epi16(_mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi16(-1))), 0) & 0xFFFF)
        << 16;
  }
  if (full * kTile < n)
    out[full] = static_cast<uint32_t>(*std::max_element(acc16 + full * kTile, acc16 + n)) << 16;
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
  auto* fold = avx2 ? fold_row_avx2 : fold_row_scalar;
  // bfloat16 at AVX2 and above folds in 16-bit lanes (its magnitude bits are float32's high half).
  const bool bf16_lanes = avx2 && src_dtype == kBFloat16;
  const int64_t tile_rows = (rows + kTile - 1) / kTile, blocks = (cols + kTile - 1) / kTile;
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  std::vector<uint32_t> row_max(static_cast<size_t>(tile_rows), 0);
#pragma omp parallel if (tile_rows > 1 && rows * cols >= kParallelFrom)
  {
    // Each accumulator 4 KiB + a line more than it holds (accumulator_in places it).
    std::vector<uint32_t> acc_buffer(static_cast<size_t>(cols + 1040));
    std::vector<uint16_t> acc16_buffer(bf16_lanes ? static_cast<size_t>(cols + 2080) : 0);
    uint32_t* acc = accumulator_in(acc_buffer, src);
    uint16_t* acc16 = bf16_lanes ? accumulator_in(acc16_buffer, src) : nullptr;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tile_rows; ++t) {
      const int64_t r_end = std::min(rows, (t + 1) * kTile);
      if (bf16_lanes) {
        std::fill(acc16, acc16 + cols, uint16_t{0});
        for (int64_t r = t * kTile; r < r_end; ++r)
          fold_row_bf16_avx2(static_cast<const uint16_t*>(src) + r * cols, cols, acc16);
        block_max_bf16_avx2(acc16, cols, acc);
      } else {
        std::fill(acc, acc + cols, 0u);
        for (int64_t r = t * kTile; r < r_end; ++r)
          fold(static_cast<const char*>(src) + r * cols * item, src_dtype, cols, acc);
        for (int64_t b = 0; b < blocks; ++b) {
          const uint32_t* begin = acc + b * kTile;
          acc[b] = *std::max_element(begin, begin + std::min(kTile, cols - b * kTile));
        }
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
