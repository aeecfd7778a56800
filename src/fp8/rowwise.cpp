#include "mantissa/fp8/rowwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/fp8/rowwise_cast.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/recipe.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::fp8 {
namespace {

// x as a contiguous matrix in its own dtype: the amax passes and the casts read bfloat16 and
// float16 directly, which widen exactly (the values torchao's `x.to(torch.float32)` gives).
Tensor as_matrix(const Tensor& x, const char* what) {
  MANTISSA_CHECK(!x.is_cuda(), "fp8 rowwise",
                 "the rowwise recipes cast CPU tensors only; got {} on {}", what, x.device().str());
  MANTISSA_CHECK(x.dim() == 2, "fp8 rowwise", "{} must be 2-D, got {}", what, shape_str(x.shape()));
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "fp8 rowwise", "{} must be float32, bfloat16 or float16, got {}", what,
                 x.dtype().name());
  return x.detach().contiguous();
}

// torch.amax's value (NaN when the values hold one) of an amax pass.
float amax_with_nan(const kernels::fp8::Amax& a) {
  return a.nan ? std::numeric_limits<float>::quiet_NaN() : a.amax;
}

// The statistics of casts with scales[i] over values whose largest |x| (NaN passed over) is
// amax[i] (one scale: scales.size() == 1).
void add_statistics(RowwiseFp8& out, DType fp8, const std::vector<float>& scales,
                    const std::vector<float>& amaxes, int64_t total,
                    const kernels::fp8::CastStats& st) {
  double peak = 0.0;
  float amax = 0.0f;
  const float max = fp8_max(fp8);
  for (size_t r = 0; r < amaxes.size(); ++r) {
    const float s = scales[scales.size() == 1 ? 0 : r];
    amax = std::max(amax, amaxes[r]);
    if (std::isfinite(s)) peak = std::max(peak, static_cast<double>(amaxes[r]) * s / max);
  }
  out.amax = amax;
  out.counts = {total, st.saturated, st.flushed, peak};
}

// scale and scale_inv from scales (1 / scale each).
void set_scales(RowwiseFp8& out, const std::vector<float>& scales) {
  const auto n = static_cast<int64_t>(scales.size());
  out.scale = empty({n}, kFloat32);
  out.scale_inv = empty({n}, kFloat32);
  float* scale = out.scale.data<float>();
  float* scale_inv = out.scale_inv.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    scale[r] = scales[static_cast<size_t>(r)];
    scale_inv[r] = 1.0f / scales[static_cast<size_t>(r)];
  }
}

