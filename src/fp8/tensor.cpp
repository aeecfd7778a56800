#include "mantissa/fp8/tensor.h"

#include <algorithm>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/kernels/kernel_paths.h"
#include "ops/matmul_impl.h"

#if MANTISSA_HAS_CUDA
#include "kernels/cuda/fp8/fp8_cuda.h"
#include "kernels/cuda/gemm/cuda_gemm.h"
#include "mantissa/core/cuda.h"
#include "mantissa/ops/elementwise.h"
#endif

namespace mantissa::fp8 {
namespace {

// CastCounts::peak of one cast: its max|x| * scale over the format's max.
double peak_of(float amax, float scale, DType fp8) {
  return static_cast<double>(amax) * scale / fp8_max(fp8);
}

uint8_t* codes(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// Whether fp8_gemm decodes the codes inside the AVX2 GEMM's packing (no fp32 copy of either
// operand): on the AVX2 level, unless MANTISSA_GEMM=onednn asks for the library GEMM.
bool fused_fp8_gemm() {
  return kernels::gemm_native_lowbit_supported() &&
         kernels::gemm_backend() != kernels::GemmBackend::kOnednn;
}

Tensor fp8_gemm_fused(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                      const Tensor& bias, DType out_dtype, float alpha) {
  const Tensor& ad = a.data;
  const Tensor& bd = b.data;
  const int64_t M = transpose_a ? ad.size(1) : ad.size(0);
  const int64_t K = transpose_a ? ad.size(0) : ad.size(1);
  const int64_t N = transpose_b ? bd.size(0) : bd.size(1);
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
  g.a = {ad.data_ptr(), transpose_a ? 1 : lda, transpose_a ? lda : 1, nullptr};
  g.b = {bd.data_ptr(), transpose_b ? 1 : ldb, transpose_b ? ldb : 1, nullptr};
  g.bias = b32.defined() ? b32.data_ptr() : nullptr;
  g.c = out.data_ptr();
  kernels::GemmLowbit lb;
  lb.a_dtype = a.dtype();
  lb.b_dtype = b.dtype();
  lb.bias_dtype = b32.defined() ? b32.dtype() : kFloat32;
  lb.scale_epilogue = true;
  lb.alpha = alpha;
  kernels::gemm_native_lowbit(g, lb);
  return out_gemm == out_dtype ? out : out.to(out_dtype);
}

#if MANTISSA_HAS_CUDA
// fp8_gemm of GPU codes. cuBLASLt's FP8 kernels (compute capability >= 8.9) read both operands
// K-contiguous, so a transposed operand is copied transposed first (one byte per element), as
// TransformerEngine keeps transposed copies; the product accumulates in fp32 and alpha is
// applied in its epilogue. Dimensions that are not multiples of 16, two E5M2 operands, or older
// GPUs run the CPU's emulation instead: the codes widened exactly to fp32, an fp32 product
// (never TF32), scaled once. A bias is added in fp32 before the one rounding to out_dtype.
Tensor fp8_gemm_cuda(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                     const Tensor& bias, DType out_dtype, float alpha) {
  MANTISSA_CHECK(
      b.data.device() == a.data.device() && (!bias.defined() || bias.device() == a.data.device()),
      "fp8_gemm", "expected every operand on {}, got {}{}", a.data.device().str(),
      b.data.device().str(),
      bias.defined() ? " (bias on " + bias.device().str() + ")" : std::string());
  // The codes transposed by the cast itself where it made them (Fp8Tensor::transposed).
  auto transposed = [](const Fp8Tensor& q) {
    return q.transposed.defined() ? q.transposed : kernels::gpu::fp8_transpose(q.data);
  };
  const Tensor a_mk = transpose_a ? transposed(a) : a.data;
  const Tensor b_nk = transpose_b ? b.data : transposed(b);
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
  if (!y.defined()) {
    const Tensor aw = kernels::gpu::fp8_dequantize(a_mk, 1.0f, kFloat32);
    const Tensor bw = kernels::gpu::fp8_dequantize(b_nk, 1.0f, kFloat32);
    y = mul(kernels::cuda::matmul(aw, bw.t(), Tensor(), /*allow_tf32=*/false), alpha);
    if (bias.defined()) y = add(y, bias.detach().to(kFloat32));
  } else if (add_bias) {
    y = add(y, bias.detach().to(kFloat32));
  }
  return y.dtype() == out_dtype ? y : y.to(out_dtype);
}
#endif

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

bool gemm_widens_codes() { return !fused_fp8_gemm() && has_native_bf16(); }

Tensor fp8_gemm(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                const Tensor& bias, DType out_dtype) {
  MANTISSA_CHECK(a.data.dim() == 2 && b.data.dim() == 2, "fp8_gemm",
                 "operands must be 2-D, got {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  MANTISSA_CHECK(a.dtype().is_float8() && b.dtype().is_float8(), "fp8_gemm",
                 "operands must be FP8, got {} and {}", a.dtype().name(), b.dtype().name());
  const int64_t ka = transpose_a ? a.data.size(0) : a.data.size(1);
  const int64_t kb = transpose_b ? b.data.size(1) : b.data.size(0);
  MANTISSA_CHECK(ka == kb, "fp8_gemm",
                 "inner dimensions differ: {} x {} (transpose_a={}, transpose_b={})",
                 shape_str(a.shape()), shape_str(b.shape()), transpose_a, transpose_b);
  const int64_t n_out = transpose_b ? b.data.size(0) : b.data.size(1);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == n_out, "fp8_gemm",
                   "bias of shape {} does not match {} output columns", shape_str(bias.shape()),
                   n_out);
  }
  const float alpha = a.scale_inv * b.scale_inv;
#if MANTISSA_HAS_CUDA
  if (a.data.is_cuda() || b.data.is_cuda())
    return fp8_gemm_cuda(a, transpose_a, b, transpose_b, bias, out_dtype, alpha);
#endif
  if (fused_fp8_gemm() && ka > 0 && a.data.numel() > 0 && b.data.numel() > 0)
    return fp8_gemm_fused(a, transpose_a, b, transpose_b, bias, out_dtype, alpha);
  // The codes themselves (scale_inv 1) widen exactly to bf16 (and fp32): where the CPU has
  // native bf16 dot products (AVX-512 BF16, AMX) the product runs on them with the fp32
  // accumulator kept unrounded, else on the fp32 GEMM. Either way the same exact products and
  // one fp32 accumulator, scaled and biased below.
  const DType wide = has_native_bf16() ? kBFloat16 : kFloat32;
  auto widen = [&](const Fp8Tensor& q) {
    return q.widened_codes.defined() && q.widened_codes.dtype() == wide
               ? q.widened_codes
               : dequantize(Fp8Tensor{q.data, 1.0f, Tensor()}, wide);
  };
  Tensor aw = widen(a), bw = widen(b);
  if (transpose_a) aw = aw.t();
  if (transpose_b) bw = bw.t();
  // oneDNN applies the scale and the bias in its own epilogue and rounds once to the output:
  // no fp32 result goes through memory (that pass cost ~20 % of an FP8 Linear step on AMX).
  const bool bias_ok = !bias.defined() || bias.dtype() == kFloat32 || bias.dtype() == kBFloat16;
  if (wide == kBFloat16 && bias_ok && (out_dtype == kBFloat16 || out_dtype == kFloat32)) {
    Tensor y = detail::matmul_bf16_scaled(aw, bw, alpha, bias, out_dtype);
    if (y.defined()) return y;
  }
  const Tensor acc =
      wide == kBFloat16 ? detail::matmul_bf16_fp32_out(aw, bw) : detail::matmul_exact(aw, bw);
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

}  // namespace mantissa::fp8
