// Narrow products on the AVX2 path (gemm_avx2_impl.h, run_narrow): a classifier head's x W^T with
// 10 outputs, say. The 6x16 micro-tile would spend 6 of its 16 columns on padding and pack all
// of A (a full read and write of the activations) to use each value 10 times: such products ran
// at under half of oneDNN's speed. Here each output is a dot product along k instead: A's rows
// are read in place (widened from bf16/f16 as they are loaded), B is packed once into N
// contiguous fp32 rows (through the driver's panel packer, so FP8 and 4-bit weights decode as
// they do for the tile path), and three rows of A meet up to four rows of B per pass: 12 ymm
// accumulators fed by 3 + 4 loads per 12 FMAs.
//
// Every output element is summed in one fixed order whatever the pass shape or the thread
// count: lane l of an 8-lane accumulator takes k = l, l + 8, l + 16, ... in increasing order (one
// FMA each; lanes past K add 0 * 0), the lanes are then added as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)); then, as the tile's epilogue does, the
// scale (when the driver asks for one) and the bias are applied, each rounded once.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/transpose8_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/half.h"

#define MANTISSA_NARROW_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MANTISSA_NARROW_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace mantissa::kernels::gemm_avx2 {
namespace {

enum class Src { kF32, kBF16, kF16 };

constexpr int kRows = 3;     // rows of A per pass
constexpr int kMaxCols = 4;  // rows of B (output columns) per pass: 3 x 4 accumulators
// (Zen 3, one thread, 256 x 1024 -> 10: 3 x 4 ran at 65-68 % of the FMA peak, 2 x 5 and 2 x 6
// at 57-62 %, 4 x 3 and 4 x 2 at 44-51 %.)

// Below this many multiply-adds a product runs on the calling thread alone: the fork and join
// of a parallel region would cost more than it saves.
constexpr int64_t kParallelMinMacs = int64_t{1} << 17;
// Values of B above which the threads pack it together (below, a barrier costs more).
constexpr int64_t kParallelPackMin = int64_t{1} << 16;

thread_local GrowableBuffer packed_rows, panel, bias_f32;

int64_t offset(const GemmMatrix& m, int64_t i) { return m.offsets ? m.offsets[i] : 0; }

// Rows of A per OpenMP task: a whole number of passes, at least four, and about four tasks per
// thread so a thread slowed by a neighbour takes fewer.
int64_t task_rows(int64_t M) {
  const int64_t threads = omp_get_max_threads();
  return std::max<int64_t>(4 * kRows, ceil_div(ceil_div(M, 4 * threads), kRows) * kRows);
}

constexpr size_t element_size(Src s) { return s == Src::kF32 ? 4 : 2; }

// Eight consecutive values of a row of A, widened to fp32.
template <Src S>
MANTISSA_NARROW_INLINE __m256 load8(const void* p) {
  if constexpr (S == Src::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
    if constexpr (S == Src::kBF16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}

// The last n < 8 values of a row, zero filled: copied into a zeroed buffer first, so nothing
// past the row's end is read.
template <Src S>
MANTISSA_NARROW_INLINE __m256 load_tail(const void* p, int64_t n) {
  alignas(32) unsigned char buf[32] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * element_size(S));
  return load8<S>(buf);
}

// The eight lane sums of each of v[0..7], as lane i of the result, in the documented tree.
MANTISSA_NARROW_INLINE __m256 reduce8(const __m256 (&v)[8]) {
  // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7], so two rounds
  // leave (s0+s1)+(s2+s3) of four vectors in the low half and (s4+s5)+(s6+s7) in the high one.
  const __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 y = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}

// What a pass does with its sums: row r's C outputs go to out[r] (column c0 of that row of C)
// in out_dtype, multiplied by alpha when scale is set, then with bias[0..C) added when bias is
// set; an f32 output rounded through round_to (bf16/f16; GemmArgs::round_to) when that is set.
struct PassOut {
  void* const* out;
  DType out_dtype;
  const float* bias;
  bool scale;
  float alpha;
  DType round_to;
};

// One pass: rows a[0..R) of A against rows w, w + kp, ... (C of them) of packed B over all of K.
template <Src S, int R, int C>
MANTISSA_NARROW_AVX2 void dot_pass(const unsigned char* const* a, const float* w, int64_t kp,
                                   int64_t K, const PassOut& o) {
  constexpr size_t es = element_size(S);
  constexpr int kAcc = R * C;
  static_assert(kAcc <= 16);
  __m256 acc[kAcc];
#pragma GCC unroll 16
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = load8<S>(a[r] + k * es);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m256 wv = _mm256_load_ps(w + c * kp + k);
      // Kept in a register and used by every row: GCC would otherwise fold the load into each
      // FMA, R loads per B vector instead of one.
      asm("" : "+x"(wv));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm256_fmadd_ps(av[r], wv, acc[r * C + c]);
    }
  }
  if (k < K) {  // packed B is zero past K, and so are these lanes of A
    __m256 av[R];
    for (int r = 0; r < R; ++r) av[r] = load_tail<S>(a[r] + k * es, K - k);
    for (int c = 0; c < C; ++c) {
      const __m256 wv = _mm256_load_ps(w + c * kp + k);
      for (int r = 0; r < R; ++r) acc[r * C + c] = _mm256_fmadd_ps(av[r], wv, acc[r * C + c]);
    }
  }
  // Groups of eight accumulators (the second padded with zeros) reduced side by side.
  alignas(32) float sums[16];
  const __m256 z = _mm256_setzero_ps();
#define MANTISSA_ACC(i) ((i) < kAcc ? acc[std::min((i), kAcc - 1)] : z)
  const __m256 g0[8] = {MANTISSA_ACC(0), MANTISSA_ACC(1), MANTISSA_ACC(2), MANTISSA_ACC(3),
                        MANTISSA_ACC(4), MANTISSA_ACC(5), MANTISSA_ACC(6), MANTISSA_ACC(7)};
  _mm256_store_ps(sums, reduce8(g0));
  if constexpr (kAcc > 8) {
    const __m256 g1[8] = {MANTISSA_ACC(8),  MANTISSA_ACC(9),  MANTISSA_ACC(10), MANTISSA_ACC(11),
                          MANTISSA_ACC(12), MANTISSA_ACC(13), MANTISSA_ACC(14), MANTISSA_ACC(15)};
    _mm256_store_ps(sums + 8, reduce8(g1));
  }
#undef MANTISSA_ACC
  const bool f32 = o.out_dtype == kFloat32, bf16 = o.out_dtype == kBFloat16;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      float v = sums[r * C + c];
      if (o.scale) {
        v *= o.alpha;
        asm("" : "+x"(v));  // rounded before the bias is added: no contraction into an FMA
      }
      if (o.bias) v += o.bias[c];
      if (f32 && o.round_to == kBFloat16) v = bf16_bits_to_float(float_to_bf16_bits(v));
      if (f32 && o.round_to == kFloat16) v = half_bits_to_float(float_to_half_bits(v));
      if (f32)
        static_cast<float*>(o.out[r])[c] = v;
      else
        static_cast<uint16_t*>(o.out[r])[c] = bf16 ? float_to_bf16_bits(v) : float_to_half_bits(v);
    }
  }
}

