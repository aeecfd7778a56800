// The block-scaled FP8 product (fp8_block.h, block_scaled_gemm). The output is cut into tasks of
// up to `ms` rows and `nb` columns (all of N unless threads need more tasks) spread over threads.
// A float32 output is itself the fp32 accumulator; for a 16-bit output each thread accumulates its
// task in a buffer of its own (reused from task to task, so it stays in cache), then adds the bias
// and rounds the task's rows into the output, which is written once. For each 128-element slice of
// K a task decodes its rows of A into a float panel once (the codes' values, unscaled), then its
// columns of B a panel of kNb at a time (strips of the register tile's width, each k-major, so a
// tile reads its strip contiguously), and runs the fp32 register tile
// (kernels/cpu/gemm/fp32_register_tile.h) over the panels: the slice's partial sums start at 0 and
// take one fma per k in k order, then each is promoted into the accumulator with one fma by the two
// block scales. Every product of two FP8 values is exact in fp32, so the tile's fma equals the
// definition's sum; tiles and promotions give the same bits at every SIMD level. With AVX-512
// BF16 the slice's panels are also packed as pairs of k steps for the bf16 register tile
// (kernels/cpu/gemm/bf16_pair_tile.h), which does the same fmas two to an instruction: the
// panels hold unscaled FP8 values (multiples of 2^-16 below 2^16), so no partial sum of a slice
// is subnormal or overflows, and a slice whose panels hold a NaN or infinity runs the fp32 tile.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>

