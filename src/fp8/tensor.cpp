#include "mantissa/fp8/tensor.h"

#include <algorithm>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/gemm/gemm.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/fp8/fp8_cuda.h"
#endif

namespace mantissa::fp8 {
namespace {

// CastCounts::peak of one cast: its max|x| * scale over the format's max.
double peak_of(float amax, float scale, DType fp8) {
  return static_cast<double>(amax) * scale / fp8_max(fp8);
}

uint8_t* codes(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

void check_quantize_args(const Tensor& x, DType fp8) {
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "fp8 quantize", "expected a float32, bfloat16 or float16 tensor, got {}",
                 x.dtype().name());
  MANTISSA_CHECK(fp8.is_float8(), "fp8 quantize", "expected an FP8 dtype, got {}", fp8.name());
}

QuantizeResult quantize_on_cpu(const Tensor& x, DType fp8, float scale, bool widen) {
  const Tensor src = x.detach().contiguous();
  QuantizeResult r;
  r.q.data = empty(src.shape(), fp8);
  r.q.scale_inv = 1.0f / scale;
  kernels::fp8::CastStats st;
  if (widen && gemm_widens_codes() && src.numel() > 0) {
    r.q.widened_codes = empty(src.shape(), kBFloat16);
    st = kernels::fp8::scaled_cast_widened(src.data_ptr(), src.dtype(), codes(r.q.data),
                                           static_cast<uint16_t*>(r.q.widened_codes.data_ptr()),
                                           src.numel(), scale, fp8);
  } else {
    st = kernels::fp8::scaled_cast(src.data_ptr(), src.dtype(), codes(r.q.data), src.numel(), scale,
                                   fp8);
  }
  r.amax = st.amax;
  r.counts = {src.numel(), st.saturated, st.flushed, peak_of(st.amax, scale, fp8)};
  return r;
}

#if MANTISSA_HAS_CUDA
// The cast queued on the GPU; amax and counts stay there (device_stats).
QuantizeResult quantize_on_gpu(const Tensor& x, DType fp8, float scale, bool transpose) {
  kernels::gpu::Fp8CastOnGpu g = kernels::gpu::fp8_scaled_cast(x, fp8, scale, transpose);
  QuantizeResult r;
  r.q.data = g.codes;
  r.q.transposed = g.codes_t;
  r.q.scale_inv = 1.0f / scale;
  r.counts.total = x.numel();
  r.device_stats = {std::move(g.stats_block), g.stats_index, scale, fp8_max(fp8)};
  return r;
}
#endif

}  // namespace

QuantizeResult quantize_async(const Tensor& x, DType fp8, float scale, bool widen, bool transpose) {
  check_quantize_args(x, fp8);
#if MANTISSA_HAS_CUDA
  if (x.is_cuda()) return quantize_on_gpu(x, fp8, scale, transpose);
#endif
  return quantize_on_cpu(x, fp8, scale, widen);
}

QuantizeResult quantize(const Tensor& x, DType fp8, float scale, bool widen) {
  check_quantize_args(x, fp8);
#if MANTISSA_HAS_CUDA
  if (x.is_cuda()) {
    QuantizeResult r = quantize_on_gpu(x, fp8, scale, /*transpose=*/false);
    const kernels::gpu::Fp8CastStats st =  // waits for the cast
        kernels::gpu::read_fp8_cast_stats(r.device_stats.block, r.device_stats.index);
    r.amax = st.amax;
    r.counts = {x.numel(), st.saturated, st.flushed, peak_of(st.amax, scale, fp8)};
    r.device_stats = {};
    return r;
  }
#endif
  return quantize_on_cpu(x, fp8, scale, widen);
}

void record_cast(ScalingState& state, int slot, const QuantizeResult& r) {
  if (r.device_stats.defined()) {
    state.defer_cast_stats(slot, r.device_stats, r.counts.total);
    return;
  }
  state.record_amax(slot, r.amax);
  state.add_counts(slot, r.counts);
}

Fp8Tensor quantize_into(const Tensor& x, DType fp8, ScalingState& state, int slot, bool widen,
                        bool transpose) {
  QuantizeResult r = quantize_async(x, fp8, state.scale_of(slot), widen, transpose);
  record_cast(state, slot, r);
  return r.q;
}

Tensor dequantize(const Fp8Tensor& q, DType out) {
#if MANTISSA_HAS_CUDA
  if (q.data.is_cuda()) return kernels::gpu::fp8_dequantize(q.data, q.scale_inv, out);
#endif
  Tensor t = empty(q.shape(), out);
  kernels::fp8::dequantize(codes(q.data), q.dtype(), t.data_ptr(), out, q.data.numel(),
                           q.scale_inv);
  return t;
}

bool gemm_widens_codes() { return gemm::fp8_products_widen_codes(); }

Tensor fp8_gemm(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                const Tensor& bias, DType out_dtype) {
  MANTISSA_CHECK(
      a.data.defined() && b.data.defined() && a.dtype().is_float8() && b.dtype().is_float8(),
      "fp8_gemm", "operands must be FP8, got {} and {}",
      a.data.defined() ? a.dtype().name() : "undefined",
      b.data.defined() ? b.dtype().name() : "undefined");
  gemm::Operand ga = gemm::fp8(a.data, a.scale_inv, a.widened_codes, a.transposed);
  gemm::Operand gb = gemm::fp8(b.data, b.scale_inv, b.widened_codes, b.transposed);
  ga.transposed = transpose_a;
  gb.transposed = transpose_b;
  gemm::Epilogue e;
  e.bias = bias.defined() ? bias.detach() : Tensor();
  e.out_dtype = out_dtype;
  return gemm::gemm(ga, gb, e);
}

}  // namespace mantissa::fp8
