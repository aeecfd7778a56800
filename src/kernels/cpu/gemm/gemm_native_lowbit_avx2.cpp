// Driver of the AVX2 GEMM with low-bit operands (gemm_lowbit.h). Same blocking, packed layout
// and micro-kernel as gemm_native_avx2.cpp, so a product whose operands decode to the values a
// dequantised copy would hold gives that copy's result bit for bit. Two differences: operands
// are decoded while packed (FP8 codes, 4-bit blocks), and B is packed one column chunk at a
// time -- every thread packs part of the chunk, then the threads share its (M block, N block)
// tiles -- so the packed weight is bounded by kLowbitBChunkBytes rather than its full size.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using gemm_avx2::block_size;
using gemm_avx2::ceil_div;
using gemm_avx2::kMR;
using gemm_avx2::kNR;

thread_local GrowableBuffer packed_a, packed_b, bias_f32, partial_sums;

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

  const int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  const int64_t a_panels = ceil_div(M, kMR), a_panel = K * kMR;
  const int64_t mc = block_size(M, gemm_avx2::kMcMax, kMR);
  const int64_t nc = block_size(N, gemm_avx2::kNcMax, kNR);
  const int64_t kc = block_size(K, gemm_avx2::kKc, 1);
  const int64_t m_blocks = ceil_div(M, mc), n_blocks = ceil_div(N, nc);
  // Whole N blocks per chunk: as many as fit the budget, and enough for every thread to get a
  // tile when M alone does not give them one.
  const int threads = omp_get_max_threads();
  int64_t chunk_blocks = std::max<int64_t>(1, kLowbitBChunkBytes / (int64_t{4} * K * nc));
  chunk_blocks = std::max(chunk_blocks, ceil_div(threads, m_blocks));
  chunk_blocks = std::min(chunk_blocks, n_blocks);
  const int64_t chunk_cols = chunk_blocks * nc;
  const bool out_low = g.out_dtype != kFloat32;
  const bool partials = out_low && kc < K;
  const size_t b_size = lb.b_four_bit ? 1 : lb.b_dtype.itemsize();

  float* pa = static_cast<float*>(packed_a.get(sizeof(float) * batch * a_panels * a_panel, op));
  float* pb = static_cast<float*>(packed_b.get(sizeof(float) * chunk_cols * K, op));
  const float* bias = nullptr;
  if (g.bias != nullptr) {
    const int64_t padded = ceil_div(N, kNR) * kNR;
    float* b32 = static_cast<float*>(bias_f32.get(sizeof(float) * padded, op));
    std::fill(b32 + N, b32 + padded, 0.0f);
    convert_buffer(g.bias, lb.bias_dtype, b32, kFloat32, N);
    bias = b32;
  }
  float* ws = partials
                  ? static_cast<float*>(partial_sums.get(sizeof(float) * threads * mc * nc, op))
                  : nullptr;
  const auto* b = static_cast<const char*>(g.b.data);
  auto offset = [](const GemmMatrix& m, int64_t i) { return m.offsets ? m.offsets[i] : 0; };

#pragma omp parallel
  {
    // A packed whole, [batch][K block][panel][k in block][kMR], as in gemm_native_avx2.cpp.
    gemm_avx2::pack_a_all(g, lb.a_dtype, kc, pa);
    const gemm_avx2::BlockTarget target{
        g.c, M, N, out_low, partials ? ws + omp_get_thread_num() * mc * nc : nullptr, nc, bias};
    for (int64_t bi = 0; bi < batch; ++bi) {
      for (int64_t c0 = 0; c0 < N; c0 += chunk_cols) {
        const int64_t c1 = std::min(N, c0 + chunk_cols);
        const int64_t panels = ceil_div(c1 - c0, kNR);
        // The chunk's B panels, [K block][panel][k in block][kNR].
#pragma omp for schedule(static)
        for (int64_t panel = 0; panel < panels; ++panel) {
          const int64_t col0 = c0 + panel * kNR;
          const int cols = static_cast<int>(std::min<int64_t>(kNR, N - col0));
          const int64_t base = offset(g.b, bi) + col0 * g.b.col_stride;
          for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t kcur = std::min(kc, K - k0);
            float* dst = pb + k0 * panels * kNR + panel * kcur * kNR;
            if (lb.b_four_bit) {
              gemm_avx2::pack_b_four_bit(*lb.b_four_bit, base + k0 * g.b.row_stride, g.b.col_stride,
                                         g.b.row_stride, cols, kcur, dst);
            } else {
              gemm_avx2::pack_b(lb.b_dtype, b + b_size * (base + k0 * g.b.row_stride),
                                g.b.col_stride, g.b.row_stride, cols, kcur, dst);
            }
          }
        }
        const int64_t chunk_n_blocks = ceil_div(c1 - c0, nc);
        // M blocks vary fastest, so the threads work on the same B block at a time. The
        // implicit barriers keep the chunk's panels in place until every tile is done.
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < m_blocks * chunk_n_blocks; ++task) {
          const int64_t m0 = task % m_blocks * mc, n0 = c0 + task / m_blocks * nc;
          const int64_t m1 = std::min(M, m0 + mc), n1 = std::min(c1, n0 + nc);
          for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t kcur = std::min(kc, K - k0);
            const float* a_blk = pa + bi * a_panels * a_panel + k0 * a_panels * kMR + m0 * kcur;
            const float* b_blk = pb + k0 * panels * kNR + (n0 - c0) * kcur;
            gemm_avx2::Tile t;
            t.first = k0 == 0;
            t.last = k0 + kcur == K;
            t.low_dtype = g.out_dtype;
            t.scale_epilogue = lb.scale_epilogue;
            t.alpha = lb.alpha;
            gemm_avx2::run_block_tiles(target, t, kcur, a_blk, b_blk, bi, m0, m1, n0, n1);
          }
        }
      }
    }
  }
}

}  // namespace mantissa::kernels
