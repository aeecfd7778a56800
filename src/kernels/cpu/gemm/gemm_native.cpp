// Driver of the native GEMM: packs every A and B panel once (in parallel), then hands out
// (batch, M block, N block) output tiles to the OpenMP threads. A thread computes each tile it
// takes over the whole K, in K blocks whose partial sums continue in the same accumulators, so
// every output element is the same sequence of fused multiply-adds whichever thread runs it:
// results are bit-identical across calls and thread counts, and tiles can be handed out
// dynamically (a core slowed by a neighbour's load takes fewer tiles).
#include "kernels/cpu/gemm/gemm_native.h"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_native_impl.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using gemm::kMR;
using gemm::kNR;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The fewest blocks of at most max_block covering extent, made equal and rounded up to unit,
// so a 300-row matrix becomes 3 blocks of 112 rather than 112 + 112 + 76.
int64_t block_size(int64_t extent, int64_t max_block, int64_t unit) {
  return round_up(ceil_div(extent, ceil_div(extent, max_block)), unit);
}

// Panels are packed by every thread of the calling thread's team into that thread's buffers;
// a second thread calling gemm_native concurrently uses its own.
thread_local GrowableBuffer packed_a, packed_b, bias_f32, partial_sums;

template <typename T>
struct Packer;
template <>
struct Packer<float> {
  static constexpr auto a = gemm::pack_a_f32;
  static constexpr auto b = gemm::pack_b_f32;
  static constexpr auto kernel = gemm::kernel_f32_avx512;
};
template <>
struct Packer<uint16_t> {
  static constexpr auto a = gemm::pack_a_bf16;
  static constexpr auto b = gemm::pack_b_bf16;
  static constexpr auto kernel = gemm::kernel_bf16_avx512;
};

template <typename T>
void run(const GemmArgs& g) {
  constexpr bool kBf16 = sizeof(T) == 2;
  const int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  const int64_t Kp = kBf16 ? round_up(K, 2) : K;
  const int64_t a_panels = ceil_div(M, kMR), b_panels = ceil_div(N, kNR);
  const int64_t a_panel = Kp * kMR, b_panel = Kp * kNR;  // elements per packed panel
  const int64_t mc = block_size(M, gemm::kMcMax, kMR), nc = block_size(N, gemm::kNcMax, kNR);
  const int64_t kc = block_size(Kp, gemm::kKcBytes / static_cast<int64_t>(sizeof(T)), 2);
  const int64_t m_blocks = ceil_div(M, mc), n_blocks = ceil_div(N, nc);
  const bool out_bf16 = g.out_dtype == kBFloat16;
  // bf16 output summed in several K blocks keeps its fp32 partial sums per thread.
  const bool partials = out_bf16 && kc < Kp;

  const char* op = "gemm_native";
  T* pa = static_cast<T*>(packed_a.get(sizeof(T) * batch * a_panels * a_panel, op));
  T* pb = static_cast<T*>(packed_b.get(sizeof(T) * batch * b_panels * b_panel, op));
  const float* bias = nullptr;
  if (g.bias != nullptr) {
    float* b32 = static_cast<float*>(bias_f32.get(sizeof(float) * N, op));
    if (kBf16) {
      convert_bf16_to_f32(static_cast<const uint16_t*>(g.bias), b32, N);
    } else {
      std::copy_n(static_cast<const float*>(g.bias), N, b32);
    }
    bias = b32;
  }
  float* ws = partials ? static_cast<float*>(
                             partial_sums.get(sizeof(float) * omp_get_max_threads() * mc * nc, op))
                       : nullptr;
  const T* a = static_cast<const T*>(g.a.data);
  const T* b = static_cast<const T*>(g.b.data);
  auto offset = [](const GemmMatrix& m, int64_t i) { return m.offsets ? m.offsets[i] : 0; };

#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < batch * a_panels; ++p) {
      const int64_t bi = p / a_panels, row0 = p % a_panels * kMR;
      Packer<T>::a(a + offset(g.a, bi) + row0 * g.a.row_stride, g.a.row_stride, g.a.col_stride,
                   static_cast<int>(std::min<int64_t>(kMR, M - row0)), K, pa + p * a_panel);
    }