RowwiseFp8 with_scales(const Tensor& codes, const std::vector<float>& scales) {
  RowwiseFp8 out;
  out.codes = codes;
  set_scales(out, scales);
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
  const Tensor f = as_matrix(x, "the operand");
  const int64_t rows = f.size(0), cols = f.size(1);
  std::vector<float> scales(static_cast<size_t>(rows)), amaxes(static_cast<size_t>(rows));
  const float max = fp8_max(fp8);
  RowwiseFp8 out;
  out.codes = empty({rows, cols}, fp8);
  auto* dst = static_cast<uint8_t*>(out.codes.data_ptr());
  // A bfloat16 row under a power-of-2 E4M3 scale takes the 16-bit-lane cast (rowwise_cast.h).
  const bool bf16_lanes = f.dtype() == kBFloat16 && fp8 == kFloat8_e4m3fn && power_2 &&
                          kernels::fp8::rowwise_bf16_usable();
  // A float32 one takes it too, its values rounded to odd at bfloat16's width.
  const bool f32_lanes = f.dtype() == kFloat32 && fp8 == kFloat8_e4m3fn && power_2 &&
                         kernels::fp8::rowwise_bf16_usable();
  // Codes beyond what the caches hold (8 MiB, a quarter of the L3) are streamed past them.
  const bool stream = rows * cols >= (int64_t{8} << 20);
  int64_t saturated = 0, flushed = 0;
  const auto* base = static_cast<const char*>(f.data_ptr());
  const int64_t row_bytes = cols * static_cast<int64_t>(f.dtype().itemsize());
  // Each row's amax, then its cast while the row is in cache (the next row fetched meanwhile).
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<size_t>(r);
    kernels::fp8::CastStats st;
    const char* row = base + r * row_bytes;
    const char* next = r + 1 < rows ? row + row_bytes : nullptr;
    const auto* bits = reinterpret_cast<const uint16_t*>(row);
    const auto* values = reinterpret_cast<const float*>(row);
    if (f32_lanes && kernels::fp8::f32_amax_without_nan(values, cols, &amaxes[i])) {
      scales[i] = torchao_scale(amaxes[i], max, power_2);
      if (!kernels::fp8::cast_f32_pow2(values, dst + r * cols, cols, scales[i], amaxes[i], &st,
                                       reinterpret_cast<const float*>(next), stream))
        st = kernels::fp8::scaled_cast(values, f.dtype(), dst + r * cols, cols, scales[i], fp8);
    } else if (bf16_lanes && kernels::fp8::bf16_amax_without_nan(bits, cols, &amaxes[i])) {
      scales[i] = torchao_scale(amaxes[i], max, power_2);
      if (!kernels::fp8::cast_bf16_pow2(bits, dst + r * cols, cols, scales[i], amaxes[i], &st,
                                        reinterpret_cast<const uint16_t*>(next), stream))
        st = kernels::fp8::scaled_cast(bits, f.dtype(), dst + r * cols, cols, scales[i], fp8);
    } else {
      const kernels::fp8::Amax a = kernels::fp8::amax(row, f.dtype(), cols);
      amaxes[i] = a.amax;
      scales[i] = torchao_scale(amax_with_nan(a), max, power_2);
      st = kernels::fp8::scaled_cast(row, f.dtype(), dst + r * cols, cols, scales[i], fp8);
    }
    saturated += st.saturated;
    flushed += st.flushed;
  }
  set_scales(out, scales);
  kernels::fp8::CastStats total;
  total.saturated = saturated;
  total.flushed = flushed;
  add_statistics(out, fp8, scales, amaxes, rows * cols, total);
  return out;
}

RowwiseFp8 quantize_columns(const Tensor& x, DType fp8, bool power_2) {
  const Tensor f = as_matrix(x, "the operand");
  const int64_t rows = f.size(0), cols = f.size(1);
  std::vector<float> scales(static_cast<size_t>(cols)), amaxes(static_cast<size_t>(cols));
  const float max = fp8_max(fp8);
  // bfloat16 under power-of-2 E4M3 scales: the 16-bit-lane kernels (rowwise_cast.h).
  const bool bf16_lanes = f.dtype() == kBFloat16 && fp8 == kFloat8_e4m3fn && power_2 &&
                          kernels::fp8::rowwise_bf16_usable();
  const auto* bits = static_cast<const uint16_t*>(f.data_ptr());
  if (bf16_lanes && kernels::fp8::bf16_column_amax_without_nan(bits, rows, cols, amaxes.data())) {
    for (size_t c = 0; c < amaxes.size(); ++c) scales[c] = torchao_scale(amaxes[c], max, power_2);
  } else {
    std::vector<kernels::fp8::Amax> col(static_cast<size_t>(cols));
    kernels::fp8::column_amax(f.data_ptr(), f.dtype(), rows, cols, col.data());
    for (size_t c = 0; c < col.size(); ++c) {
      amaxes[c] = col[c].amax;
      scales[c] = torchao_scale(amax_with_nan(col[c]), max, power_2);
    }
  }
  RowwiseFp8 out = with_scales(empty({rows, cols}, fp8), scales);
  out.transposed = true;
  auto* dst = static_cast<uint8_t*>(out.codes.data_ptr());
  kernels::fp8::CastStats st;
  // A float32 one takes those codes too, its values rounded to odd at bfloat16's width (a column
  // with a NaN, whose scale is NaN, sends it to the general cast).
  const bool f32_lanes = f.dtype() == kFloat32 && fp8 == kFloat8_e4m3fn && power_2 &&
                         kernels::fp8::rowwise_bf16_usable();
  const bool fast = bf16_lanes ? kernels::fp8::cast_columns_bf16_pow2(
                                     bits, dst, rows, cols, scales.data(), amaxes.data(), &st)
                    : f32_lanes ? kernels::fp8::cast_columns_f32_pow2(
                                      static_cast<const float*>(f.data_ptr()), dst, rows, cols,
                                      scales.data(), amaxes.data(), &st)
                                : false;
  if (!fast)
    st = kernels::fp8::scaled_cast_columns(f.data_ptr(), f.dtype(), dst, rows, cols, scales.data(),
                                           fp8);
  add_statistics(out, fp8, scales, amaxes, rows * cols, st);
  return out;
}

