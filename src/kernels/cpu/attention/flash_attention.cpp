// FlashAttention-2 style forward and backward on the CPU (see flash_attention.h).
#include "kernels/cpu/attention/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <xmmintrin.h>

#include "core/convert_simd.h"
#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/cpu/gemm/dense_gemv.h"
#include "kernels/cpu/gemm/tile_gemm.h"
#include "mantissa/core/bfloat16.h"

namespace mantissa::kernels {
namespace {

// Query rows per block: under the causal mask about half of each diagonal tile is wasted work,
// so query blocks stay small; key blocks are wider to amortise the online-softmax rescaling.
constexpr int64_t kBq = 32;
constexpr int64_t kBk = 64;

template <typename T>
T* base(const AttnOperand& x, int64_t b, int64_t h) {
  return static_cast<T*>(x.data) + b * x.sb + h * x.sh;
}

// Rows here are short (one head's E values), so bf16 widens inline (exact: the bits shifted
// up), and f16 and the narrowing go straight to the active level's kernel: the bulk
// converter's per-call checks and parallel split cost more than a row's conversion.
template <typename T, typename A>
void widen(const T* src, A* dst, int64_t n) {
  if constexpr (std::is_same_v<T, A>) {
    std::copy(src, src + n, dst);
  } else if constexpr (std::is_same_v<T, Half>) {
    convert_detail::f16_to_f32_kernel()(reinterpret_cast<const uint16_t*>(src), dst, n);
  } else {
    // omp simd: this file is built for the baseline ISA, whose cost model at -O2 leaves a
    // run-time-length loop scalar; SSE2 widens four values per instruction.
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i].x);
  }
}

template <typename T, typename A>
void narrow(const A* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, A>) {
    std::copy(src, src + n, dst);
  } else if constexpr (std::is_same_v<T, Half>) {
    convert_detail::f32_to_f16_kernel()(src, reinterpret_cast<uint16_t*>(dst), n);
  } else {
    convert_detail::f32_to_bf16_kernel()(src, reinterpret_cast<uint16_t*>(dst), n);
  }
}

// NaN-propagating max, as the composed softmax: a NaN score makes its row NaN.
template <typename A>
A nan_max(A m, A x) {
  return (x > m || x != x) ? x : m;
}

float row_max(const float* x, int64_t n) { return vm::max_f32(x, n); }
double row_max(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = nan_max(m, x[j]);
  return m;
}

// x = exp(x - shift) in place; returns the sum (fixed order).
float exp_shift_sum(float* x, float shift, int64_t n) {
  return vm::exp_shift_sum_f32(x, shift, x, n);
}
double exp_shift_sum(double* x, double shift, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += x[j] = std::exp(x[j] - shift);
  return s;
}

// Keys of a tile's row that query i0 + r may see: j0 + j <= i0 + r under the causal mask (all
// bk otherwise). The rest of the row gets weight 0 directly instead of a score of -inf:
// exp(-inf) is an underflowing product, a ~150-cycle microcode assist on Intel cores, and
// the visible prefix gives the same max and the same sums (the rest only added +0).
int64_t visible_keys(bool causal, int64_t i0, int64_t r, int64_t j0, int64_t bk) {
  return causal ? std::clamp<int64_t>(i0 + r + 1 - j0, 0, bk) : bk;
}

// exp(x - shift) over the first `visible` of a row's bk scores, 0 for the others; the sum.
template <typename A>
A visible_exp_sum(A* row, A shift, int64_t visible, int64_t bk) {
  const A s = exp_shift_sum(row, shift, visible);
  std::fill(row + visible, row + bk, A(0));
  return s;
}

// Rows [0, rows) of a (rows, cols) operand widened into dst (row-major, ld cols) times `mul`.
template <typename T, typename A>
void load_rows(const T* src, int64_t sr, int64_t rows, int64_t cols, A* dst, A mul = A(1)) {
  for (int64_t r = 0; r < rows; ++r) {
    A* d = dst + r * cols;
    if constexpr (std::is_same_v<T, A>) {
      if (mul != A(1)) {
        // Scaled in the same pass as the copy (the product is the same either way).
        const T* s = src + r * sr;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) d[c] = s[c] * mul;
        continue;
      }
    }
    widen(src + r * sr, d, cols);
    if (mul != A(1))
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) d[c] *= mul;
  }
}

