#pragma once
// Internal pieces of the AVX2+FMA native GEMM (gemm_native.h, driven by gemm_native_avx2.cpp):
// blocking constants, the packed panel layout, the widening packers and the micro-kernel.
// Every operand dtype (f32, bf16, f16) is packed into fp32 panels: bf16 is widened by a
// 16-bit shift and f16 by F16C while the panel is copied, so low-precision operands cost one
// read of half the bytes instead of a separate conversion pass, and the micro-kernel is the
// same fp32 FMA loop for all of them.
#include <cstdint>
#include <functional>
#include <optional>

#include "kernels/cpu/gemm/gemm_blocking.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::gemm_avx2 {

// Micro-tile: 6 rows x 16 columns (two ymm of fp32) = 12 accumulators, leaving 4 of the 16
// ymm registers for the two B vectors and the A broadcasts. Per k step: 2 B loads and 6
// broadcasts feed 12 FMAs, i.e. 6 cycles of Zen 3's / Haswell's two FMA pipes against 4 of
// its two load ports, so the FMA pipes set the pace.
inline constexpr int kMR = 6;
inline constexpr int kNR = 16;
// On CPUs with AVX-512 the bf16 and f16 products (which have no AVX-512 kernel there, or none
// without bf16 arithmetic) run on a 6x32 tile instead: two zmm of B per k step, twice the FMA
// width, the same A panels (kernel_f32_wide_avx512; the driver picks with wide_tiles).
inline constexpr int kNRWide = 32;

// Cache blocking (Zen 3: 32 KiB L1d, 512 KiB L2 per core). A KC x 16 B micro-panel (16 KiB)
// stays in L1 while the kernel sweeps the MC x KC block of packed A (<= 96 KiB) from L2.
// K blocks continue the same fp32 accumulators, so they never change results.
inline constexpr int64_t kKc = 256;
inline constexpr int64_t kMcMax = 16 * kMR;
inline constexpr int64_t kNcMax = 16 * kNR;

// Packed panels, fp32, zero padded to full width: A panel [K][kMR], B panel [K][kNR] (or
// [K][kNRWide] for the wide tile); the K block starting at k0 starts at element k0 * kMR (or
// k0 * the B panel's width).
// src element (p, k) of the panel, p < count (a row of A or a column of B), is
// src[p * ps + k * ks] in `dtype` (f32, bf16, f16, or the FP8 formats, decoded to their exact
// value).
void pack_a(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K, float* dst);
void pack_b(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K, float* dst);
// For the wide tile: rows [0, rows) x k [0, K) of a bf16 or f16 A whose rows are contiguous in
// k (a Linear's input or output gradient), row p at src + p * ps elements, widened to fp32 rows
// of their own, row p at dst + p * widened_rows_ld(K), the rows past the last up to a whole tile
// zero. The wide kernel reads them in place (kernel_f32_wide_avx512_rows). Packing them into
// [k][kMR] panels instead moved every value through an 8 x 8 transpose, about 16 % of the ViT's
// input-gradient products on this tile (docs/performance.md, "Rows widened in place").
bool widens_a_block(DType dtype, int64_t ks);
int64_t widened_rows_ld(int64_t K);
int64_t widened_block_floats(int64_t rows, int64_t K);
void widen_a_block(DType dtype, const void* src, int64_t ps, int rows, int64_t K, float* dst);
void pack_b_wide(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K,
                 float* dst);
// The same for a 4-bit B (gemm_lowbit.h): panel element (p, k) is flat element
// first + p * ps + k * ks of `src`.
void pack_b_four_bit(const GemmFourBit& src, int64_t first, int64_t ps, int64_t ks, int count,
                     int64_t K, float* dst);

// Where one micro-kernel call reads and writes its m x n corner of the C tile.
struct Tile {
  float* c = nullptr;     // fp32 partial sums (ldc floats per row): read unless `first`,
  int64_t ldc = 0;        // written unless this is the `last` call and the output is narrow
  void* c_low = nullptr;  // when set, the last call stores the sums rounded (RNE) to
  int64_t ldc_low = 0;    // low_dtype (bf16 or f16) here instead
  DType low_dtype = kFloat32;
  // Without c_low: the last call rounds the fp32 sums through this dtype (bf16 or f16) before
  // storing them to c as fp32 (GemmArgs::round_to); kFloat32 stores them as they are.
  DType round_to = kFloat32;
  const float* bias = nullptr;  // kNR fp32 values (zero padded) added by the first call
  int m = kMR, n = kNR;
  bool first = true, last = true;
  // GemmLowbit::scale_epilogue: the first call starts from zero, the last multiplies the sums
  // by alpha and then adds the bias.
  bool scale_epilogue = false;
  float alpha = 1.0f;
  // With scale_epilogue (GemmLowbit::row_scale, col_scale), null or: the multipliers of the
  // tile's rows (t.m values) and of its columns (kNR, zero padded), applied after alpha.
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  // With scale_epilogue (GemmLowbit::bias_after_rounding): the scaled sums are rounded through
  // low_dtype before the bias is added.
  bool bias_after_rounding = false;
};

// One K block of one micro-tile: kc k steps over packed panels a (kc x kMR) and b (kc x kNR).
void kernel_f32_avx2(int64_t kc, const float* a, const float* b, const Tile& t);
// The same with A read in place: an f32 or bf16 A whose rows are contiguous in k, row i of the
// tile at a + i * lda (i < t.m). The FMAs are the packed kernel's, in the same order, on the same
// (exactly widened) values: the same bits.
void kernel_f32_avx2_rows(int64_t kc, const float* a, int64_t lda, const float* b, const Tile& t);
void kernel_bf16_avx2_rows(int64_t kc, const uint16_t* a, int64_t lda, const float* b,
                           const Tile& t);