#include "core/convert_simd.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/gemm/bf16_pair_tile.h"
#include "kernels/cpu/gemm/code_panels.h"
#include "kernels/cpu/gemm/fp32_register_tile.h"
#include "kernels/cpu/gemm/gemm_blocking.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::fp8 {
namespace {

// Output rows per task (A's slice is decoded once per task), before the rounding up to whole
// register tiles.
constexpr int64_t kMaxMs = 256;
constexpr int64_t kNb = 256;               // columns of B's panel (decoded once per task and slice)
constexpr int64_t kPairs = kBlockLen / 2;  // pairs of k steps per slice (the bf16 tile's panels)

constexpr int64_t kGroup = 16;  // B's stored rows decoded together before the transpose

// Not cleared when made: run_task zeroes what a tile reads past the operands' ends.
struct Panels {
  std::unique_ptr<float[]> a;  // [kMaxMs + kFp32TileMaxRows][kBlockLen]; rows past the task's zero
  // [kNb / C][kBlockLen][C]: strips of the register tile's width C, each k-major; columns past
  // the panel's end zero.
  std::unique_ptr<float[]> b;
  std::unique_ptr<float[]> sa;     // [kMaxMs + kFp32TileMaxRows]: A's scale of each task row
  std::unique_ptr<float[]> sb;     // [kNb]: B's scale of each column in this slice
  std::unique_ptr<float[]> group;  // [kGroup][kBlockLen]: B's stored rows on their way to the panel
  // Where the bf16 tile runs: a and b as pairs of k steps (a16 [kMaxMs + R][kPairs], b16
  // [kNb / C][kPairs][C]), the thread's kept buffers.
  uint32_t *a16 = nullptr, *b16 = nullptr;
  explicit Panels(bool pairs)
      : a(std::make_unique_for_overwrite<float[]>((kMaxMs + kFp32TileMaxRows) * kBlockLen)),
        b(std::make_unique_for_overwrite<float[]>(kBlockLen * kNb)),
        sa(std::make_unique_for_overwrite<float[]>(kMaxMs + kFp32TileMaxRows)),
        sb(std::make_unique_for_overwrite<float[]>(kNb)),
        group(std::make_unique_for_overwrite<float[]>(kGroup * kBlockLen)) {
    if (pairs) {
      a16 = pair_panel_buffer(0, (kMaxMs + kFp32TileMaxRows) * kPairs);
      b16 = pair_panel_buffer(1, kPairs * kNb);
    }
  }
};

struct FreeAligned {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedFloats = std::unique_ptr<float[], FreeAligned>;
// n floats, not cleared, the first on a cache line.
AlignedFloats aligned_floats(int64_t n) {
  return AlignedFloats(static_cast<float*>(
      ::operator new[](static_cast<size_t>(n) * sizeof(float), std::align_val_t(64))));
}

// tile_rows is 1 or kBlockLen (block_scaled_gemm checks): a constant divisor, not a division.
float scale_of(const BlockOperandView& v, int64_t i, int64_t kb) {
  const int64_t r = v.tile_rows == 1 ? i : i / kBlockLen;
  return v.scale_inv[r * v.scale_row_stride + kb * v.scale_col_stride];
}

// The promotion of one R x C tile of partial sums `part` (row stride C) into the accumulator,
// for the real rows and columns of a tile cut by the task's edge: o = fma(part, sa * sb, o), with
// `first` o = fma(part, sa * sb, 0) (the accumulator not read). The FMA build inlines the fused
// multiply-add (the plain one calls the library's fmaf, the same value).
[[gnu::always_inline]] inline void promote_edge_body(const float* part, int C, const float* sa,
                                                     const float* sb, float* out, int64_t ldo,
                                                     int rows, int cols, bool first) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[r * ldo + c] = std::fma(part[r * C + c], sa[r] * sb[c], first ? 0.0f : out[r * ldo + c]);
}
void promote_edge(const float* part, int C, const float* sa, const float* sb, float* out,
                  int64_t ldo, int rows, int cols, bool first) {
  promote_edge_body(part, C, sa, sb, out, ldo, rows, cols, first);
}
__attribute__((target("avx2,fma"))) void promote_edge_fma(const float* part, int C, const float* sa,
                                                          const float* sb, float* out, int64_t ldo,
                                                          int rows, int cols, bool first) {
  promote_edge_body(part, C, sa, sb, out, ldo, rows, cols, first);
}
using PromoteEdgeFn = void (*)(const float*, int, const float*, const float*, float*, int64_t, int,
                               int, bool);

// n codes of operand v to their fp32 values (unscaled, exact), with `table` its values.
void decode_table_loop(const BlockOperandView&, const uint8_t* codes, int64_t n, float* out,
                       const float* table) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[codes[i]];
}
// The same with the vector decoder where the codes are E4M3 (every value, NaN's bits included,
// is the table's: tests/kernels/test_code_panels.cpp).
void decode_vector(const BlockOperandView& v, const uint8_t* codes, int64_t n, float* out,
                   const float* table) {
  if (v.fp8 == kFloat8_e4m3fn)
    code_panels::decode_e4m3(codes, n, 1.0f, {table[0x7F], table[0xFF]}, out);
  else
    decode_table_loop(v, codes, n, out, table);
}
// dst[c * ldd + r] = src[r * lds + c]: B's decoded stored rows into the panel.
void transpose_loop(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                    int64_t ldd) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * ldd + r] = src[r * lds + c];
}

using DecodeFn = void (*)(const BlockOperandView&, const uint8_t*, int64_t, float*, const float*);
using TransposeFn = void (*)(const float*, int64_t, int64_t, int64_t, float*, int64_t);
struct Tile {
  Fp32RegisterTile reg;  // its promoting form runs whole tiles
  PromoteEdgeFn promote_edge;
  DecodeFn decode;
  TransposeFn transpose;
  bool vec;                   // code_panels' decoders run
  const Bf16PairTile* pairs;  // the bf16 tile (its shape reg's), or null
};

Tile tile_for(SimdLevel level) {
  const SimdLevel l = std::min(level, simd_level());
  const Fp32RegisterTile reg = fp32_register_tile(l);
  const bool vec = code_panels::available(l);
  const DecodeFn decode = vec ? decode_vector : decode_table_loop;
  const TransposeFn transpose = vec ? code_panels::transpose_into : transpose_loop;
  const PromoteEdgeFn edge = l >= SimdLevel::kAvx2 ? promote_edge_fma : promote_edge;
  return {reg, edge, decode, transpose, vec, bf16_pair_tile(l)};
}

