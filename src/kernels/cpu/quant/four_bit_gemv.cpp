// The 4-bit product for few input rows (four_bit_gemv.h): the threads' split of W's rows, the
// epilogue, and the scalar level the SIMD levels reproduce bit for bit.
#include "kernels/cpu/quant/four_bit_gemv.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/common/sixteen_lane_sum.h"
#include "kernels/cpu/quant/four_bit_gemv_lanes.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::quant {
namespace {

// Rows of W per task; each task's sums for up to kFourBitGemvMaxRows input rows fit on its stack.
constexpr int64_t kTileRows = 16;
// Below this many multiply-adds the product runs on one thread.
constexpr int64_t kSerialBelow = int64_t{1} << 16;

void store(void* y, DType dtype, int64_t i, float v) {
  if (dtype == kFloat32)
    static_cast<float*>(y)[i] = v;
  else if (dtype == kBFloat16)
    static_cast<uint16_t*>(y)[i] = float_to_bf16_bits(v);
  else
    static_cast<uint16_t*>(y)[i] = float_to_half_bits(v);
}

// The sixteen values of a block with this absmax, as dequantize(W, w_round) stores them.
std::array<float, 16> block_values(const float* table, float absmax, ValueRounding w_round) {
  std::array<float, 16> v{};
  for (int c = 0; c < 16; ++c) v[c] = round_value(table[c] * absmax, w_round);
  return v;
}

}  // namespace

void four_bit_gemv_rows_scalar(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                               int64_t n0, int64_t n1, float* sums, int64_t ld) {
  const float* table = four_bit_codebook(w.format).dequant_values.data();
  const ValueRounding rounding = value_rounding(w_round);
  const int64_t K = w.cols;
  for (int64_t j = n0; j < n1; ++j) {
    const int64_t flat0 = j * K;
    for (int64_t i = 0; i < m; ++i) {
      std::array<float, 16> lanes{};
      int64_t block = -1;
      std::array<float, 16> values{};
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = flat0 + k;
        if (e / w.blocksize != block) {
          block = e / w.blocksize;
          values = block_values(table, w.absmax[block], rounding);
        }
        const float v = values[four_bit_code_at(w.packed, e)];
        lanes[k % 16] = std::fma(x[i * K + k], v, lanes[k % 16]);
      }
      sums[i * ld + (j - n0)] = sixteen_lane_sum(lanes.data());
    }
  }
}

void four_bit_gemv(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                   const float* bias, void* y, DType y_dtype, SimdLevel level) {
  MANTISSA_CHECK(w_round == kFloat32 || w_round == kBFloat16 || w_round == kFloat16,
                 "four_bit_gemv", "weights round to float32, bfloat16 or float16, got {}",
                 w_round.name());
  MANTISSA_CHECK(y_dtype == kFloat32 || y_dtype == kBFloat16 || y_dtype == kFloat16,
                 "four_bit_gemv", "the output is float32, bfloat16 or float16, got {}",
                 y_dtype.name());
  using RowsFn = void (*)(const FourBitMatrix&, const float*, int64_t, DType, int64_t, int64_t,
                          float*, int64_t);
  const SimdLevel cpu = simd_level();
  const RowsFn rows =
      level >= SimdLevel::kAvx512 && cpu >= SimdLevel::kAvx512 ? four_bit_gemv_rows_avx512
      : level >= SimdLevel::kAvx2 && cpu >= SimdLevel::kAvx2   ? four_bit_gemv_rows_avx2
                                                               : four_bit_gemv_rows_scalar;
  const int64_t N = w.rows, K = w.cols;
  const int64_t tiles = (N + kTileRows - 1) / kTileRows;
  const bool parallel = m * N * K >= kSerialBelow && tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t n0 = t * kTileRows, n1 = std::min(N, n0 + kTileRows);
    float sums[kFourBitGemvMaxRows * kTileRows];
    for (int64_t i0 = 0; i0 < m; i0 += kFourBitGemvMaxRows) {
      const int64_t mi = std::min(kFourBitGemvMaxRows, m - i0);
      rows(w, x + i0 * K, mi, w_round, n0, n1, sums, kTileRows);
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = n0; j < n1; ++j) {
          const float s = sums[i * kTileRows + (j - n0)];
          store(y, y_dtype, (i0 + i) * N + j, bias ? s + bias[j] : s);
        }
    }
  }
}

}  // namespace mantissa::kernels::quant