// The 6x32 tile (b: kc x kNRWide) on AVX-512F/BW/VL; the same FMAs per element, so the same bits.
// Not for scale_epilogue (the low-bit GEMM keeps the 6x16 tile).
void kernel_f32_wide_avx512(int64_t kc, const float* a, const float* b, const Tile& t);
// The same over fp32 rows of A contiguous in k (widen_a_block): row i of the tile at a + i * lda.
void kernel_f32_wide_avx512_rows(int64_t kc, const float* a, int64_t lda, const float* b,
                                 const Tile& t);

// Whether products of `dtype` on this driver take the wide tile: bf16 and f16 on CPUs with
// AVX-512 (SIMD level avx512 or above). f32 comes here only at level avx2.
bool wide_tiles(DType dtype);

// ---- The driver pieces both AVX2 GEMMs share (gemm_native_avx2.cpp, gemm_native_lowbit_avx2.cpp).

using gemm_blocking::block_size;
using gemm_blocking::ceil_div;

// Packs every A panel of every batch entry into pa, [batch][K block][panel][k in block][kMR]
// (the panels one task sweeps in one K block lie in one contiguous stretch: prefetch-friendly,
// and no L2 set conflicts between panels a whole K apart). A worksharing loop: call it from
// inside an OpenMP parallel region, by every thread.
void pack_a_all(const GemmArgs& g, DType a_dtype, int64_t kc, float* pa);

// Where the tiles of one block write: C itself (f32 output) or, for a bf16/f16 output, the
// rounded values into C and, when K spans several K blocks, the fp32 partial sums into this
// thread's scratch (`partials` points at the block's first row, rows nc floats apart).
struct BlockTarget {
  void* c = nullptr;
  int64_t M = 0, N = 0;
  bool out_low = false;
  float* partials = nullptr;
  int64_t nc = 0;
  const float* bias = nullptr;  // zero padded to whole panels, or null
  int nr = kNR;                 // the B panels' width: kNR, or kNRWide for the wide tile
  // GemmLowbit's row scales (M values) and column scales (zero padded as the bias), or null.
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
};

// The A of one block: its packed fp32 panels starting at row m0, or (lda > 0) A itself at
// (m0, k0), rows lda elements of a_dtype (f32 or bf16: avx2_reads_a_in_place) apart.
struct BlockA {
  const void* a = nullptr;
  int64_t lda = 0;
  DType a_dtype = kFloat32;
  // A block widened by widen_a_block (lda 0): fp32 rows, row m0 + i at a + i * widened_lda.
  int64_t widened_lda = 0;
};

// Runs the micro-kernel over every tile of rows [m0, m1) x columns [n0, n1) of batch entry bi
// for one K block of kcur steps: b_blk is that block's packed B panels starting at column n0.
// `t` brings first/last and the epilogue settings; m, n, c and bias are set here.
void run_block_tiles(const BlockTarget& target, Tile t, int64_t kcur, const BlockA& a_blk,
                     const float* b_blk, int64_t bi, int64_t m0, int64_t m1, int64_t n0,
                     int64_t n1);

// Packs the panel of `cols` (<= nr) columns of B starting at column col0, rows [k0, k0 + kcur),
// of batch entry bi into dst ([k][nr], zero padded, nr as run_tasks was given), decoding or
// widening as the driver needs.
using PackBPanel =
    std::function<void(int64_t bi, int64_t col0, int cols, int64_t k0, int64_t kcur, float* dst)>;

// The task loop both AVX2 drivers share (gemm_native_avx2.cpp): blocking, A packing (a_dtype,
// up front or per task), B packed per task one K block at a time through pack_b_panel, the bias
// (g.bias in bias_dtype) fused, and `epilogue`'s scale settings applied by the last K block.
// Each C element is one fixed sequence of FMAs over k whichever thread computes it. nr: the B
// panels' width, kNR or (without a scale epilogue or an A read in place) kNRWide. Narrow
// products (narrow_applies, below) go to run_narrow instead.
void run_tasks(const GemmArgs& g, DType a_dtype, DType bias_dtype, const Tile& epilogue, int nr,
               const PackBPanel& pack_b_panel, const char* op,
               std::optional<DType> b_plain = std::nullopt);

// ---- Narrow outputs (gemm_narrow_avx2.cpp): N <= kAvx2NarrowMaxN (gemm_native.h) with A's
// rows contiguous in k and A in f32, bf16 or f16 (a classifier head's x W^T). run_tasks hands
// such products to run_narrow: each output is a dot product along k of a row of A, read in
// place, and a row of B packed once: no A packing, no padded columns. B goes through
// pack_b_panel, or, when b_plain names its dtype (f32, bf16, f16 values in g.b) and its columns
// are contiguous in k, is copied row by row.
bool narrow_applies(const GemmArgs& g, DType a_dtype);
void run_narrow(const GemmArgs& g, DType a_dtype, DType bias_dtype, const Tile& epilogue,
                const PackBPanel& pack_b_panel, std::optional<DType> b_plain);

}  // namespace mantissa::kernels::gemm_avx2

namespace mantissa::kernels {
// gemm_native on the AVX2 path: any of f32, bf16, f16 operands; output f32 or the operands'
// dtype.
void gemm_native_avx2(const GemmArgs& args);
}  // namespace mantissa::kernels