// One task: output rows m0.. (mlen of them, a task's rows at most) and columns n0.. (nlen),
// accumulated over all of K into `out`, the task's (m0, n0) element, rows ldo apart. With
// `cleared` its rows are zero on entry; without, the first slice's promotions write them. For
// each slice of K the task's rows of A are decoded once, then B's columns a panel of kNb at a
// time.
void run_task(const BlockOperandView& a, const BlockOperandView& b, const Tile& t, int64_t m0,
              int64_t mlen, int64_t n0, int64_t nlen, int64_t K, float* out, int64_t ldo,
              bool cleared, Panels& p) {
  const float* ta = detail::decode_table(a.fp8);
  const float* tb = detail::decode_table(b.fp8);
  float* ap = p.a.get();
  float* bp = p.b.get();
  const int64_t C = t.reg.cols, strip = kBlockLen * C, strip16 = kPairs * C;
  alignas(64) float part[kFp32TileMaxRows * kFp32TileMaxCols];
  // A's rows past the task's end stay zero for every slice.
  const int64_t padded = (mlen + t.reg.rows - 1) / t.reg.rows * t.reg.rows;
  std::fill(ap + mlen * kBlockLen, ap + padded * kBlockLen, 0.0f);
  for (int64_t kb = 0; kb * kBlockLen < K; ++kb) {
    const int64_t k0 = kb * kBlockLen, kl = std::min(kBlockLen, K - k0);
    const bool first = kb == 0 && !cleared;
    for (int64_t i = 0; i < mlen; ++i) p.sa[i] = scale_of(a, m0 + i, kb);
    if (a.row_stride == 1 && a.col_stride != 1 && t.vec && a.fp8 == kFloat8_e4m3fn) {
      // A's rows lie down its stored columns (a 128x1 cast read transposed): the slice's kl
      // stored rows decoded 8 x 8 codes at a time straight into the panel's rows.
      code_panels::decode_e4m3_transposed(a.codes + m0 + k0 * a.col_stride, a.col_stride, kl, mlen,
                                          {ta[0x7F], ta[0xFF]}, ap, kBlockLen);
    } else
      for (int64_t i = 0; i < mlen; ++i) {
        const uint8_t* row = a.codes + (m0 + i) * a.row_stride + k0 * a.col_stride;
        // Rows lie row_stride bytes apart: the row 4 ahead is fetched while this one is decoded.
        if (a.col_stride == 1 && i + 4 < mlen)
          for (int64_t k = 0; k < kl; k += 64) __builtin_prefetch(row + 4 * a.row_stride + k);
        float* dst = ap + i * kBlockLen;
        if (a.col_stride == 1)
          t.decode(a, row, kl, dst, ta);
        else
          for (int64_t k = 0; k < kl; ++k) dst[k] = ta[row[k * a.col_stride]];
      }
    const int64_t kp = (kl + 1) / 2;
    const bool a_pairs = t.pairs && pack_pair_rows(ap, kBlockLen, mlen, kl, p.a16, kPairs);
    for (int64_t q0 = n0; q0 < n0 + nlen; q0 += kNb) {
      const int64_t ql = std::min(kNb, n0 + nlen - q0);
      if (b.col_stride == 1 && t.vec && b.fp8 == kFloat8_e4m3fn) {
        // B's columns lie along its stored rows: decoded 8 x 8 codes at a time straight into
        // each strip's rows.
        for (int64_t j0 = 0; j0 < ql; j0 += C)
          code_panels::decode_e4m3_transposed(b.codes + (q0 + j0) * b.row_stride + k0, b.row_stride,
                                              std::min(C, ql - j0), kl, {tb[0x7F], tb[0xFF]},
                                              bp + j0 / C * strip, C);
      } else if (b.col_stride == 1) {
        // The same through up to kGroup decoded stored rows (within one strip) and a transpose.
        const int64_t g = std::min(kGroup, C);
        for (int64_t j0 = 0; j0 < ql; j0 += g) {
          const int64_t jn = std::min(g, ql - j0);
          for (int64_t j = 0; j < jn; ++j)
            t.decode(b, b.codes + (q0 + j0 + j) * b.row_stride + k0, kl,
                     p.group.get() + j * kBlockLen, tb);
          t.transpose(p.group.get(), kBlockLen, jn, kl, bp + j0 / C * strip + j0 % C, C);
        }
      } else if (b.row_stride == 1 && t.vec && b.fp8 == kFloat8_e4m3fn) {
        // The panel's rows are stored rows of B, each decoded across the strips.
        for (int64_t k = 0; k < kl; ++k)
          code_panels::decode_e4m3_strips(b.codes + (k0 + k) * b.col_stride + q0, ql,
                                          {tb[0x7F], tb[0xFF]}, bp + k * C, C, strip);
      } else if (b.row_stride == 1) {
        for (int64_t j0 = 0; j0 < ql; j0 += C) {
          float* s = bp + j0 / C * strip;
          const int64_t jn = std::min(C, ql - j0);
          for (int64_t k = 0; k < kl; ++k)
            t.decode(b, b.codes + (k0 + k) * b.col_stride + q0 + j0, jn, s + k * C, tb);
        }
      } else {
        for (int64_t k = 0; k < kl; ++k) {
          const uint8_t* line = b.codes + (k0 + k) * b.col_stride + q0 * b.row_stride;
          for (int64_t j = 0; j < ql; ++j)
            bp[j / C * strip + k * C + j % C] = tb[line[j * b.row_stride]];
        }
      }
      // Columns past a short panel's end (read by its last register tile) hold zeros.
      if (ql % C != 0) {
        float* s = bp + ql / C * strip;
        for (int64_t k = 0; k < kl; ++k) std::fill(s + k * C + ql % C, s + (k + 1) * C, 0.0f);
      }
      for (int64_t j = 0; j < ql; ++j) p.sb[j] = scale_of(b, q0 + j, kb);
      // The bf16 tile runs this slice and panel where both panels' values fit it.
      bool pairs = a_pairs;
      for (int64_t j0 = 0; pairs && j0 < ql; j0 += C)
        pairs = pack_pair_strip(bp + j0 / C * strip, C, std::min(C, ql - j0), kl,
                                p.b16 + j0 / C * strip16);
      for (int64_t i0 = 0; i0 < mlen; i0 += t.reg.rows) {
        const int rows = static_cast<int>(std::min<int64_t>(t.reg.rows, mlen - i0));
        const float* sa = p.sa.get() + i0;
        float* orow = out + i0 * ldo + (q0 - n0);
        const float* bs = bp;  // strip j0 / C
        for (int64_t j0 = 0; j0 < ql; j0 += C, bs += strip) {
          const int cols = static_cast<int>(std::min<int64_t>(C, ql - j0));
          // The slice's partial sums start at 0; a whole tile promotes them in registers, one cut
          // by the task's edge through `part` (its row stride the tile's width).
          const uint32_t* a16 = pairs ? p.a16 + i0 * kPairs : nullptr;
          const uint32_t* b16 = pairs ? p.b16 + j0 / C * strip16 : nullptr;
          if (rows == t.reg.rows && cols == C) {
            if (pairs)
              t.pairs->promote(a16, kPairs, b16, C, kp, sa, p.sb.get() + j0, orow + j0, ldo, first);
            else
              t.reg.promote(ap + i0 * kBlockLen, kBlockLen, bs, C, kl, sa, p.sb.get() + j0,
                            orow + j0, ldo, first);
            continue;
          }
          if (pairs)
            t.pairs->fn(a16, kPairs, b16, C, kp, part, C, true);
          else
            t.reg.fn(ap + i0 * kBlockLen, kBlockLen, bs, C, kl, part, C, true);
          t.promote_edge(part, static_cast<int>(C), sa, p.sb.get() + j0, orow + j0, ldo, rows, cols,
                         first);
        }
      }
    }
  }
}

}  // namespace