using DotPass = void (*)(const unsigned char* const*, const float*, int64_t, int64_t,
                         const PassOut&);

template <Src S, int R>
DotPass pick_pass(int cols) {
  switch (cols) {
    case 1:
      return dot_pass<S, R, 1>;
    case 2:
      return dot_pass<S, R, 2>;
    case 3:
      return dot_pass<S, R, 3>;
    default:
      return dot_pass<S, R, 4>;
  }
}

template <Src S>
DotPass pick_pass(int rows, int cols) {
  switch (rows) {
    case 1:
      return pick_pass<S, 1>(cols);
    case 2:
      return pick_pass<S, 2>(cols);
    default:
      return pick_pass<S, 3>(cols);
  }
}

// Columns [n0, n0 + 8) of eight rows of a [k][kNR] panel, transposed: row n of the result
// goes to dst[n * kp] (8 consecutive k), for the n < count.
MANTISSA_NARROW_INLINE void transpose_block(const float* p, int n0, int count, int64_t kp,
                                            float* dst) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(p + i * kNR + n0);
  transpose8(r);
  for (int n = 0; n < count; ++n) _mm256_storeu_ps(dst + n * kp, r[n]);
}

// Packs B's columns of batch entry bi over k in [k0, k0 + kcur) into rows[n * kp + k] (and,
// for the last chunk, zeros from K up to kp): the driver's packer fills one [k][kNR] panel (N <=
// kNR, zero padded), which is then transposed eight by eight.
MANTISSA_NARROW_AVX2 void pack_rows(const PackBPanel& pack_b_panel, int64_t bi, int N, int64_t k0,
                                    int64_t kcur, bool last, int64_t kp, float* rows) {
  const int64_t k8 = ceil_div(kcur, 8) * 8;  // the panel's rows up to k8 are zero past kcur
  float* p = static_cast<float*>(panel.get(sizeof(float) * kKc * kNR, "gemm_native"));
  pack_b_panel(bi, 0, N, k0, kcur, p);
  std::fill(p + kcur * kNR, p + k8 * kNR, 0.0f);
  for (int64_t k = 0; k < k8; k += 8)
    for (int n0 = 0; n0 < N; n0 += 8)
      transpose_block(p + k * kNR, n0, std::min(8, N - n0), kp, rows + n0 * kp + k0 + k);
  if (!last) return;
  for (int n = 0; n < N; ++n) std::fill(rows + n * kp + k0 + k8, rows + (n + 1) * kp, 0.0f);
}