// The same rows transposed into dst (cols, ld): dst[c * ld + r]; tmp holds kTransposeRows rows.
// Into fp32, rows go four at a time through 4 x 4 SSE transposes, bf16 and f16 ones widened into
// tmp first; the rest are scattered one value at a time.
constexpr int64_t kTransposeRows = 4;

template <typename T, typename A>
void load_rows_transposed(const T* src, int64_t sr, int64_t rows, int64_t cols, A* dst, int64_t ld,
                          A* tmp) {
  int64_t r0 = 0;
  if constexpr (std::is_same_v<A, float>) {
    // fp32 rows four at a time, in 4 x 4 SSE transposes (baseline x86-64): the scalar scatter
    // was ~4% of a ViT step (the transposes of K and V, 17 keys per head). bf16 rows scattered
    // one value at a time left the ViT's bf16-mixed attention 3-5 % slower (forward, 2 % in
    // the backward) than with this path.
    for (; r0 + 4 <= rows; r0 += 4) {
      const float* s0;
      if constexpr (std::is_same_v<T, float>) {
        s0 = src + r0 * sr;
      } else {
        for (int64_t k = 0; k < 4; ++k) widen(src + (r0 + k) * sr, tmp + k * cols, cols);
        s0 = tmp;
      }
      const int64_t s_ld = std::is_same_v<T, float> ? sr : cols;
      int64_t c = 0;
      for (; c + 4 <= cols; c += 4) {
        __m128 x0 = _mm_loadu_ps(s0 + c), x1 = _mm_loadu_ps(s0 + s_ld + c);
        __m128 x2 = _mm_loadu_ps(s0 + 2 * s_ld + c), x3 = _mm_loadu_ps(s0 + 3 * s_ld + c);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        _mm_storeu_ps(dst + c * ld + r0, x0);
        _mm_storeu_ps(dst + (c + 1) * ld + r0, x1);
        _mm_storeu_ps(dst + (c + 2) * ld + r0, x2);
        _mm_storeu_ps(dst + (c + 3) * ld + r0, x3);
      }
      for (; c < cols; ++c)
        for (int64_t k = 0; k < 4; ++k) dst[c * ld + r0 + k] = s0[k * s_ld + c];
    }
  }
  for (int64_t r = r0; r < rows; ++r) {
    const T* row = src + r * sr;
    if constexpr (std::is_same_v<T, Half>) {
      widen(row, tmp, cols);
      for (int64_t c = 0; c < cols; ++c) dst[c * ld + r] = tmp[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) dst[c * ld + r] = static_cast<A>(row[c]);
    }
  }
}

template <typename A>
int64_t forward_scratch(const AttnProblem& p) {
  // One query row also keeps its S scores (forward_one_row).
  return p.E * p.S + p.S * p.Ev + kBq * (p.E + p.Ev + kBk + 2) +
         kTransposeRows * std::max(p.E, p.Ev) + (p.L == 1 ? p.S : 0);
}

// Asks for the rows of operand x that head (b, h)'s call will read, into L2. A head's rows lie a
// whole token apart (the heads of a token are interleaved), a stride the hardware prefetcher
// does not follow across heads: without this the K and V transposes of the ViT's short heads
// waited on memory for most of their time.
template <typename T>
void prefetch_head_rows(const AttnOperand& x, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  const auto* first = reinterpret_cast<const char*>(base<T>(x, b, h));
  const int64_t row_bytes = cols * static_cast<int64_t>(sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = first + r * x.sr * static_cast<int64_t>(sizeof(T));
    for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(row + off, 0, 2);
    __builtin_prefetch(row + row_bytes - 1, 0, 2);
  }
}

// The head after (b, h) in for_each_head's order (each thread runs a contiguous range), or
// false for the last one.
bool next_head(const AttnProblem& p, int64_t b, int64_t h, int64_t* nb, int64_t* nh) {
  const int64_t next = b * p.heads + h + 1;
  if (next >= p.batch * p.heads) return false;
  *nb = next / p.heads;
  *nh = next % p.heads;
  return true;
}

