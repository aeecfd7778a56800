// Driver of the AVX2 GEMM with low-bit operands (gemm_lowbit.h): the task loop of
// gemm_native_avx2.cpp (gemm_avx2::run_tasks: same blocking, packed layout and micro-kernel), so
// a product whose operands decode to the values a dequantised copy would hold gives that copy's
// result bit for bit. Operands are decoded while packed (FP8 codes, 4-bit blocks); B is packed
// one (K block, N block) at a time per task, so at most one such block per thread of the weight
// ever exists in fp32.
#include <algorithm>

#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

int64_t offset(const GemmMatrix& m, int64_t i) { return m.offsets ? m.offsets[i] : 0; }

bool operand_dtype_ok(DType d) {
  return d == kFloat32 || d == kBFloat16 || d == kFloat16 || d.is_float8();
}

}  // namespace

bool gemm_native_lowbit_supported() { return simd_level() == SimdLevel::kAvx2; }

void gemm_native_lowbit(const GemmArgs& g, const GemmLowbit& lb) {
  const char* op = "gemm_native_lowbit";
  MANTISSA_CHECK(gemm_native_lowbit_supported(), op,
                 "needs SIMD level avx2 (AVX2+FMA+F16C without AVX-512); check "
                 "gemm_native_lowbit_supported() and dequantise elsewhere");
  MANTISSA_CHECK(g.batch >= 1 && g.M >= 1 && g.N >= 1 && g.K >= 1, op,
                 "expected positive sizes, got batch {} M {} N {} K {}", g.batch, g.M, g.N, g.K);
  MANTISSA_CHECK(operand_dtype_ok(lb.a_dtype) && (lb.b_four_bit || operand_dtype_ok(lb.b_dtype)),
                 op, "operands must be f32, bf16, f16 or FP8, got {} and {}", lb.a_dtype.name(),
                 lb.b_dtype.name());
  MANTISSA_CHECK(g.out_dtype == kFloat32 || g.out_dtype == kBFloat16 || g.out_dtype == kFloat16, op,
                 "output must be f32, bf16 or f16, got {}", g.out_dtype.name());
  if (lb.b_four_bit)
    MANTISSA_CHECK(lb.b_four_bit->blocksize % 16 == 0, op,
                   "4-bit block size must be a multiple of 16, got {}", lb.b_four_bit->blocksize);

  const size_t b_size = lb.b_four_bit ? 1 : lb.b_dtype.itemsize();
  const auto* b = static_cast<const char*>(g.b.data);
  gemm_avx2::Tile epilogue;
  epilogue.scale_epilogue = lb.scale_epilogue;
  epilogue.alpha = lb.alpha;
  epilogue.row_scale = lb.row_scale;
  epilogue.col_scale = lb.col_scale;
  epilogue.bias_after_rounding = lb.bias_after_rounding;
  gemm_avx2::run_tasks(
      g, lb.a_dtype, lb.bias_dtype, epilogue, gemm_avx2::kNR,
      [&](int64_t bi, int64_t col0, int cols, int64_t k0, int64_t kcur, float* dst) {
        const int64_t first = offset(g.b, bi) + col0 * g.b.col_stride + k0 * g.b.row_stride;
        if (lb.b_four_bit) {
          gemm_avx2::pack_b_four_bit(*lb.b_four_bit, first, g.b.col_stride, g.b.row_stride, cols,
                                     kcur, dst);
        } else {
          gemm_avx2::pack_b(lb.b_dtype, b + b_size * first, g.b.col_stride, g.b.row_stride, cols,
                            kcur, dst);
        }
      },
      op,
      lb.b_four_bit || lb.b_dtype.is_float8() ? std::nullopt : std::optional<DType>(lb.b_dtype));
}

}  // namespace mantissa::kernels
