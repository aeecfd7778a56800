// Driver of the AVX2 native GEMM (gemm_native.h on CPUs with AVX2+FMA+F16C but no AVX-512,
// and for bf16/f16 products on AVX-512 ones, there on the 6x32 zmm tile: gemm_avx2_path): hands
// out (batch, N block, M chunk) tasks to the OpenMP threads, each packing its N block's
// B panels one K block at a time; A is packed once up front (in parallel), or by the tasks when
// there is a single N block; bf16/f16 operands are widened to fp32 while they are packed. As in the
// AVX-512 driver, each output element is one fixed sequence of FMAs over k whichever thread
// computes it, so results are bit-identical across calls and thread counts.
#include <omp.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {
namespace {

using gemm_avx2::block_size;
using gemm_avx2::ceil_div;
using gemm_avx2::kMR;
using gemm_avx2::kNR;

thread_local GrowableBuffer packed_a, packed_b, bias_f32, col_scale_f32, partial_sums, transposed_c;

int64_t offset(const GemmMatrix& m, int64_t i) { return m.offsets ? m.offsets[i] : 0; }

// A transposed view: consecutive rows adjacent in memory (a weight gradient's dY^T).
bool is_transposed_view(const GemmMatrix& m) { return m.row_stride == 1 && m.col_stride != 1; }

// A tall product whose A is a transposed view (a weight gradient dY^T X with many more output
// features than input features, such as the GPT MLP's 1024 x 256 over 2048 tokens) runs
// several times slower than its mirror image (the 256 x 1024 one): each of its many 6-row A
// panels takes 6 values of every memory row. Such products are computed as C^T = B^T A^T,
// whose A is again a transposed view but with few panels, and C^T is then transposed into C.
// Each element of C^T is the same sequence of FMAs over k as the element of C (the product of
// two floats does not depend on their order), so the bits are the same. Only for a single f32
// product without bias (where the mirrored epilogue would differ). Not for a widened bf16/f16
// product (round_to): mirrored, the ViT's and the GPT's tall weight gradients (384 x 128 over
// 4 352 tokens, 768 x 256 and 1024 x 256 over 2 048) ran 6-10 % slower at the AVX2 level.
bool mirror_tall_transposed_a(const GemmArgs& g) {
  return g.batch == 1 && g.out_dtype == kFloat32 && g.round_to == kFloat32 && g.bias == nullptr &&
         is_transposed_view(g.a) && g.M >= 2 * g.N && g.N >= gemm_avx2::kNR;
}

}  // namespace

namespace gemm_avx2 {

void pack_a_all(const GemmArgs& g, DType a_dtype, int64_t kc, float* pa) {
  const int64_t M = g.M, K = g.K, a_panels = ceil_div(M, kMR), a_panel = K * kMR;
  const size_t esize = a_dtype.itemsize();
  const auto* a = static_cast<const char*>(g.a.data);
  // A transposed view (a weight gradient's dY^T: consecutive rows of A are adjacent in memory)
  // gives each panel 6 values of every memory row, a fraction of a cache line. Panels are then
  // packed in groups, the group's panels one after the other within each K block, so a line
  // fetched for one panel is still in L1 for the next; one panel at a time over all of K
  // fetched every line about three times from L3 (the GPT's 1024 x 256 weight gradient ran at
  // a third of the peak). The packed layout, and so the result, is the same either way.
  const int64_t group = is_transposed_view(g.a) ? 8 : 1;
  const int64_t groups = ceil_div(a_panels, group);
#pragma omp for schedule(static)
  for (int64_t gi = 0; gi < g.batch * groups; ++gi) {
    const int64_t bi = gi / groups, first = gi % groups * group;
    const int64_t last = std::min(a_panels, first + group);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t kcur = std::min(kc, K - k0);
      for (int64_t panel = first; panel < last; ++panel) {
        const int64_t row0 = panel * kMR;
        const char* src = a + esize * (offset(g.a, bi) + row0 * g.a.row_stride);
        const int rows = static_cast<int>(std::min<int64_t>(kMR, M - row0));
        pack_a(a_dtype, src + esize * k0 * g.a.col_stride, g.a.row_stride, g.a.col_stride, rows,
               kcur, pa + bi * a_panels * a_panel + k0 * a_panels * kMR + panel * kcur * kMR);
      }
    }
  }
}