// Column n of a plain B whose columns are contiguous in k (a Linear's weight W seen as W^T: the
// column is a row of W) copied straight into its packed row, widened, zero from K up to kp.
template <Src S>
MANTISSA_NARROW_AVX2 void copy_row(const unsigned char* src, int64_t K, int64_t kp, float* dst) {
  constexpr size_t es = element_size(S);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) _mm256_storeu_ps(dst + k, load8<S>(src + k * es));
  if (k < K) _mm256_storeu_ps(dst + k, load_tail<S>(src + k * es, K - k));
  std::fill(dst + ceil_div(K, 8) * 8, dst + kp, 0.0f);
}

void copy_rows(DType b_dtype, const GemmArgs& g, int64_t bi, int64_t kp, float* rows) {
  const size_t es = b_dtype.itemsize();
  const auto* b = static_cast<const unsigned char*>(g.b.data) + offset(g.b, bi) * es;
  for (int64_t n = 0; n < g.N; ++n) {
    const unsigned char* src = b + n * g.b.col_stride * es;
    if (b_dtype == kBFloat16)
      copy_row<Src::kBF16>(src, g.K, kp, rows + n * kp);
    else if (b_dtype == kFloat16)
      copy_row<Src::kF16>(src, g.K, kp, rows + n * kp);
    else
      copy_row<Src::kF32>(src, g.K, kp, rows + n * kp);
  }
}

