#include "mantissa/fp8/tensor.h"

#include <algorithm>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"
#include "ops/matmul_impl.h"

namespace mantissa::fp8 {
namespace {

uint8_t* codes(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

}  // namespace

QuantizeResult quantize(const Tensor& x, DType fp8, float scale) {
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "fp8 quantize", "expected a float32, bfloat16 or float16 tensor, got {}",
                 x.dtype().name());
  const Tensor src = x.detach().contiguous();
  QuantizeResult r;
  r.q.data = empty(src.shape(), fp8);
  r.q.scale_inv = 1.0f / scale;
  const kernels::fp8::CastStats st =
      kernels::fp8::scaled_cast(src.data_ptr(), src.dtype(), codes(r.q.data), src.numel(), scale,
                                fp8);
  r.amax = st.amax;
  r.counts = {src.numel(), st.saturated, st.flushed};
  return r;
}

Fp8Tensor quantize_into(const Tensor& x, DType fp8, ScalingState& state, int slot) {
  QuantizeResult r = quantize(x, fp8, state.scale_of(slot));
  state.record_amax(slot, r.amax);
  state.add_counts(slot, r.counts);
  return r.q;
}

Tensor dequantize(const Fp8Tensor& q, DType out) {
  Tensor t = empty(q.shape(), out);
  kernels::fp8::dequantize(codes(q.data), q.dtype(), t.data_ptr(), out, q.data.numel(),
                           q.scale_inv);
  return t;
}

Tensor fp8_gemm(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                const Tensor& bias, DType out_dtype) {
  MANTISSA_CHECK(a.data.dim() == 2 && b.data.dim() == 2, "fp8_gemm",
                 "operands must be 2-D, got {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  MANTISSA_CHECK(a.dtype().is_float8() && b.dtype().is_float8(), "fp8_gemm",
                 "operands must be FP8, got {} and {}", a.dtype().name(), b.dtype().name());
  // The codes themselves (scale_inv 1) widen exactly to fp32.
  Tensor a32 = dequantize({a.data, 1.0f}), b32 = dequantize({b.data, 1.0f});
  if (transpose_a) a32 = a32.t();
  if (transpose_b) b32 = b32.t();
  MANTISSA_CHECK(a32.size(1) == b32.size(0), "fp8_gemm",
                 "inner dimensions differ: {} x {} (transpose_a={}, transpose_b={})",
                 shape_str(a.shape()), shape_str(b.shape()), transpose_a, transpose_b);
  const Tensor acc = detail::matmul_nograd(a32, b32);
  const int64_t m = acc.size(0), n = acc.size(1);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == n, "fp8_gemm",
                   "bias of shape {} does not match {} output columns", shape_str(bias.shape()),
                   n);
  }
  const float alpha = a.scale_inv * b.scale_inv;
  Tensor out32 = out_dtype == kFloat32 ? acc : empty(acc.shape(), kFloat32);
  const Tensor b32bias = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  const float* src = acc.data<float>();
  float* dst = out32.data<float>();
  const float* bp = b32bias.defined() ? b32bias.data<float>() : nullptr;
#pragma omp parallel for schedule(static) if (m * n > (1 << 15))
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float v = src[i * n + j] * alpha;
      dst[i * n + j] = bp ? v + bp[j] : v;
    }
  }
  return out_dtype == kFloat32 ? out32 : out32.to(out_dtype);
}

}  // namespace mantissa::fp8