void run_block_tiles(const BlockTarget& target, Tile t, int64_t kcur, const BlockA& a_blk,
                     const float* b_blk, int64_t bi, int64_t m0, int64_t m1, int64_t n0,
                     int64_t n1) {
  // The fp32 sums of the tile at (row, col): C itself, or this block's partial sums.
  const auto sums = [&](int64_t row, int64_t col) -> std::pair<float*, int64_t> {
    if (!target.out_low)
      return {static_cast<float*>(target.c) + (bi * target.M + row) * target.N + col, target.N};
    if (target.partials == nullptr) return {nullptr, 0};
    return {target.partials + (row - m0) * target.nc + (col - n0), target.nc};
  };
  const int64_t nr = target.nr;
  for (int64_t col = n0; col < n1; col += nr) {
    const float* bp = b_blk + (col - n0) * kcur;
    t.n = static_cast<int>(std::min<int64_t>(nr, n1 - col));
    t.bias = target.bias ? target.bias + col : nullptr;
    t.col_scale = target.col_scale ? target.col_scale + col : nullptr;
    for (int64_t row = m0; row < m1; row += kMR) {
      t.m = static_cast<int>(std::min<int64_t>(kMR, m1 - row));
      t.row_scale = target.row_scale ? target.row_scale + row : nullptr;
      std::tie(t.c, t.ldc) = sums(row, col);
      if (target.out_low) {
        t.c_low = static_cast<uint16_t*>(target.c) + (bi * target.M + row) * target.N + col;
        t.ldc_low = target.N;
      }
      if (!t.first) {
        // A later K block starts from the sums the earlier ones stored, which have gone out to
        // L3 by now (a whole block of C was swept in between): the kernel's first FMAs would
        // wait on those loads. The next tile's rows are requested one kernel call (~1,500
        // cycles) before they are needed.
        const bool next_row = row + kMR < m1;
        const auto [next, ld] = sums(next_row ? row + kMR : m0, next_row ? col : col + nr);
        if (next != nullptr && (next_row || col + nr < n1))
          for (int i = 0; i < kMR; ++i) __builtin_prefetch(next + i * ld, 1, 3);
      }
      const int64_t lda = a_blk.lda;
      if (lda > 0 && a_blk.a_dtype == kBFloat16)
        kernel_bf16_avx2_rows(kcur, static_cast<const uint16_t*>(a_blk.a) + (row - m0) * lda, lda,
                              bp, t);
      else if (lda > 0)
        kernel_f32_avx2_rows(kcur, static_cast<const float*>(a_blk.a) + (row - m0) * lda, lda, bp,
                             t);
      else if (a_blk.widened_lda > 0)
        kernel_f32_wide_avx512_rows(
            kcur, static_cast<const float*>(a_blk.a) + (row - m0) * a_blk.widened_lda,
            a_blk.widened_lda, bp, t);
      else if (nr == kNRWide)
        kernel_f32_wide_avx512(kcur, static_cast<const float*>(a_blk.a) + (row - m0) * kcur, bp, t);
      else
        kernel_f32_avx2(kcur, static_cast<const float*>(a_blk.a) + (row - m0) * kcur, bp, t);
    }
  }
}

}  // namespace gemm_avx2