void block_scaled_gemm(const BlockOperandView& a, const BlockOperandView& b, int64_t M, int64_t N,
                       int64_t K, const float* bias, void* out, DType out_dtype, SimdLevel level) {
  MANTISSA_CHECK(M >= 0 && N >= 0 && K >= 0, "fp8 block gemm", "bad shape {} x {} x {}", M, N, K);
  MANTISSA_CHECK(a.fp8.is_float8() && b.fp8.is_float8(), "fp8 block gemm",
                 "operands must hold FP8 codes");
  MANTISSA_CHECK((a.tile_rows == 1 || a.tile_rows == kBlockLen) &&
                     (b.tile_rows == 1 || b.tile_rows == kBlockLen),
                 "fp8 block gemm", "an operand's scales cover 1 or {} rows, got {} and {}",
                 kBlockLen, a.tile_rows, b.tile_rows);
  MANTISSA_CHECK(out_dtype == kFloat32 || out_dtype == kBFloat16 || out_dtype == kFloat16,
                 "fp8 block gemm", "the output must be float32, bfloat16 or float16, got {}",
                 out_dtype.name());
  if (M == 0 || N == 0) return;
  const Tile t = tile_for(level);
  const bool parallel = M * N * K > (int64_t{1} << 18);
  const int64_t threads = parallel ? std::max(1, omp_get_max_threads()) : 1;
  // Tasks of up to kMaxMs rows and all of N (A's slice decoded once), split where threads need
  // more of them.
  const gemm_blocking::DecodeOnceTasks tasks =
      gemm_blocking::decode_once_tasks(M, N, kNb, kMaxMs, threads);
  // Task rows rounded up to whole register tiles (at most kMaxMs + R - 1, which A's panel holds),
  // so that only the last row task has a tile cut by its edge.
  const int64_t ms = gemm_blocking::ceil_div(tasks.rows, t.reg.rows) * t.reg.rows;
  const int64_t mt = gemm_blocking::ceil_div(M, ms), nb = tasks.cols, nt = tasks.col_count;
  const bool direct = out_dtype == kFloat32;
  // The accumulator's rows start on cache lines, and not a multiple of 4 KiB apart (rows that
  // far apart share L1 sets, and the register tile touches six at once).
  const int64_t acc_stride = (std::min(nb, N) + 15) / 16 * 16 + 16;
  // Tensor::to's rounding of float32 rows (the same bits at every level).
  const convert_detail::ToHalfWidth round = direct ? nullptr
                                            : out_dtype == kBFloat16
                                                ? convert_detail::f32_to_bf16_kernel()
                                                : convert_detail::f32_to_f16_kernel();
#pragma omp parallel if (parallel && mt * nt > 1)
  {
    Panels p(t.pairs != nullptr);
    AlignedFloats acc;  // a 16-bit output's task accumulator, made at the first task
#pragma omp for collapse(2) schedule(static)
    for (int64_t ib = 0; ib < mt; ++ib) {
      for (int64_t jb = 0; jb < nt; ++jb) {
        const int64_t m0 = ib * ms, mlen = std::min(ms, M - m0);
        const int64_t n0 = jb * nb, nlen = std::min(nb, N - n0);
        if (!direct && !acc) acc = aligned_floats(ms * acc_stride);
        float* o = direct ? static_cast<float*>(out) + m0 * N + n0 : acc.get();
        const int64_t ldo = direct ? N : acc_stride;
        // A float32 output is cleared first (the first slice's stores into memory not yet
        // touched cost more than the fill); the thread's own accumulator is written by the
        // first slice, unless there is none.
        const bool cleared = direct || K == 0;
        if (cleared)
          for (int64_t i = 0; i < mlen; ++i) std::fill_n(o + i * ldo, nlen, 0.0f);
        run_task(a, b, t, m0, mlen, n0, nlen, K, o, ldo, cleared, p);
        for (int64_t i = 0; i < mlen; ++i) {
          float* row = o + i * ldo;
          if (bias) {
#pragma omp simd
            for (int64_t j = 0; j < nlen; ++j) row[j] += bias[n0 + j];
          }
          if (!direct) round(row, static_cast<uint16_t*>(out) + (m0 + i) * N + n0, nlen);
        }
      }
    }
  }
}

void block_scaled_gemm(const BlockOperandView& a, const BlockOperandView& b, int64_t M, int64_t N,
                       int64_t K, const float* bias, float* out, SimdLevel level) {
  block_scaled_gemm(a, b, M, N, K, bias, out, kFloat32, level);
}

}  // namespace mantissa::kernels::fp8
