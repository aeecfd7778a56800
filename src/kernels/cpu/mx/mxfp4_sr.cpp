// MXFP4 with stochastic rounding (mxfp4_sr.h): the scalar reference, the dispatcher to the SIMD
// levels' kernels (detail::MxKernels::mxfp4_encode_sr), and the statistics pass.
#include "kernels/cpu/mx/mxfp4_sr.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/philox.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

using namespace scalar;

// Below this many elements one thread does the whole cast.
constexpr int64_t kParallelFrom = 1 << 16;
constexpr int kE2m1MaxPow2 = element_limits(Element::kE2m1).max_pow2;

// Columns [from, cols) of row `row` (from a multiple of 32) into its codes and scales, one
// element at a time: the reference the SIMD levels match (nvfp4_rows_avx2.cpp,
// nvfp4_cast_avx512.cpp).
void encode_scalar(const void* src, DType dtype, int64_t cols, int64_t from, uint64_t seed,
                   uint64_t offset, int64_t row, uint8_t* codes, uint8_t* scales) {
  std::array<PhiloxCounter, 16> words{};  // the 16 counter blocks of 256-column group `group`
  int64_t group = -1;
  for (int64_t begin = from; begin < cols; begin += kMxBlock) {
    const int64_t end = std::min(begin + kMxBlock, cols);
    const uint8_t s = e8m0_floor(block_amax(src, dtype, begin, end - begin), kE2m1MaxPow2);
    scales[begin / kMxBlock] = s;
    // x / 2^e as the multiplication by the exact reciprocal (mx_scalar.h: the same value).
    const float r = floor_reciprocal(s);
    for (int64_t i = begin; i < end; ++i) {
      const auto col = static_cast<uint64_t>(i);
      if (i >> 8 != group) {  // philox.h's sr_byte: the 16 counter blocks of a 256-column group
        group = i >> 8;
        for (uint64_t l = 0; l < 16; ++l)
          words[l] =
              philox4x32_10(sr_counter(sr_group_block(col) + l, static_cast<uint64_t>(row), offset),
                            sr_key(seed));
      }
      const uint8_t c = e2m1_code_stochastic((load(src, dtype, i) * r) * kMxfp4SrPrescale,
                                             sr_byte_of(words[i & 15][sr_word_index(col)], col));
      if ((i & 1) == 0)
        codes[i / 2] = c;
      else
        codes[i / 2] = static_cast<uint8_t>(codes[i / 2] | (c << 4));
    }
  }
}

// The statistics of one encoded row (mx_stats.h), a block's multiplier 3/4 / 2^(scale - 127).
MxStatsRun row_stats(const void* src, DType dtype, int64_t cols, const uint8_t* codes,
                     const uint8_t* scales) {
  MxStatsRun run;
  for (int64_t begin = 0; begin < cols; begin += kMxBlock) {
    const int64_t end = std::min(begin + kMxBlock, cols);
    const uint8_t s = scales[begin / kMxBlock];
    const float mult = s == kE8m0Nan ? 0.0f : kMxfp4SrPrescale * floor_reciprocal(s);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(load(src, dtype, i));
      amax = a > amax ? a : amax;  // NaN passed over
      run.saturated += a * mult > kE2m1Max ? 1 : 0;
      const uint8_t c = (codes[i / 2] >> ((i & 1) * 4)) & 7u;
      run.flushed += (a > 0.0f && c == 0) ? 1 : 0;  // NaN fails a > 0
    }
    if (amax > run.best) {
      run.best = amax;
      if (s != kE8m0Nan) {
        run.scaled_best = amax;
        run.scale = mult;
      }
    }
    if (s != kE8m0Nan) run.peak = std::max(run.peak, static_cast<double>(amax) * mult / kE2m1Max);
  }
  return run;
}

}  // namespace

void mxfp4_quantize_sr(const void* src, DType src_dtype, int64_t rows, int64_t cols, uint64_t seed,
                       uint64_t offset, uint8_t* codes, uint8_t* scales, SimdLevel level,
                       MxCastStats* stats) {
  constexpr const char* kWhere = "mxfp4 stochastic rounding";
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16, kWhere,
                 "source dtype {} is not float32 or bfloat16", src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, kWhere, "shape [{}, {}] has a negative size", rows, cols);
  MANTISSA_CHECK(rows * cols == 0 || (src && codes && scales), kWhere,
                 "null buffer for a [{}, {}] cast", rows, cols);
  const int64_t code_stride = code_bytes(Element::kE2m1, cols);
  const int64_t scale_stride = (cols + kMxBlock - 1) / kMxBlock;
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  const detail::MxKernels& k = detail::kernels_for(level);
  // The level's kernel takes a row's whole blocks, the scalar loop its short last one.
  const int64_t vector_cols = k.mxfp4_encode_sr ? cols / kMxBlock * kMxBlock : 0;
  std::vector<MxStatsRun> runs(stats ? static_cast<size_t>(rows) : 0);
#pragma omp parallel for schedule(static) if (rows > 1 && rows * cols >= kParallelFrom)
  for (int64_t r = 0; r < rows; ++r) {
    const char* x = static_cast<const char*>(src) + r * cols * item;
    uint8_t* c = codes + r * code_stride;
    uint8_t* s = scales + r * scale_stride;
    if (vector_cols > 0) k.mxfp4_encode_sr(x, src_dtype, vector_cols, seed, offset, r, 0, c, s);
    encode_scalar(x, src_dtype, cols, vector_cols, seed, offset, r, c, s);
    if (stats) runs[static_cast<size_t>(r)] = row_stats(x, src_dtype, cols, c, s);
  }
  if (!stats) return;
  MxStatsRun all;
  for (const MxStatsRun& run : runs) all.append(run);
  *stats = all.finish();
}

}  // namespace mantissa::kernels::mx
