// The FP8 casts' CUDA branch (fp8_cuda.h).
#include "kernels/cuda/fp8/fp8_cuda.h"

#if MANTISSA_HAS_CUDA
#include <cstring>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/fp8/fp8_kernels.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::gpu {

Fp8CastOnGpu fp8_scaled_cast(const Tensor& x, DType fp8, float scale) {
  MANTISSA_CHECK(fp8.is_float8(), "fp8 quantize", "expected an FP8 dtype, got {}", fp8.name());
  cuda::detail::DeviceGuard guard(x.device());
  const Tensor src = x.detach().contiguous();
  Fp8CastOnGpu r;
  r.codes = empty(src.shape(), fp8, src.device());
  static_assert(sizeof(cuda::detail::Fp8CastCounters) == 3 * sizeof(int64_t));
  r.stats = zeros({3}, kInt64, src.device());
  const bool ok = cuda::detail::launch_fp8_scaled_cast(
      src.device_ptr(), detail::cuda_scalar_of(src.dtype(), "fp8 quantize"),
      static_cast<uint8_t*>(r.codes.device_ptr()), src.numel(), scale, fp8 == kFloat8_e5m2,
      static_cast<cuda::detail::Fp8CastCounters*>(r.stats.device_ptr()));
  MANTISSA_CHECK(ok, "fp8 quantize", "expected a float32, bfloat16 or float16 tensor, got {}",
                 src.dtype().name());
  return r;
}

Fp8CastStats read_fp8_cast_stats(const Tensor& host_stats, int64_t index) {
  MANTISSA_CHECK(host_stats.device().is_cpu() && host_stats.dtype() == kInt64 &&
                     host_stats.is_contiguous() && host_stats.numel() >= 3 * (index + 1),
                 "fp8 quantize", "internal error: no statistics of cast {} in {} {}", index,
                 host_stats.dtype().name(), shape_str(host_stats.shape()));
  cuda::detail::Fp8CastCounters c{};
  std::memcpy(&c, host_stats.data<int64_t>() + 3 * index, sizeof(c));
  Fp8CastStats r;
  std::memcpy(&r.amax, &c.amax_bits, sizeof(float));
  r.saturated = static_cast<int64_t>(c.saturated);
  r.flushed = static_cast<int64_t>(c.flushed);
  return r;
}

Tensor fp8_dequantize(const Tensor& codes, float scale_inv, DType out) {
  MANTISSA_CHECK(codes.dtype().is_float8(), "fp8 dequantize", "expected FP8 codes, got {}",
                 codes.dtype().name());
  cuda::detail::DeviceGuard guard(codes.device());
  MANTISSA_CHECK(codes.is_contiguous(), "fp8 dequantize", "expected contiguous codes");
  Tensor t = empty(codes.shape(), out, codes.device());
  const bool ok = cuda::detail::launch_fp8_dequantize(
      static_cast<const uint8_t*>(codes.device_ptr()), codes.dtype() == kFloat8_e5m2,
      t.device_ptr(), detail::cuda_scalar_of(out, "fp8 dequantize"), codes.numel(), scale_inv);
  MANTISSA_CHECK(ok, "fp8 dequantize", "the output must be float32, float16 or bfloat16, got {}",
                 out.name());
  return t;
}

Tensor fp8_transpose(const Tensor& codes) {
  MANTISSA_CHECK(codes.dim() == 2 && codes.is_contiguous(), "fp8 transpose",
                 "expected contiguous 2-D codes, got {}", shape_str(codes.shape()));
  cuda::detail::DeviceGuard guard(codes.device());
  Tensor t = empty({codes.size(1), codes.size(0)}, codes.dtype(), codes.device());
  cuda::detail::launch_transpose_bytes(static_cast<const uint8_t*>(codes.device_ptr()),
                                       static_cast<uint8_t*>(t.device_ptr()), codes.size(0),
                                       codes.size(1));
  return t;
}

}  // namespace mantissa::kernels::gpu

#endif
