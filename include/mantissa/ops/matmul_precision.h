#pragma once
// torch.set_float32_matmul_precision: how float32 matmuls, linears and convolutions compute
// (docs/precision.md, "float32 matmul precision").
//
//   "highest" (default)  fp32 products, fp32 accumulation.
//   "high"               bf16x3: each operand split into a bf16 high part and a bf16 low part
//                        (x = x_hi + x_lo), the product as a_hi*b_hi + a_hi*b_lo + a_lo*b_hi,
//                        all three summed in one fp32 accumulator: about fp32's accuracy
//                        (the dropped a_lo*b_lo term is ~2^-16 relative). On NVIDIA GPUs
//                        PyTorch's "high" means TF32 instead (10-bit mantissa products).
//   "medium"             one bf16 product: both operands rounded to bf16 (RNE), products exact
//                        in fp32, fp32 accumulation: about bf16's accuracy (~2^-9 relative per
//                        operand).
//
// Only float32 operands are affected; float64, float16 and bfloat16 ones are not. The inputs,
// outputs and gradients stay float32. On CPUs with AVX-512 BF16 the bf16 products run on the
// native bf16 GEMM (fp32 output); elsewhere the rounding is done while packing the operands and
// the products run on the fp32 GEMM -- the same numbers, but no faster than "highest" (a
// one-time warning says so).
#include <string>

#include "mantissa/core/scoped_setting.h"

namespace mantissa {

enum class Float32MatmulPrecision { kHighest, kHigh, kMedium };

// "highest", "high" or "medium"; anything else throws listing them. Process-wide, like
// PyTorch's.
void set_float32_matmul_precision(const std::string& precision);
void set_float32_matmul_precision(Float32MatmulPrecision precision);
std::string get_float32_matmul_precision();
Float32MatmulPrecision float32_matmul_precision();

namespace detail {
struct Float32MatmulPrecisionSetting {
  using Value = Float32MatmulPrecision;
  static Float32MatmulPrecision get() { return float32_matmul_precision(); }
  static void set(Float32MatmulPrecision p) { set_float32_matmul_precision(p); }
  static constexpr bool kProcessWide = true;
  static constexpr const char* kGuards =
      "float32 matmul precision guards (Float32MatmulPrecisionGuard)";
  static constexpr const char* kValue = "the float32 matmul precision";
};
extern template class ScopedSetting<Float32MatmulPrecisionSetting>;
}  // namespace detail

// Sets a precision for a scope and restores the previous one. Guards closed out of order (held
// by unique_ptr or optional) leave the precision as closing in order would (ScopedSetting says
// how); the guards are tracked per thread, so nest them on one thread.
class Float32MatmulPrecisionGuard : detail::ScopedSetting<detail::Float32MatmulPrecisionSetting> {
 public:
  explicit Float32MatmulPrecisionGuard(Float32MatmulPrecision p)
      : detail::ScopedSetting<detail::Float32MatmulPrecisionSetting>(p) {}
};

// The one-time warning text when "high"/"medium" run emulated (no AVX-512 BF16), else "".
std::string float32_matmul_emulation_warning();

}  // namespace mantissa