namespace gemm_avx2 {

// A task takes all of N (its share of M; each thread packs the whole B block for itself) when
// every thread gets at least kWholeNMinRows rows and the packed B block stays within
// kWholeNMaxBBytes (N up to 1024 at KC 256). Its A blocks are then packed right before use and
// swept from L2; with N cut into kNcMax blocks, all of A was packed up front behind a barrier
// and read back from L3 once per N block (the ViT's 128 -> 384 projection over 4 352 tokens ran
// at 0.83-0.89 of oneDNN that way). Measured at the AVX2 level on an Intel Xeon (family 6 model
// 167, 2 threads, old and new interleaved, docs/performance.md "AVX2 GEMM"): 1024^3 from a mean
// 0.77 to 0.81 of the FMA peak, the GPT's 2048 x 768 x 256 from 0.84 to 0.87. Below the row
// threshold (the MLP's batch of 256) the duplicated B packing costs more than it saves.
// A B that is decoded while packed (FP8 codes, 4-bit blocks) costs a decode per copy, and its
// fp32 copy is memory the quantisation meant to save: it takes all of N only when the block is
// small (kDecodedWholeNMaxBBytes) and the rows many (kDecodedWholeNMinRows per thread).
constexpr int64_t kWholeNMinRows = 256;
constexpr int64_t kWholeNMaxBBytes = 1024 * 1024;
constexpr int64_t kDecodedWholeNMinRows = 4 * kMcMax;
constexpr int64_t kDecodedWholeNMaxBBytes = 256 * 1024;

bool wide_tiles(DType dtype) {
  return (dtype == kBFloat16 || dtype == kFloat16) && simd_level() >= SimdLevel::kAvx512;
}

void run_tasks(const GemmArgs& g, DType a_dtype, DType bias_dtype, const Tile& epilogue, int nr,
               const PackBPanel& pack_b_panel, const char* op, std::optional<DType> b_plain) {
  MANTISSA_CHECK(nr == kNR || (nr == kNRWide && !epilogue.scale_epilogue &&
                               !avx2_reads_a_in_place(a_dtype, g.a.row_stride, g.a.col_stride)),
                 op, "no {}-column tile for this product", nr);
  const bool row_col_scales = epilogue.row_scale != nullptr || epilogue.col_scale != nullptr ||
                              epilogue.bias_after_rounding;
  MANTISSA_CHECK(
      !row_col_scales || (epilogue.scale_epilogue && g.batch == 1 && !narrow_applies(g, a_dtype)),
      op,
      "row and column scales need the scale epilogue, one product and no narrow "
      "kernel (batch {}, A {}, N {})",
      g.batch, a_dtype.name(), g.N);
  if (narrow_applies(g, a_dtype)) {
    run_narrow(g, a_dtype, bias_dtype, epilogue, pack_b_panel, b_plain);
    return;
  }
  const int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  const int64_t a_panels = ceil_div(M, kMR), a_panel = K * kMR;  // floats per packed A panel
  const int64_t threads = omp_get_max_threads();
  const int64_t mc = block_size(M, kMcMax, kMR);
  const int64_t kc = block_size(K, kKc, 1);
  int64_t nc = block_size(N, kNcMax, nr);
  const int64_t n_padded = ceil_div(N, nr) * nr;
  const int64_t b_block_bytes = kc * n_padded * static_cast<int64_t>(sizeof(float));
  const bool whole_n =
      b_plain.has_value()
          ? M >= threads * kWholeNMinRows && b_block_bytes <= kWholeNMaxBBytes
          : M >= threads * kDecodedWholeNMinRows && b_block_bytes <= kDecodedWholeNMaxBBytes;
  if (whole_n) nc = n_padded;
  const int64_t n_blocks = ceil_div(N, nc);
  const int64_t n_tiles = ceil_div(N, nr);
  const bool out_low = g.out_dtype != kFloat32;
  // A narrow output summed in several K blocks keeps its fp32 partial sums per thread.
  const bool partials = out_low && kc < K;

  // Tasks: one N block of one batch entry over a chunk of rows (gemm_blocking::row_chunks).
  const int64_t pairs = batch * n_blocks;
  const auto [chunk_rows, m_chunks] = gemm_blocking::row_chunks(pairs, M, kMR, threads);
  const int64_t tasks = pairs * m_chunks;

  // With a single N block every A block is used by one task only: it is then packed inside that
  // task, right before use (it stays in L2), instead of up front through memory. For the ViT's
  // 128-wide products over 4 352 tokens the up-front packing of A cost about a third of the
  // product. With several N blocks A is packed once and shared.
  const bool a_in_tasks = n_blocks == 1;
  // An f32 or bf16 A whose rows are contiguous in k (a Linear's input x, a row-major matrix) is
  // read in place by the kernel, six rows side by side (avx2_reads_a_in_place): packing only
  // copied (or widened) it, and for the ViT's narrow products (128-384 outputs per token) that
  // copy was a tenth to a sixth of the product (4 352 x 128 x 128: 0.76 -> 0.89 of the FMA peak
  // without it); the bf16 one was 9 % of the ViT's whole bf16-mixed step at the AVX2 level.
  const int64_t lda = g.a.row_stride;
  const bool a_direct = avx2_reads_a_in_place(a_dtype, lda, g.a.col_stride);
  // On the wide tile a bf16/f16 A with rows contiguous in k is widened row by row into fp32 rows
  // that the kernel reads in place (widen_a_block), instead of into [k][kMR] panels through 8 x 8
  // transposes: the ViT's forward and input-gradient products (4 352 tokens, widths 128-384)
  // ran 2-13 % faster on an Intel Xeon (family 6 model 207, docs/performance.md).
  const bool widen_a =
      a_in_tasks && !a_direct && nr == kNRWide && widens_a_block(a_dtype, g.a.col_stride);
  // (mc is a whole number of panels.)
  const int64_t a_floats = a_direct     ? 0
                           : widen_a    ? threads * widened_block_floats(mc, kc)
                           : a_in_tasks ? threads * mc * kc
                                        : batch * a_panels * a_panel;
  float* pa = static_cast<float*>(packed_a.get(sizeof(float) * a_floats, op));
  // Per thread: one packed B block (kc x nc) and, for a narrow output, the chunk's partial sums.
  const int64_t b_block = kc * nc;
  float* pb = static_cast<float*>(packed_b.get(sizeof(float) * threads * b_block, op));
  const float* bias = nullptr;
  if (g.bias != nullptr) {
    // Zero padded to whole panels, so the kernel loads full vectors.
    float* b32 = static_cast<float*>(bias_f32.get(sizeof(float) * n_padded, op));
    std::fill(b32 + N, b32 + n_padded, 0.0f);
    convert_buffer(g.bias, bias_dtype, b32, kFloat32, N);
    bias = b32;
  }
  const float* col_scale = nullptr;
  if (epilogue.col_scale != nullptr) {
    // Zero padded as the bias.
    float* cs = static_cast<float*>(col_scale_f32.get(sizeof(float) * n_padded, op));
    std::copy(epilogue.col_scale, epilogue.col_scale + N, cs);
    std::fill(cs + N, cs + n_padded, 0.0f);
    col_scale = cs;
  }
  float* ws =
      partials
          ? static_cast<float*>(partial_sums.get(sizeof(float) * threads * chunk_rows * nc, op))
          : nullptr;

#pragma omp parallel
  {
    // Packed A per batch entry: [K block][panel][k in block][kMR] (pack_a_all), or per task.
    if (!a_in_tasks && !a_direct) pack_a_all(g, a_dtype, kc, pa);
    const int64_t me = omp_get_thread_num();
    float* pa_mine = !a_in_tasks || a_direct ? nullptr
                     : widen_a               ? pa + me * widened_block_floats(mc, kc)
                                             : pa + me * mc * kc;
    float* pb_mine = pb + me * b_block;
    const size_t a_esize = a_dtype.itemsize();
    const auto* a = static_cast<const char*>(g.a.data);
    float* ws_mine = partials ? ws + me * chunk_rows * nc : nullptr;
    // BLIS order within a task: for each K block, pack the N block's B panels (they stay in
    // this core's L2 while the M blocks sweep past them; packing all of B up front, behind a
    // barrier, was ~14% of an MLP-sized product), then every M block of the chunk. Each C
    // element still gets one fixed sequence of FMAs over k, K blocks in order, whichever thread
    // computes it: the bits do not depend on the thread count.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bi = task / (n_blocks * m_chunks);
      // N blocks of whole tiles, as equal as whole tiles allow (at most nc wide): blocks of nc
      // with the remainder in the last one left a short last task, and a thread idle while
      // the other finished a full one (the MLP's 784 columns: 224, 224, 224, 112 on 2 threads
      // kept one of them idle an eighth of the time).
      const int64_t nb = task / m_chunks % n_blocks;
      const int64_t n0 = nb * n_tiles / n_blocks * nr;
      const int64_t n1 = std::min(N, (nb + 1) * n_tiles / n_blocks * nr);
      const int64_t m_lo = task % m_chunks * chunk_rows, m_hi = std::min(M, m_lo + chunk_rows);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kcur = std::min(kc, K - k0);
        for (int64_t col0 = n0; col0 < n1; col0 += nr)
          pack_b_panel(bi, col0, static_cast<int>(std::min<int64_t>(nr, N - col0)), k0, kcur,
                       pb_mine + (col0 - n0) * kcur);
        Tile t = epilogue;
        t.first = k0 == 0;
        t.last = k0 + kcur == K;
        t.low_dtype = g.out_dtype;
        t.round_to = g.round_to;
        for (int64_t m0 = m_lo; m0 < m_hi; m0 += mc) {
          const int64_t m1 = std::min(m_hi, m0 + mc);
          BlockA a_blk;
          if (a_direct) {
            a_blk = {a + a_esize * (offset(g.a, bi) + m0 * lda + k0), lda, a_dtype};
          } else if (!a_in_tasks) {
            a_blk.a = pa + bi * a_panels * a_panel + k0 * a_panels * kMR + m0 * kcur;
          } else if (widen_a) {
            // bf16/f16 rows contiguous in k, widened in their own order for the wide kernel.
            widen_a_block(a_dtype, a + a_esize * (offset(g.a, bi) + m0 * lda + k0), lda,
                          static_cast<int>(m1 - m0), kcur, pa_mine);
            a_blk.a = pa_mine;
            a_blk.widened_lda = widened_rows_ld(kcur);
          } else {
            // This block's panels, [panel][k in block][kMR], as pack_a_all lays them out.
            for (int64_t row0 = m0; row0 < m1; row0 += kMR) {
              const char* src =
                  a + a_esize * (offset(g.a, bi) + row0 * g.a.row_stride + k0 * g.a.col_stride);
              pack_a(a_dtype, src, g.a.row_stride, g.a.col_stride,
                     static_cast<int>(std::min<int64_t>(kMR, M - row0)), kcur,
                     pa_mine + (row0 - m0) * kcur);
            }
            a_blk.a = pa_mine;
          }
          const BlockTarget target{g.c,
                                   M,
                                   N,
                                   out_low,
                                   partials ? ws_mine + (m0 - m_lo) * nc : nullptr,
                                   nc,
                                   bias,
                                   nr,
                                   epilogue.row_scale,
                                   col_scale};
          run_block_tiles(target, t, kcur, a_blk, pb_mine, bi, m0, m1, n0, n1);
        }
      }
    }
  }
}

}  // namespace gemm_avx2