// One (batch, head) with a single float query row (incremental decoding: one new token against
// its cached keys). The scores are dot products straight from K's rows (dense_gemv.h's order),
// without the transposed copy of K the blocked path makes: at one query row that copy cost as
// much as the products. One softmax pass over all S scores, then one product with V.
template <typename T>
void forward_one_row(const AttnProblem& p, int64_t b, int64_t h, const AttnOperand& q,
                     const AttnOperand& k, const AttnOperand& v, const AttnOperand& o, float* lse,
                     float* scratch) {
  const int64_t S = p.causal ? 1 : p.S, E = p.E, Ev = p.Ev;  // keys the row sees
  float* kf = scratch;        // (S, E): k widened (read in place when T is float)
  float* vf = kf + S * E;     // (S, Ev): v widened (likewise)
  float* qs = vf + S * Ev;    // (E): q * scale
  float* acc = qs + kBq * E;  // (Ev): unnormalised output
  float* scores = acc + kBq * (Ev + kBk + 2) + kTransposeRows * std::max(E, Ev);  // (S)
  if (int64_t nb, nh; next_head(p, b, h, &nb, &nh)) {
    prefetch_head_rows<T>(k, nb, nh, S, E);
    prefetch_head_rows<T>(v, nb, nh, S, Ev);
  }
  const float* krows = kf;
  const float* vrows = vf;
  int64_t ldk = E, ldv = Ev;
  if constexpr (std::is_same_v<T, float>) {
    krows = base<T>(k, b, h);
    ldk = k.sr;
    vrows = base<T>(v, b, h);
    ldv = v.sr;
  } else {
    load_rows(base<T>(k, b, h), k.sr, S, E, kf);
    load_rows(base<T>(v, b, h), v.sr, S, Ev, vf);
  }
  load_rows(base<T>(q, b, h), q.sr, 1, E, qs, static_cast<float>(p.scale));
  dense_gemv_rows(krows, ldk, E, qs, 0, S, scores);
  const float mx = nan_max(-std::numeric_limits<float>::infinity(), row_max(scores, S));
  const float sum = exp_shift_sum(scores, mx, S);
  tile_gemm(1, Ev, S, scores, S, 1, vrows, ldv, acc, Ev, false);
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t c = 0; c < Ev; ++c) acc[c] *= inv;
  narrow(acc, base<T>(o, b, h), Ev);
  lse[0] = mx + std::log(sum);
}

// One (batch, head): all query blocks against the keys they see.
template <typename T>
void forward_one(const AttnProblem& p, int64_t b, int64_t h, const AttnOperand& q,
                 const AttnOperand& k, const AttnOperand& v, const AttnOperand& o, acc_t<T>* lse,
                 acc_t<T>* scratch) {
  using A = acc_t<T>;
  const int64_t L = p.L, E = p.E, Ev = p.Ev;
  const int64_t S = p.causal ? std::min(p.S, p.L) : p.S;  // keys any query sees
  A* kt = scratch;           // (E, S): k transposed, so score rows are vector loads
  A* vf = kt + E * S;        // (S, Ev): v widened (read in place when T is A)
  A* qs = vf + S * Ev;       // (kBq, E): q * scale
  A* acc = qs + kBq * E;     // (kBq, Ev): unnormalised output
  A* tile = acc + kBq * Ev;  // (kBq, kBk): scores, then weights
  A* mx = tile + kBq * kBk;  // running max per row
  A* sum = mx + kBq;         // running sum of exp(s - mx) per row
  A* tmp = sum + kBq;
  if (int64_t nb, nh; next_head(p, b, h, &nb, &nh)) {
    prefetch_head_rows<T>(q, nb, nh, L, E);
    prefetch_head_rows<T>(k, nb, nh, S, E);
    prefetch_head_rows<T>(v, nb, nh, S, Ev);
  }
  load_rows_transposed(base<T>(k, b, h), k.sr, S, E, kt, S, tmp);
  // Values already in the accumulation type are read in place (rows v.sr apart).
  const A* vrows = vf;
  int64_t ldv = Ev;
  if constexpr (std::is_same_v<T, A>) {
    vrows = base<T>(v, b, h);
    ldv = v.sr;
  } else {
    load_rows(base<T>(v, b, h), v.sr, S, Ev, vf);
  }
  const T* qp = base<T>(q, b, h);
  T* op = base<T>(o, b, h);
  for (int64_t i0 = 0; i0 < L; i0 += kBq) {
    const int64_t m = std::min(kBq, L - i0);
    const int64_t kend = p.causal ? std::min(S, i0 + m) : S;
    load_rows(qp + i0 * q.sr, q.sr, m, E, qs, static_cast<A>(p.scale));
    std::fill(mx, mx + m, -std::numeric_limits<A>::infinity());
    std::fill(sum, sum + m, A(0));
    std::fill(acc, acc + m * Ev, A(0));
    for (int64_t j0 = 0; j0 < kend; j0 += kBk) {
      const int64_t bk = std::min(kBk, kend - j0);
      tile_gemm(m, bk, E, qs, E, 1, kt + j0, S, tile, kBk, false);
      for (int64_t r = 0; r < m; ++r) {
        A* tr = tile + r * kBk;
        const int64_t visible = visible_keys(p.causal, i0, r, j0, bk);
        const A mnew = nan_max(mx[r], row_max(tr, visible));
        // exp(-inf) = 0 on a row's first block; NaN for a row of -inf scores, as softmax.
        const A alpha = std::exp(mx[r] - mnew);
        sum[r] = sum[r] * alpha + visible_exp_sum(tr, mnew, visible, bk);
        if (alpha != A(1)) {
          A* ar = acc + r * Ev;
#pragma omp simd
          for (int64_t c = 0; c < Ev; ++c) ar[c] *= alpha;
        }
        mx[r] = mnew;
      }
      tile_gemm(m, Ev, bk, tile, kBk, 1, vrows + j0 * ldv, ldv, acc, Ev, true);
    }
    for (int64_t r = 0; r < m; ++r) {
      const A inv = A(1) / sum[r];
      A* ar = acc + r * Ev;
      if constexpr (std::is_same_v<T, A>) {
        T* out = op + (i0 + r) * o.sr;
#pragma omp simd
        for (int64_t c = 0; c < Ev; ++c) out[c] = ar[c] * inv;
      } else {
#pragma omp simd
        for (int64_t c = 0; c < Ev; ++c) ar[c] *= inv;
        narrow(ar, op + (i0 + r) * o.sr, Ev);
      }
      lse[i0 + r] = mx[r] + std::log(sum[r]);
    }
  }
}