template <Src S>
void run(const GemmArgs& g, DType bias_dtype, const Tile& epilogue, const PackBPanel& pack_b_panel,
         std::optional<DType> b_plain) {
  const int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  // Rows of packed B a cache line more than a multiple of 8 floats apart, zero past K: with
  // K = 1024 they would otherwise lie exactly 4 KiB apart, all in the same set of the L1.
  const int64_t kp = ceil_div(K, 8) * 8 + 16;
  // B is packed once per distinct batch entry (a Linear's weight is one for all).
  bool shared_b = true;
  for (int64_t i = 1; i < batch && shared_b; ++i) shared_b = offset(g.b, i) == offset(g.b, 0);
  const int64_t b_copies = shared_b ? 1 : batch;
  float* pb = static_cast<float*>(
      packed_rows.get(sizeof(float) * static_cast<size_t>(b_copies * N * kp), "gemm_native"));
  const float* bias = nullptr;
  if (g.bias != nullptr) {
    float* b32 = static_cast<float*>(bias_f32.get(sizeof(float) * N, "gemm_native"));
    convert_buffer(g.bias, bias_dtype, b32, kFloat32, N);
    bias = b32;
  }
  const int64_t rows_per_task = task_rows(M), row_blocks = ceil_div(M, rows_per_task);
  const bool parallel = batch * M * N * K >= kParallelMinMacs && omp_get_max_threads() > 1;
  // The passes over N: the fewest of at most kMaxCols columns, as even as possible.
  const int passes = static_cast<int>(ceil_div(N, kMaxCols));
  int pass_cols[kNR];
  DotPass pass_fn[kRows][kNR];  // [rows - 1][pass]
  for (int p = 0; p < passes; ++p) {
    pass_cols[p] = static_cast<int>(N / passes + (p < N % passes ? 1 : 0));
    for (int rows = 1; rows <= kRows; ++rows)
      pass_fn[rows - 1][p] = pick_pass<S>(rows, pass_cols[p]);
  }
  // B's columns contiguous in k and plain values: copied row by row; else through the driver's
  // panel packer, one K chunk at a time.
  const bool copy = b_plain.has_value() && g.b.row_stride == 1;
  const int64_t k_chunks = copy ? 1 : ceil_div(K, kKc);
  auto pack = [&](int64_t j) {  // one K chunk of one batch entry
    const int64_t bi = j / k_chunks, k0 = j % k_chunks * kKc;
    if (copy) {
      copy_rows(*b_plain, g, bi, kp, pb + bi * N * kp);
      return;
    }
    const int64_t kcur = std::min(kKc, K - k0);
    pack_rows(pack_b_panel, bi, static_cast<int>(N), k0, kcur, k0 + kcur == K, kp,
              pb + bi * N * kp);
  };
  // A small B (a head's weight: 10 x 128 is about a microsecond's work) is packed right here:
  // the threads would spend longer meeting at a barrier after packing it together.
  const bool pack_in_parallel = parallel && b_copies * N * K > kParallelPackMin;
  if (!pack_in_parallel)
    for (int64_t j = 0; j < b_copies * k_chunks; ++j) pack(j);
  const auto* a_base = static_cast<const unsigned char*>(g.a.data);
  constexpr size_t es = element_size(S);
  const size_t out_es = g.out_dtype.itemsize();

#pragma omp parallel if (parallel)
  {
    if (pack_in_parallel) {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < b_copies * k_chunks; ++j) pack(j);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < batch * row_blocks; ++task) {
      const int64_t bi = task / row_blocks;
      const int64_t r_lo = task % row_blocks * rows_per_task;
      const int64_t r_hi = std::min(M, r_lo + rows_per_task);
      const float* w_base = pb + (shared_b ? 0 : bi * N * kp);
      const unsigned char* a_entry = a_base + static_cast<size_t>(offset(g.a, bi)) * es;
      for (int64_t r = r_lo; r < r_hi; r += kRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, r_hi - r));
        const unsigned char* a[kRows];
        for (int i = 0; i < kRows; ++i)
          a[i] = a_entry + static_cast<size_t>((r + std::min(i, rows - 1)) * g.a.row_stride) * es;
        int64_t c0 = 0;
        for (int p = 0; p < passes; ++p) {
          void* out[kRows];
          for (int i = 0; i < rows; ++i)
            out[i] =
                static_cast<char*>(g.c) + static_cast<size_t>((bi * M + r + i) * N + c0) * out_es;
          pass_fn[rows - 1][p](a, w_base + c0 * kp, kp, K,
                               PassOut{out, g.out_dtype, bias ? bias + c0 : nullptr,
                                       epilogue.scale_epilogue, epilogue.alpha, g.round_to});
          c0 += pass_cols[p];
        }
      }
    }
  }
}

}  // namespace

bool narrow_applies(const GemmArgs& g, DType a_dtype) {
  return g.N <= kAvx2NarrowMaxN && g.a.col_stride == 1 &&
         (a_dtype == kFloat32 || a_dtype == kBFloat16 || a_dtype == kFloat16);
}

void run_narrow(const GemmArgs& g, DType a_dtype, DType bias_dtype, const Tile& epilogue,
                const PackBPanel& pack_b_panel, std::optional<DType> b_plain) {
  if (a_dtype == kBFloat16)
    run<Src::kBF16>(g, bias_dtype, epilogue, pack_b_panel, b_plain);
  else if (a_dtype == kFloat16)
    run<Src::kF16>(g, bias_dtype, epilogue, pack_b_panel, b_plain);
  else
    run<Src::kF32>(g, bias_dtype, epilogue, pack_b_panel, b_plain);
}

}  // namespace mantissa::kernels::gemm_avx2