void gemm_native_avx2(const GemmArgs& g) {
  if (mirror_tall_transposed_a(g)) {
    GemmArgs t = g;
    t.M = g.N;
    t.N = g.M;
    // t.a(n, k) = b(k, n), t.b(k, m) = a(m, k).
    t.a = GemmMatrix{g.b.data, g.b.col_stride, g.b.row_stride, g.b.offsets};
    t.b = GemmMatrix{g.a.data, g.a.col_stride, g.a.row_stride, g.a.offsets};
    float* ct = static_cast<float*>(
        transposed_c.get(sizeof(float) * static_cast<size_t>(g.M * g.N), "gemm_native"));
    t.c = ct;
    gemm_native_avx2(t);
    float* c = static_cast<float*>(g.c);
    const int64_t M = g.M, N = g.N;
    // C[m][n] = C^T[n][m], in 64 x 64 blocks so both sides stay in L1.
#pragma omp parallel for schedule(static)
    for (int64_t m0 = 0; m0 < M; m0 += 64)
      for (int64_t n0 = 0; n0 < N; n0 += 64)
        for (int64_t m = m0; m < std::min(M, m0 + 64); ++m)
          for (int64_t n = n0; n < std::min(N, n0 + 64); ++n) c[m * N + n] = ct[n * M + m];
    return;
  }
  const size_t esize = g.dtype.itemsize();
  const auto* b = static_cast<const char*>(g.b.data);
  // (A narrow product runs on its dot-product kernel, whose B packing is the 6x16 tile's.)
  const bool wide = gemm_avx2::wide_tiles(g.dtype) && !gemm_avx2::narrow_applies(g, g.dtype);
  gemm_avx2::run_tasks(
      g, g.dtype, g.dtype, gemm_avx2::Tile{}, wide ? gemm_avx2::kNRWide : kNR,
      [&](int64_t bi, int64_t col0, int cols, int64_t k0, int64_t kcur, float* dst) {
        const void* src =
            b + esize * (offset(g.b, bi) + col0 * g.b.col_stride + k0 * g.b.row_stride);
        if (wide)
          gemm_avx2::pack_b_wide(g.dtype, src, g.b.col_stride, g.b.row_stride, cols, kcur, dst);
        else
          gemm_avx2::pack_b(g.dtype, src, g.b.col_stride, g.b.row_stride, cols, kcur, dst);
      },
      "gemm_native", g.dtype);
}

}  // namespace mantissa::kernels
