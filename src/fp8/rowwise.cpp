#include "mantissa/fp8/rowwise.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {
namespace {

// x as a contiguous float32 matrix (bfloat16 and float16 widen exactly, as torchao's
// `x.to(torch.float32)` before the amax and the multiplication).
Tensor as_f32_matrix(const Tensor& x, const char* what) {
  MANTISSA_CHECK(!x.is_cuda(), "fp8 rowwise",
                 "the rowwise recipes cast CPU tensors only; got {} on {}", what, x.device().str());
  MANTISSA_CHECK(x.dim() == 2, "fp8 rowwise", "{} must be 2-D, got {}", what, shape_str(x.shape()));
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "fp8 rowwise", "{} must be float32, bfloat16 or float16, got {}", what,
                 x.dtype().name());
  return x.detach().to(kFloat32).contiguous();
}

// max |v| of n floats with NaN propagating (torch.amax), and the largest with NaN passed over.
void row_amax(const float* v, int64_t n, float& with_nan, float& without_nan) {
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    nan |= std::isnan(a);
    m = a > m ? a : m;
  }
  without_nan = m;
  with_nan = nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// Casts the rows of the f32 matrix `x` ([rows, cols]) with scale[r] (scales.size() == rows) or
// one scale (scales.size() == 1); row_amax[r] is the largest |x| of row r with NaN passed over
// (for the statistics).
RowwiseFp8 cast_rows(const Tensor& x, DType fp8, const std::vector<float>& scales,
                     const std::vector<float>& row_amax) {
  const int64_t rows = x.size(0), cols = x.size(1);
  RowwiseFp8 out;
  out.codes = empty({rows, cols}, fp8);
  const int64_t n_scales = static_cast<int64_t>(scales.size());
  out.scale = empty({n_scales}, kFloat32);
  out.scale_inv = empty({n_scales}, kFloat32);
  for (int64_t r = 0; r < n_scales; ++r) {
    out.scale.data<float>()[r] = scales[static_cast<size_t>(r)];
    out.scale_inv.data<float>()[r] = 1.0f / scales[static_cast<size_t>(r)];
  }
  const float* src = x.data<float>();
  auto* dst = static_cast<uint8_t*>(out.codes.data_ptr());
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scales[static_cast<size_t>(n_scales == 1 ? 0 : r)];
    const kernels::fp8::CastStats st =
        kernels::fp8::scaled_cast(src + r * cols, kFloat32, dst + r * cols, cols, s, fp8);
    saturated += st.saturated;
    flushed += st.flushed;
  }
  double peak = 0.0;
  float amax = 0.0f;
  const float max = fp8_max(fp8);
  for (size_t r = 0; r < row_amax.size(); ++r) {
    const float s = scales[n_scales == 1 ? 0 : r];
    amax = std::max(amax, row_amax[r]);
    if (std::isfinite(s)) peak = std::max(peak, static_cast<double>(row_amax[r]) * s / max);
  }
  out.amax = amax;
  out.counts = {rows * cols, saturated, flushed, peak};
  return out;
}

}  // namespace

float torchao_scale(float amax, float fp8_max, bool power_2) {
  if (std::isnan(amax)) return std::numeric_limits<float>::quiet_NaN();
  const double q =
      static_cast<double>(fp8_max) / std::max(static_cast<double>(amax), kTorchaoAmaxEpsilon);
  float s = static_cast<float>(q);
  // 2^floor(log2 s): for a positive normal float, its mantissa bits cleared (the quotient is
  // at least 448 / FLT_MAX, never subnormal); 0 stays 0.
  if (power_2 && s > 0.0f) s = std::bit_cast<float>(std::bit_cast<uint32_t>(s) & 0xFF800000u);
  return s;
}

RowwiseFp8 quantize_rows(const Tensor& x, DType fp8, bool power_2) {
  const Tensor f = as_f32_matrix(x, "the operand");
  const int64_t rows = f.size(0), cols = f.size(1);
  std::vector<float> scales(static_cast<size_t>(rows)), amaxes(static_cast<size_t>(rows));
  const float max = fp8_max(fp8);
  const float* src = f.data<float>();
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    float with_nan = 0.0f;
    row_amax(src + r * cols, cols, with_nan, amaxes[static_cast<size_t>(r)]);
    scales[static_cast<size_t>(r)] = torchao_scale(with_nan, max, power_2);
  }
  return cast_rows(f, fp8, scales, amaxes);
}

RowwiseFp8 quantize_tensorwise(const Tensor& x, DType fp8, bool power_2) {
  const Tensor f = as_f32_matrix(x, "the operand");
  float with_nan = 0.0f, without_nan = 0.0f;
  row_amax(f.data<float>(), f.numel(), with_nan, without_nan);
  return cast_rows(f, fp8, {torchao_scale(with_nan, fp8_max(fp8), power_2)}, {without_nan});
}

Tensor rowwise_gemm(const RowwiseFp8& a, const RowwiseFp8& b, bool transpose_b, DType out_dtype) {
  const int64_t M = a.codes.size(0);
  const int64_t N = transpose_b ? b.codes.size(0) : b.codes.size(1);
  const int64_t na = a.scale_inv.numel(), nb = b.scale_inv.numel();
  MANTISSA_CHECK(na == 1 || na == M, "fp8 rowwise gemm",
                 "A has {} scales for {} rows (expected 1 or {})", na, M, M);
  MANTISSA_CHECK(nb == 1 || (transpose_b && nb == N), "fp8 rowwise gemm",
                 "B has {} scales for {} output columns (expected 1{})", nb, N,
                 transpose_b ? fmt::format(" or {}", N) : std::string());
  // The code products in fp32: unit scales, so fp8_gemm's epilogue multiplies by 1.
  const Tensor acc =
      fp8_gemm(Fp8Tensor{a.codes, 1.0f, Tensor(), Tensor()}, false,
               Fp8Tensor{b.codes, 1.0f, Tensor(), Tensor()}, transpose_b, Tensor(), kFloat32)
          .contiguous();
  const float* ai = a.scale_inv.data<float>();
  const float* bi = b.scale_inv.data<float>();
  float* p = acc.data<float>();
#pragma omp parallel for schedule(static) if (M * N > (1 << 15))
  for (int64_t m = 0; m < M; ++m) {
    const float sa = ai[na == 1 ? 0 : m];
    float* row = p + m * N;
    for (int64_t n = 0; n < N; ++n) row[n] = (row[n] * sa) * bi[nb == 1 ? 0 : n];
  }
  return out_dtype == kFloat32 ? acc : acc.to(out_dtype);
}

}  // namespace mantissa::fp8