template <typename A>
int64_t backward_scratch(const AttnProblem& p) {
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  return 2 * L * E + 3 * S * E + 2 * S * Ev + L * Ev + L + 2 * kBq * kBk +
         kTransposeRows * std::max(E, Ev);
}

template <typename T>
void backward_one(const AttnProblem& p, int64_t b, int64_t h, const AttnOperand& q,
                  const AttnOperand& k, const AttnOperand& v, const AttnOperand& o,
                  const AttnOperand& dout, const acc_t<T>* lse, const AttnOperand& dq,
                  const AttnOperand& dk, const AttnOperand& dv, acc_t<T>* scratch) {
  using A = acc_t<T>;
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  A* qs = scratch;              // (L, E): q * scale, as forward
  A* kf = qs + L * E;           // (S, E)
  A* kt = kf + S * E;           // (E, S)
  A* vt = kt + E * S;           // (Ev, S)
  A* dof = vt + Ev * S;         // (L, Ev)
  A* dsum = dof + L * Ev;       // (L): rowsum(dO * O)
  A* gq = dsum + L;             // (L, E)
  A* gk = gq + L * E;           // (S, E)
  A* gv = gk + S * E;           // (S, Ev)
  A* tile = gv + S * Ev;        // (kBq, kBk): weights P
  A* dtile = tile + kBq * kBk;  // (kBq, kBk): dP, then dS
  A* tmp = dtile + kBq * kBk;
  if (int64_t nb, nh; next_head(p, b, h, &nb, &nh)) {
    prefetch_head_rows<T>(q, nb, nh, L, E);
    prefetch_head_rows<T>(k, nb, nh, S, E);
    prefetch_head_rows<T>(v, nb, nh, S, Ev);
    prefetch_head_rows<T>(o, nb, nh, L, Ev);
    prefetch_head_rows<T>(dout, nb, nh, L, Ev);
  }
  load_rows(base<T>(q, b, h), q.sr, L, E, qs, static_cast<A>(p.scale));
  load_rows(base<T>(k, b, h), k.sr, S, E, kf);
  load_rows_transposed(base<T>(k, b, h), k.sr, S, E, kt, S, tmp);
  load_rows_transposed(base<T>(v, b, h), v.sr, S, Ev, vt, S, tmp);
  load_rows(base<T>(dout, b, h), dout.sr, L, Ev, dof);
  const T* op = base<T>(o, b, h);
  for (int64_t i = 0; i < L; ++i) {
    widen(op + i * o.sr, tmp, Ev);
    A s = 0;
    for (int64_t c = 0; c < Ev; ++c) s += dof[i * Ev + c] * tmp[c];
    dsum[i] = s;
  }
  std::fill(gq, gq + L * E + S * E + S * Ev, A(0));
  for (int64_t i0 = 0; i0 < L; i0 += kBq) {
    const int64_t m = std::min(kBq, L - i0);
    const int64_t kend = p.causal ? std::min(S, i0 + m) : S;
    for (int64_t j0 = 0; j0 < kend; j0 += kBk) {
      const int64_t bk = std::min(kBk, kend - j0);
      tile_gemm(m, bk, E, qs + i0 * E, E, 1, kt + j0, S, tile, kBk, false);
      for (int64_t r = 0; r < m; ++r)
        visible_exp_sum(tile + r * kBk, lse[i0 + r], visible_keys(p.causal, i0, r, j0, bk), bk);
      // dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ += dS K, dK += dS^T (q scale).
      tile_gemm(bk, Ev, m, tile, 1, kBk, dof + i0 * Ev, Ev, gv + j0 * Ev, Ev, true);
      tile_gemm(m, bk, Ev, dof + i0 * Ev, Ev, 1, vt + j0, S, dtile, kBk, false);
      for (int64_t r = 0; r < m; ++r) {
        const A d = dsum[i0 + r];
        A* pr = tile + r * kBk;
        A* dr = dtile + r * kBk;
#pragma omp simd
        for (int64_t c = 0; c < bk; ++c) dr[c] = pr[c] * (dr[c] - d);
      }
      tile_gemm(m, E, bk, dtile, kBk, 1, kf + j0 * E, E, gq + i0 * E, E, true);
      tile_gemm(bk, E, m, dtile, 1, kBk, qs + i0 * E, E, gk + j0 * E, E, true);
    }
  }
  const A scale = static_cast<A>(p.scale);
  T* dqp = base<T>(dq, b, h);
  for (int64_t i = 0; i < L; ++i) {
    A* g = gq + i * E;
#pragma omp simd
    for (int64_t c = 0; c < E; ++c) g[c] *= scale;
    narrow(g, dqp + i * dq.sr, E);
  }
  T* dkp = base<T>(dk, b, h);
  T* dvp = base<T>(dv, b, h);
  for (int64_t j = 0; j < S; ++j) {
    narrow(gk + j * E, dkp + j * dk.sr, E);
    narrow(gv + j * Ev, dvp + j * dv.sr, Ev);
  }
}

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_num() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// Runs fn(b, h, scratch) for every (batch, head), statically split over threads, each thread
// with its own slice of one scratch tensor (allocated here, outside the parallel region, so
// running out of memory is an error rather than an abort, and the counting allocator sees it).
template <typename A, typename F>
void for_each_head(const AttnProblem& p, int64_t per_thread, F&& fn) {
  const int64_t n = p.batch * p.heads;
  const int threads = static_cast<int>(std::min<int64_t>(max_threads(), n));
  Tensor scratch = empty({threads * per_thread}, dtype_of<A>());
  A* s = scratch.data<A>();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t bh = 0; bh < n; ++bh) fn(bh / p.heads, bh % p.heads, s + thread_num() * per_thread);
}

}  // namespace