#pragma omp for schedule(static)
    for (int64_t p = 0; p < batch * b_panels; ++p) {
      const int64_t bi = p / b_panels, col0 = p % b_panels * kNR;
      Packer<T>::b(b + offset(g.b, bi) + col0 * g.b.col_stride, g.b.row_stride, g.b.col_stride,
                   static_cast<int>(std::min<int64_t>(kNR, N - col0)), K, pb + p * b_panel);
    }
    float* my_ws = partials ? ws + omp_get_thread_num() * mc * nc : nullptr;
    // M blocks vary fastest, so the threads work on the same packed B block at a time.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < batch * m_blocks * n_blocks; ++task) {
      const int64_t bi = task / (m_blocks * n_blocks);
      const int64_t m0 = task % m_blocks * mc, n0 = task / m_blocks % n_blocks * nc;
      const int64_t m1 = std::min(M, m0 + mc), n1 = std::min(N, n0 + nc);
      const T* a_blk = pa + (bi * a_panels + m0 / kMR) * a_panel;
      const T* b_blk = pb + (bi * b_panels + n0 / kNR) * b_panel;
      for (int64_t k0 = 0; k0 < Kp; k0 += kc) {
        const int64_t kcur = std::min(kc, Kp - k0);
        gemm::Tile t;
        t.first = k0 == 0;
        t.last = k0 + kcur == Kp;
        for (int64_t col = n0; col < n1; col += kNR) {
          const T* bp = b_blk + (col - n0) / kNR * b_panel + k0 * kNR;
          t.n = static_cast<int>(std::min<int64_t>(kNR, n1 - col));
          t.bias = bias ? bias + col : nullptr;
          for (int64_t row = m0; row < m1; row += kMR) {
            t.m = static_cast<int>(std::min<int64_t>(kMR, m1 - row));
            const int64_t out = (bi * M + row) * N + col;
            if (!out_bf16) {
              t.c = static_cast<float*>(g.c) + out;
              t.ldc = N;
            } else {
              t.c = partials ? my_ws + (row - m0) * nc + (col - n0) : nullptr;
              t.ldc = nc;
              t.c_bf16 = static_cast<uint16_t*>(g.c) + out;
              t.ldc_bf16 = N;
            }
            Packer<T>::kernel(kcur, a_blk + (row - m0) / kMR * a_panel + k0 * kMR, bp, t);
          }
        }
      }
    }
  }
}

}  // namespace

bool gemm_avx2_path(DType dtype) {
  const SimdLevel level = simd_level();
  const bool narrow = dtype == kBFloat16 || dtype == kFloat16;
  return (level == SimdLevel::kAvx2 && (dtype == kFloat32 || narrow)) ||
         (level == SimdLevel::kAvx512 && narrow) ||
         (level == SimdLevel::kAvx512Bf16 && dtype == kFloat16);
}

bool gemm_native_supported(DType dtype) {
  const SimdLevel level = simd_level();
  // The AVX2 kernel runs f32, bf16 and f16 in fp32 (bf16 and f16 operands widened while packed).
  if (gemm_avx2_path(dtype)) return true;
  if (dtype == kFloat32) return level >= SimdLevel::kAvx512;
  if (dtype == kBFloat16) return level >= SimdLevel::kAvx512Bf16;
  return false;
}

void gemm_native(const GemmArgs& g) {
  MANTISSA_CHECK(gemm_native_supported(g.dtype), "gemm_native",
                 "no native {} GEMM on this CPU (needs AVX2+FMA+F16C, or AVX-512{} for {})",
                 g.dtype.name(), g.dtype == kBFloat16 ? " BF16" : "F", g.dtype.name());
  MANTISSA_CHECK(g.batch >= 1 && g.M >= 1 && g.N >= 1 && g.K >= 1, "gemm_native",
                 "expected positive sizes, got batch {} M {} N {} K {}", g.batch, g.M, g.N, g.K);
  MANTISSA_CHECK(g.round_to == kFloat32 || (gemm_avx2_path(g.dtype) && g.out_dtype == kFloat32 &&
                                            (g.round_to == kBFloat16 || g.round_to == kFloat16)),
                 "gemm_native", "cannot round {} products through {} into {} on this CPU",
                 g.dtype.name(), g.round_to.name(), g.out_dtype.name());
  if (gemm_avx2_path(g.dtype)) {
    MANTISSA_CHECK(g.out_dtype == kFloat32 || g.out_dtype == g.dtype, "gemm_native",
                   "cannot write {} products as {}", g.dtype.name(), g.out_dtype.name());
    gemm_native_avx2(g);
    return;
  }
  MANTISSA_CHECK(g.out_dtype == kFloat32 || (g.dtype == kBFloat16 && g.out_dtype == kBFloat16),
                 "gemm_native", "cannot write {} products as {}", g.dtype.name(),
                 g.out_dtype.name());
  if (g.dtype == kBFloat16) {
    run<uint16_t>(g);
  } else {
    run<float>(g);
  }
}

}  // namespace mantissa::kernels