RowwiseFp8 quantize_tensorwise(const Tensor& x, DType fp8, bool power_2) {
  const Tensor f = as_matrix(x, "the operand");
  const kernels::fp8::Amax a = kernels::fp8::amax(f.data_ptr(), f.dtype(), f.numel());
  const float scale = torchao_scale(amax_with_nan(a), fp8_max(fp8), power_2);
  RowwiseFp8 out = with_scales(empty(f.shape(), fp8), {scale});
  const kernels::fp8::CastStats st = kernels::fp8::scaled_cast(
      f.data_ptr(), f.dtype(), static_cast<uint8_t*>(out.codes.data_ptr()), f.numel(), scale, fp8);
  add_statistics(out, fp8, {scale}, {a.amax}, f.numel(), st);
  return out;
}

Tensor rowwise_gemm(const RowwiseFp8& a, const RowwiseFp8& b, bool transpose_b, DType out_dtype,
                    const Tensor& bias) {
  // The operands as the product takes them: a transposed copy's codes hold it transposed.
  const int64_t M = a.codes.size(a.transposed ? 1 : 0);
  const bool b_rows_are_n = transpose_b != b.transposed;  // B's stored rows are output columns
  const int64_t N = b.codes.size(b_rows_are_n ? 0 : 1);
  const int64_t na = a.scale_inv.numel(), nb = b.scale_inv.numel();
  MANTISSA_CHECK(na == 1 || na == M, "fp8 rowwise gemm",
                 "A has {} scales for {} rows (expected 1 or {})", na, M, M);
  MANTISSA_CHECK(nb == 1 || (transpose_b && nb == N), "fp8 rowwise gemm",
                 "B has {} scales for {} output columns (expected 1{})", nb, N,
                 transpose_b ? fmt::format(" or {}", N) : std::string());
  // Transposed codes are read in place where the product's bits do not depend on the layout,
  // else copied into the row-major layout a transposed copy of the source would have given.
  const bool in_place = gemm::fp8_products_layout_free();
  auto codes = [&](const RowwiseFp8& q) {
    return q.transposed && !in_place ? q.codes.t().contiguous() : q.codes;
  };
  // One scale_inv per output row and column (a single one repeated): the GEMM's epilogue
  // multiplies the fp32 code products by 1 (unit operand scales), then by the row's and the
  // column's, and rounds once to out_dtype.
  auto per_index = [](const Tensor& inv, int64_t n) {
    if (inv.numel() == n) return inv.contiguous();
    Tensor all = empty({n}, kFloat32);
    std::fill_n(all.data<float>(), n, inv.data<float>()[0]);
    return all;
  };
  gemm::Operand ao = gemm::fp8(codes(a), 1.0f);
  gemm::Operand bo = gemm::fp8(codes(b), 1.0f);
  if (a.transposed && in_place) ao = ao.t();
  if (in_place ? b_rows_are_n : transpose_b) bo = bo.t();
  gemm::Epilogue e;
  e.out_dtype = out_dtype;
  e.row_scale = per_index(a.scale_inv, M);
  e.col_scale = per_index(b.scale_inv, N);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == N && bias.dtype() == out_dtype,
                   "fp8 rowwise gemm", "the bias must be {} values in {}, got {} {}", N,
                   out_dtype.name(), bias.dtype().name(), shape_str(bias.shape()));
    e.bias = bias;
    e.bias_after_rounding = true;
  }
  return gemm::gemm(ao, bo, e);
}

}  // namespace mantissa::fp8