void flash_attention_forward(const AttnProblem& p, AttnOperand q, AttnOperand k, AttnOperand v,
                             AttnOperand o, void* lse) {
  dispatch_floating(p.dtype, "scaled_dot_product_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    A* l = static_cast<A*>(lse);
    for_each_head<A>(p, forward_scratch<A>(p), [&](int64_t b, int64_t h, A* scratch) {
      A* row_lse = l + (b * p.heads + h) * p.L;
      if constexpr (std::is_same_v<A, float>) {
        if (p.L == 1) return forward_one_row<T>(p, b, h, q, k, v, o, row_lse, scratch);
      }
      forward_one<T>(p, b, h, q, k, v, o, row_lse, scratch);
    });
  });
}

void flash_attention_backward(const AttnProblem& p, AttnOperand q, AttnOperand k, AttnOperand v,
                              AttnOperand o, AttnOperand dout, const void* lse, AttnOperand dq,
                              AttnOperand dk, AttnOperand dv) {
  dispatch_floating(p.dtype, "scaled_dot_product_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const A* l = static_cast<const A*>(lse);
    for_each_head<A>(p, backward_scratch<A>(p), [&](int64_t b, int64_t h, A* scratch) {
      backward_one<T>(p, b, h, q, k, v, o, dout, l + (b * p.heads + h) * p.L, dq, dk, dv, scratch);
    });
  });
}

}  // namespace mantissa::kernels
