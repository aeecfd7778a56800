// The engines of FP8 products (fp8_products.h).
#include "gemm/fp8_products.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "gemm/dense_products.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cuda/gemm/cuda_gemm.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/elementwise/elementwise_cuda.h"
#include "kernels/cuda/fp8/fp8_cuda.h"
#endif

namespace mantissa::gemm::detail {
namespace {

// op(X)'s (rows, cols) for a 2-D operand.
int64_t rows_of(const Operand& o) { return o.transposed ? o.data.size(1) : o.data.size(0); }
int64_t cols_of(const Operand& o) { return o.transposed ? o.data.size(0) : o.data.size(1); }

// The codes themselves (scale_inv 1) as `wide` values, exact.
Tensor widen_codes(const Operand& q, DType wide) {
  if (q.widened.defined() && q.widened.dtype() == wide) return q.widened;
  Tensor t = empty(q.data.shape(), wide);
  kernels::fp8::dequantize(static_cast<const uint8_t*>(q.data.data_ptr()), q.data.dtype(),
                           t.data_ptr(), wide, q.data.numel(), 1.0f);
  return t;
}

// x * s with a NaN x kept, quieted, whatever s is (Epilogue::row_scale, col_scale): when both
// are NaN the hardware returns its first operand's, and the compiler may swap the operands.
float mul_keeping_nan(float x, float s) {
  return std::isnan(x) ? std::bit_cast<float>(std::bit_cast<uint32_t>(x) | 0x00400000u) : x * s;
}

}  // namespace

Tensor fp8_fused(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                 float alpha, const RowColScales& scales) {
  const Tensor& ad = a.data;
  const Tensor& bd = b.data;
  const int64_t M = rows_of(a), K = cols_of(a), N = cols_of(b);
  const DType out_gemm = out_dtype == kBFloat16 || out_dtype == kFloat16 ? out_dtype : kFloat32;
  Tensor out = empty({M, N}, out_gemm);
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const DType bias_dtype = bc.defined() ? bc.dtype() : kFloat32;
  const Tensor b32 =
      bc.defined() && bias_dtype != kFloat32 && bias_dtype != kBFloat16 && bias_dtype != kFloat16
          ? bc.to(kFloat32)
          : bc;
  kernels::GemmArgs g;
  g.out_dtype = out_gemm;
  g.M = M;
  g.N = N;
  g.K = K;
  // Row-major codes; a transposed operand is read in place with swapped strides.
  const int64_t lda = ad.size(1), ldb = bd.size(1);
  g.a = {ad.data_ptr(), a.transposed ? 1 : lda, a.transposed ? lda : 1, nullptr};
  g.b = {bd.data_ptr(), b.transposed ? 1 : ldb, b.transposed ? ldb : 1, nullptr};
  g.bias = b32.defined() ? b32.data_ptr() : nullptr;
  g.c = out.data_ptr();
  kernels::GemmLowbit lb;
  lb.a_dtype = ad.dtype();
  lb.b_dtype = bd.dtype();
  lb.bias_dtype = b32.defined() ? b32.dtype() : kFloat32;
  lb.scale_epilogue = true;
  lb.alpha = alpha;
  lb.row_scale = scales.row.defined() ? scales.row.data<float>() : nullptr;
  lb.col_scale = scales.col.defined() ? scales.col.data<float>() : nullptr;
  lb.bias_after_rounding = scales.bias_after_rounding && b32.defined();
  kernels::gemm_native_lowbit(g, lb);
  return out_gemm == out_dtype ? out : out.to(out_dtype);
}

Tensor fp8_widened(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                   float alpha, DType wide, bool onednn_native_bf16, const RowColScales& scales) {
  if (scales.any() || scales.bias_after_rounding) {
    // The fp32 product with alpha applied, then, a row at a time while it is in cache, the row
    // and column scales and the bias in fp32 and one rounding to out_dtype (with
    // bias_after_rounding: the scaled row rounded to out_dtype, widened, the bias added, and
    // rounded again).
    const Tensor acc =
        fp8_widened(a, b, Tensor(), kFloat32, alpha, wide, onednn_native_bf16).contiguous();
    const int64_t m = acc.size(0), n = acc.size(1);
    const Tensor out = out_dtype == kFloat32 ? acc : empty({m, n}, out_dtype);
    const Tensor b32bias = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
    const float* bp = b32bias.defined() ? b32bias.data<float>() : nullptr;
    const float* rs = scales.row.defined() ? scales.row.data<float>() : nullptr;
    const float* cs = scales.col.defined() ? scales.col.data<float>() : nullptr;
    const bool bias_late = bp && scales.bias_after_rounding && out_dtype != kFloat32;
    float* p = acc.data<float>();
    const int64_t row_bytes = n * static_cast<int64_t>(out_dtype.itemsize());
#pragma omp parallel for schedule(static) if (m * n > (1 << 15))
    for (int64_t i = 0; i < m; ++i) {
      float* r = p + i * n;
      if (rs) {
        const float s = rs[i];
        for (int64_t j = 0; j < n; ++j) r[j] = mul_keeping_nan(r[j], s);
      }
      if (cs)
        for (int64_t j = 0; j < n; ++j) r[j] = mul_keeping_nan(r[j], cs[j]);
      char* dst = static_cast<char*>(out.data_ptr()) + i * row_bytes;
      if (bias_late) {
        convert_buffer(r, kFloat32, dst, out_dtype, n);
        convert_buffer(dst, out_dtype, r, kFloat32, n);
      }
      if (bp)
        for (int64_t j = 0; j < n; ++j) r[j] = r[j] + bp[j];
      if (out_dtype != kFloat32) convert_buffer(r, kFloat32, dst, out_dtype, n);
    }
    return out;
  }
  // The codes widen exactly to bf16 (and fp32): on native bf16 dot products (AVX-512 BF16,
  // AMX) the product runs on them with the fp32 accumulator kept unrounded, else on the fp32
  // GEMM. Either way the same exact products and one fp32 accumulator, scaled and biased below.
  Tensor aw = widen_codes(a, wide), bw = widen_codes(b, wide);
  if (a.transposed) aw = aw.t();
  if (b.transposed) bw = bw.t();
  // oneDNN applies the scale and the bias in its own epilogue and rounds once to the output:
  // no fp32 result goes through memory (that pass cost ~20 % of an FP8 Linear step on AMX).
  const bool bias_ok = !bias.defined() || bias.dtype() == kFloat32 || bias.dtype() == kBFloat16;
  if (wide == kBFloat16 && onednn_native_bf16 && bias_ok &&
      (out_dtype == kBFloat16 || out_dtype == kFloat32))
    return onednn_bf16_scaled(aw, bw, alpha, bias, out_dtype);
  Epilogue acc_only;
  acc_only.out_dtype = kFloat32;
  acc_only.float32 = Float32Products::kExact;
  const Tensor acc = gemm(dense(aw), dense(bw), acc_only);
  const int64_t m = acc.size(0), n = acc.size(1);
  // The epilogue, one row at a time while it is in cache: scale and bias in fp32 (in place in
  // the accumulator, which nothing else holds), then one rounding to a narrow output dtype.
  Tensor out = out_dtype == kFloat32 ? acc : empty(acc.shape(), out_dtype);
  const Tensor b32bias = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  float* rows = acc.data<float>();
  const float* bp = b32bias.defined() ? b32bias.data<float>() : nullptr;
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t row_bytes = n * static_cast<int64_t>(out_dtype.itemsize());
#pragma omp parallel for schedule(static) if (m * n > (1 << 15))
  for (int64_t i = 0; i < m; ++i) {
    float* r = rows + i * n;
    if (bp) {
      for (int64_t j = 0; j < n; ++j) r[j] = r[j] * alpha + bp[j];
    } else {
      for (int64_t j = 0; j < n; ++j) r[j] = r[j] * alpha;
    }
    if (out_dtype != kFloat32) convert_buffer(r, kFloat32, dst + i * row_bytes, out_dtype, n);
  }
  return out;
}

// cuBLASLt's FP8 kernels (compute capability >= 8.9) read both operands K-contiguous, so a
// transposed operand is copied transposed first (one byte per element), as TransformerEngine
// keeps transposed copies; the product accumulates in fp32 and alpha is applied in its
// epilogue. Dimensions that are not multiples of 16, two E5M2 operands, or older GPUs run the
// CPU's emulation instead: the codes widened exactly to fp32, an fp32 product (never TF32),
// scaled once. A bias is added in fp32 before the one rounding to out_dtype.
Tensor fp8_on_gpu(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                  float alpha) {
#if MANTISSA_HAS_CUDA
  namespace gpu = kernels::gpu;
  // The codes transposed by the cast itself where it made them (Operand::transposed_codes).
  auto transposed = [](const Operand& q) {
    return q.transposed_codes.defined() ? q.transposed_codes : gpu::fp8_transpose(q.data);
  };
  const Tensor a_mk = a.transposed ? transposed(a) : a.data;
  const Tensor b_nk = b.transposed ? b.data : transposed(b);
  const int64_t M = a_mk.size(0), N = b_nk.size(0), K = a_mk.size(1);
  // A bias in a half output's dtype (the transformer-engine precisions' bf16 layers) goes into
  // cuBLASLt's epilogue; any other is added here in fp32.
  const bool epilogue_bias = bias.defined() && bias.dtype() == out_dtype && out_dtype != kFloat32;
  const bool add_bias = bias.defined() && !epilogue_bias;
  Tensor y;
  if (M % 16 == 0 && N % 16 == 0 && K % 16 == 0 && K > 0 &&
      cuda::is_fp8_supported(a.data.device().index))
    y = kernels::cuda::fp8_matmul_tn(a_mk, b_nk, alpha, add_bias ? kFloat32 : out_dtype,
                                     epilogue_bias ? bias.detach() : Tensor());
  auto add_f32_bias = [&](const Tensor& t) {
    return gpu::map("fp8_gemm", gpu::EwOp::kAdd, {t, bias.detach()}, kFloat32, kFloat32, 1.0);
  };
  if (!y.defined()) {
    const Tensor aw = gpu::fp8_dequantize(a_mk, 1.0f, kFloat32);
    const Tensor bw = gpu::fp8_dequantize(b_nk, 1.0f, kFloat32);
    y = gpu::map("fp8_gemm", gpu::EwOp::kMulScalar,
                 {kernels::cuda::matmul(aw, bw.t(), Tensor(), /*allow_tf32=*/false)}, kFloat32,
                 kFloat32, alpha);
    if (bias.defined()) y = add_f32_bias(y);
  } else if (add_bias) {
    y = add_f32_bias(y);
  }
  return y.dtype() == out_dtype ? y : y.to(out_dtype);
#else
  (void)a, (void)b, (void)bias, (void)out_dtype, (void)alpha;
  fail("fp8_gemm", "this build has no CUDA backend");
#endif
}

}  // namespace mantissa::gemm::detail
