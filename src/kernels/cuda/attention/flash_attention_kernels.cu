// FlashAttention-2 forward and backward on the tensor cores (flash_attention_kernels.h).
//
// Every block has 4 warps; each warp owns 16 rows of the block's 64 (queries in the forward and
// dQ kernels, keys in the dK/dV kernel) and walks tiles of the other side through shared memory.
// Products are mma.sync.m16n8k16 (16-bit operands, fp32 accumulators), whose register layouts
// are fixed by the PTX ISA: with g = lane / 4 and t = lane % 4,
//   A (16 x 16, row-major): reg 0 = (row g, cols 2t, 2t+1), reg 1 = (row g+8, same cols),
//                           reg 2 = (row g, cols 2t+8, 2t+9), reg 3 = (row g+8, cols 2t+8, 2t+9);
//   B (16 x 8, by column):  reg 0 = (rows 2t, 2t+1, col g), reg 1 = (rows 2t+8, 2t+9, col g);
//   C (16 x 8, fp32):       c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, same cols).
// So an accumulator tile of scores is, pair for pair, the A operand of the next product (the
// weights P times V needs no trip through shared memory), and a B operand is two adjacent
// elements of one shared-memory row: K for q k^T, transposed copies where the product runs
// along the rows instead (V^T for P V, and so on). Shared rows are padded by 8 elements, which
// spreads a warp's 32 reads of one B fragment over 32 different banks.
//
// Scores are kept in the base-2 domain (scale * log2(e) folded in once), so each weight is one
// exp2f. Rows past L and keys past S are read as zeros and never written; masked weights are 0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/attention/flash_attention_kernels.h"
#include "kernels/cuda/common/device_util.cuh"

namespace mantissa::cuda::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // the rows a block owns
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// The tile of the walked side: 64 rows, 32 when the width is 128 (to stay in 48 KB of static
// shared memory and in registers).
template <int kD>
constexpr int walk_rows() {
  return kD == 128 ? 32 : 64;
}

template <typename T>
__device__ __forceinline__ float to_f(T x) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(x);
  else
    return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(x);
  else
    return __float2bfloat16_rn(x);
}

// Two values rounded to T, lo in the low half (the lower column of an A/B operand pair).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// c += a * b for one 16 x 8 x 16 tile.
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two adjacent 16-bit elements of shared memory (an even offset).
template <typename T>
__device__ __forceinline__ uint32_t ld_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// The pair (row, col), (row, col + 1) of an operand from global memory, zeros outside rows x E.
// kVec: E % 8 == 0 and every stride and base 16-byte aligned (so col < E means col + 1 < E).
template <typename T, bool kVec>
__device__ __forceinline__ uint32_t ld_pair_global(const T* base, int64_t sr, int64_t row,
                                                   int64_t rows, int col, int E) {
  if (row >= rows) return 0;
  const T* p = base + row * sr + col;
  if constexpr (kVec) {
    return col < E ? *reinterpret_cast<const uint32_t*>(p) : 0u;
  } else {
    return pack2<T>(col < E ? to_f(p[0]) : 0.f, col + 1 < E ? to_f(p[1]) : 0.f);
  }
}

// The A fragments of this warp's 16 rows (r0 .. r0 + 15) over the whole width.
template <typename T, int kD, bool kVec>
__device__ __forceinline__ void load_a(uint32_t (&a)[kD / 16][4], const T* base, int64_t sr,
                                       int64_t r0, int64_t rows, int E) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const int c = kk * 16 + 2 * t;
    a[kk][0] = ld_pair_global<T, kVec>(base, sr, r0 + g, rows, c, E);
    a[kk][1] = ld_pair_global<T, kVec>(base, sr, r0 + g + 8, rows, c, E);
    a[kk][2] = ld_pair_global<T, kVec>(base, sr, r0 + g, rows, c + 8, E);
    a[kk][3] = ld_pair_global<T, kVec>(base, sr, r0 + g + 8, rows, c + 8, E);
  }
}

// Rows r0 .. r0 + kN - 1 of an operand (width kD, zeros outside rows x E) into shared memory:
// dst[r * ld + c], or dst[c * ld + r] when kTrans.
template <typename T, int kN, int kD, bool kVec, bool kTrans>
__device__ __forceinline__ void load_tile(T* dst, int ld, const T* src, int64_t sr, int64_t r0,
                                          int64_t rows, int E) {
  if constexpr (kVec) {
    constexpr int kChunks = kD / 8;  // 16-byte loads of 8 elements
    for (int i = threadIdx.x; i < kN * kChunks; i += kThreads) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < rows && c < E) v = *reinterpret_cast<const uint4*>(src + (r0 + r) * sr + c);
      if constexpr (kTrans) {
        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int j = 0; j < 8; ++j) dst[(c + j) * ld + r] = e[j];
      } else {
        *reinterpret_cast<uint4*>(dst + r * ld + c) = v;
      }
    }
  } else {
    for (int i = threadIdx.x; i < kN * kD; i += kThreads) {
      const int r = i / kD, c = i % kD;
      const T v = (r0 + r < rows && c < E) ? src[(r0 + r) * sr + c] : from_f<T>(0.f);
      dst[kTrans ? c * ld + r : r * ld + c] = v;
    }
  }
}

// c[nt] = a * B^T for kN / 8 column tiles, B's rows read from shared memory (row stride ld):
// scores of this warp's 16 rows against kN rows of the tile.
template <typename T, int kN, int kD>
__device__ __forceinline__ void products(float (&c)[kN / 8][4], const uint32_t (&a)[kD / 16][4],
                                         const T* b, int ld) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt) {
    c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const T* row = b + (nt * 8 + g) * ld + kk * 16 + 2 * t;
      mma<T>(c[nt], a[kk], ld_pair(row), ld_pair(row + 8));
    }
  }
}

// acc += P * B where P (16 x kN) is an accumulator tile (rounded to T here) and B's columns are
// the rows of a transposed shared tile bt (row stride ld): acc covers kD columns.
template <typename T, int kN, int kD>
__device__ __forceinline__ void accumulate(float (&acc)[kD / 8][4], const float (&p)[kN / 8][4],
                                           const T* bt, int ld) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) {
    const uint32_t a[4] = {
        pack2<T>(p[2 * kk][0], p[2 * kk][1]), pack2<T>(p[2 * kk][2], p[2 * kk][3]),
        pack2<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack2<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      const T* row = bt + (dt * 8 + g) * ld + kk * 16 + 2 * t;
      mma<T>(acc[dt], a, ld_pair(row), ld_pair(row + 8));
    }
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// This warp's accumulator rows (r0 + g, r0 + g + 8) times `mult` into an operand, rows < rows
// and columns < E.
template <typename T, int kD>
__device__ __forceinline__ void store_rows(const float (&acc)[kD / 8][4], const float (&mult)[2],
                                           T* base, int64_t sr, int64_t r0, int64_t rows, int E) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = r0 + g + 8 * half;
    if (row >= rows) continue;
    T* out = base + row * sr;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      const int c = dt * 8 + 2 * t;
      if (c < E) out[c] = from_f<T>(acc[dt][2 * half] * mult[half]);
      if (c + 1 < E) out[c + 1] = from_f<T>(acc[dt][2 * half + 1] * mult[half]);
    }
  }
}

template <typename T>
__device__ __forceinline__ const T* head_of(const FlashOperand& o, int64_t b, int64_t h) {
  return static_cast<const T*>(o.data) + b * o.sb + h * o.sh;
}
template <typename T>
__device__ __forceinline__ T* head_out(const FlashOperand& o, int64_t b, int64_t h) {
  return static_cast<T*>(o.data) + b * o.sb + h * o.sh;
}

// ---------------------------------------------------------------------------------------------
// Forward: block (query tile, batch * head). Online softmax over key tiles of 64.

template <typename T, int kD, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(FlashShape p, FlashOperand q, FlashOperand k, FlashOperand v,
                         FlashOperand o, float* lse) {
  constexpr int kN = 64;
  constexpr int kLd = kD + 8, kLdT = kN + 8;
  __shared__ __align__(16) T ks[kN * kLd];
  __shared__ __align__(16) T vt[kD * kLdT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kRows, r0 = m0 + 16 * warp;
  const int E = static_cast<int>(p.E);
  const T* kp = head_of<T>(k, b, h);
  const T* vp = head_of<T>(v, b, h);

  uint32_t qa[kD / 16][4];
  load_a<T, kD, kVec>(qa, head_of<T>(q, b, h), q.sr, r0, p.L, E);
  const int64_t row[2] = {r0 + g, r0 + g + 8};
  const float c2 = static_cast<float>(p.scale) * kLog2e;
  float acc[kD / 8][4];
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  // Causal: keys past the block's last query are masked for all of its rows.
  const int64_t kend = p.causal && m0 + kRows < p.S ? m0 + kRows : p.S;
  for (int64_t j0 = 0; j0 < kend; j0 += kN) {
    load_tile<T, kN, kD, kVec, false>(ks, kLd, kp, k.sr, j0, p.S, E);
    load_tile<T, kN, kD, kVec, true>(vt, kLdT, vp, v.sr, j0, p.S, E);
    __syncthreads();
    float s[kN / 8][4];
    products<T, kN, kD>(s, qa, ks, kLd);
    float mt[2] = {mrow[0], mrow[1]};
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t col = j0 + nt * 8 + 2 * t + (i & 1);
        const bool masked = col >= p.S || (p.causal && col > row[i >> 1]);
        s[nt][i] = masked ? -INFINITY : s[nt][i] * c2;
        mt[i >> 1] = fmaxf(mt[i >> 1], s[nt][i]);
      }
    float alpha[2], base[2], part[2] = {0.f, 0.f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mt[r] = quad_max(mt[r]);
      base[r] = mt[r] == -INFINITY ? 0.f : mt[r];  // a row with every key masked so far
      alpha[r] = exp2f(mrow[r] - base[r]);         // 0 while mrow is -inf
      mrow[r] = mt[r];
    }
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[nt][i] = exp2f(s[nt][i] - base[i >> 1]);
        part[i >> 1] += s[nt][i];
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) lrow[r] = lrow[r] * alpha[r] + part[r];
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[dt][i] *= alpha[i >> 1];
    accumulate<T, kN, kD>(acc, s, vt, kLdT);
    __syncthreads();
  }
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lrow[r] = quad_sum(lrow[r]);
    inv[r] = 1.f / lrow[r];
    if (t == 0 && row[r] < p.L) lse[bh * p.L + row[r]] = (mrow[r] + log2f(lrow[r])) * kLn2;
  }
  store_rows<T, kD>(acc, inv, head_out<T>(o, b, h), o.sr, r0, p.L, E);
}

// ---------------------------------------------------------------------------------------------
// Backward.

// delta[bh * L + i] = sum_c dout[i][c] * o[i][c] (fp32), one warp per row.
template <typename T>
__global__ void flash_delta_kernel(FlashShape p, FlashOperand o, FlashOperand dout, float* delta) {
  const int64_t rows = p.batch * p.heads * p.L;
  const int lane = threadIdx.x & 31;
  for (int64_t r = (global_thread() >> 5); r < rows; r += (grid_threads() >> 5)) {
    const int64_t bh = r / p.L, i = r % p.L, b = bh / p.heads, h = bh % p.heads;
    const T* op = head_of<T>(o, b, h) + i * o.sr;
    const T* gp = head_of<T>(dout, b, h) + i * dout.sr;
    float s = 0.f;
    for (int64_t c = lane; c < p.E; c += 32) s += to_f(op[c]) * to_f(gp[c]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) delta[r] = s;
  }
}

// dq: block (query tile, batch * head), walking key tiles. With the scores' gradient
// dS = P * (dP - delta), dP = dO V^T: dq = scale * dS K.
template <typename T, int kD, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_dq_kernel(FlashShape p, FlashOperand q, FlashOperand k, FlashOperand v, FlashOperand dout,
                    const float* lse, const float* delta, FlashOperand dq) {
  constexpr int kN = walk_rows<kD>();
  constexpr int kLd = kD + 8, kLdT = kN + 8;
  __shared__ __align__(16) T ks[kN * kLd];
  __shared__ __align__(16) T vs[kN * kLd];
  __shared__ __align__(16) T kt[kD * kLdT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kRows, r0 = m0 + 16 * warp;
  const int E = static_cast<int>(p.E);
  const T* kp = head_of<T>(k, b, h);
  const T* vp = head_of<T>(v, b, h);

  uint32_t qa[kD / 16][4], da[kD / 16][4];
  load_a<T, kD, kVec>(qa, head_of<T>(q, b, h), q.sr, r0, p.L, E);
  load_a<T, kD, kVec>(da, head_of<T>(dout, b, h), dout.sr, r0, p.L, E);
  const int64_t row[2] = {r0 + g, r0 + g + 8};
  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l2[r] = row[r] < p.L ? lse[bh * p.L + row[r]] * kLog2e : 0.f;
    dl[r] = row[r] < p.L ? delta[bh * p.L + row[r]] : 0.f;
  }
  const float c2 = static_cast<float>(p.scale) * kLog2e;
  float acc[kD / 8][4];
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
  const int64_t kend = p.causal && m0 + kRows < p.S ? m0 + kRows : p.S;
  for (int64_t j0 = 0; j0 < kend; j0 += kN) {
    load_tile<T, kN, kD, kVec, false>(ks, kLd, kp, k.sr, j0, p.S, E);
    load_tile<T, kN, kD, kVec, false>(vs, kLd, vp, v.sr, j0, p.S, E);
    load_tile<T, kN, kD, kVec, true>(kt, kLdT, kp, k.sr, j0, p.S, E);
    __syncthreads();
    float s[kN / 8][4], dp[kN / 8][4];
    products<T, kN, kD>(s, qa, ks, kLd);
    products<T, kN, kD>(dp, da, vs, kLd);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t col = j0 + nt * 8 + 2 * t + (i & 1);
        const bool masked = col >= p.S || (p.causal && col > row[i >> 1]);
        const float w = masked ? 0.f : exp2f(s[nt][i] * c2 - l2[i >> 1]);
        s[nt][i] = w * (dp[nt][i] - dl[i >> 1]);  // dS
      }
    accumulate<T, kN, kD>(acc, s, kt, kLdT);
    __syncthreads();
  }
  const float mult[2] = {static_cast<float>(p.scale), static_cast<float>(p.scale)};
  store_rows<T, kD>(acc, mult, head_out<T>(dq, b, h), dq.sr, r0, p.L, E);
}

// dk, dv: block (key tile, batch * head), walking query tiles (the transposed problem):
// dv = P^T dO, dk = scale * dS^T Q with dS^T = P^T * (V dO^T - delta).
template <typename T, int kD, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_dkdv_kernel(FlashShape p, FlashOperand q, FlashOperand k, FlashOperand v,
                      FlashOperand dout, const float* lse, const float* delta, FlashOperand dk,
                      FlashOperand dv) {
  constexpr int kN = walk_rows<kD>();
  constexpr int kLd = kD + 8, kLdT = kN + 8;
  __shared__ __align__(16) T qs[kN * kLd];
  __shared__ __align__(16) T gs[kN * kLd];
  __shared__ __align__(16) T qt[kD * kLdT];
  __shared__ __align__(16) T gt[kD * kLdT];
  __shared__ float l2s[kN], dls[kN];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows, r0 = n0 + 16 * warp;
  const int E = static_cast<int>(p.E);
  const T* qp = head_of<T>(q, b, h);
  const T* gp = head_of<T>(dout, b, h);

  uint32_t ka[kD / 16][4], va[kD / 16][4];
  load_a<T, kD, kVec>(ka, head_of<T>(k, b, h), k.sr, r0, p.S, E);
  load_a<T, kD, kVec>(va, head_of<T>(v, b, h), v.sr, r0, p.S, E);
  const int64_t key[2] = {r0 + g, r0 + g + 8};
  const float c2 = static_cast<float>(p.scale) * kLog2e;
  float adk[kD / 8][4], adv[kD / 8][4];
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt)
#pragma unroll
    for (int i = 0; i < 4; ++i) adk[dt][i] = adv[dt][i] = 0.f;
  // Causal: queries before the block's first key see none of its keys.
  const int64_t istart = p.causal ? (n0 / kN) * kN : 0;
  for (int64_t i0 = istart; i0 < p.L; i0 += kN) {
    load_tile<T, kN, kD, kVec, false>(qs, kLd, qp, q.sr, i0, p.L, E);
    load_tile<T, kN, kD, kVec, false>(gs, kLd, gp, dout.sr, i0, p.L, E);
    load_tile<T, kN, kD, kVec, true>(qt, kLdT, qp, q.sr, i0, p.L, E);
    load_tile<T, kN, kD, kVec, true>(gt, kLdT, gp, dout.sr, i0, p.L, E);
    for (int i = threadIdx.x; i < kN; i += kThreads) {
      const bool in = i0 + i < p.L;
      l2s[i] = in ? lse[bh * p.L + i0 + i] * kLog2e : 0.f;
      dls[i] = in ? delta[bh * p.L + i0 + i] : 0.f;
    }
    __syncthreads();
    float st[kN / 8][4], dpt[kN / 8][4];
    products<T, kN, kD>(st, ka, qs, kLd);   // S^T: this warp's keys x the tile's queries
    products<T, kN, kD>(dpt, va, gs, kLd);  // dP^T = V dO^T
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int qc = nt * 8 + 2 * t + (i & 1);
        const int64_t query = i0 + qc;
        const bool masked = query >= p.L || (p.causal && key[i >> 1] > query);
        const float w = masked ? 0.f : exp2f(st[nt][i] * c2 - l2s[qc]);
        st[nt][i] = w;                            // P^T
        dpt[nt][i] = w * (dpt[nt][i] - dls[qc]);  // dS^T
      }
    accumulate<T, kN, kD>(adv, st, gt, kLdT);
    accumulate<T, kN, kD>(adk, dpt, qt, kLdT);
    __syncthreads();
  }
  const float one[2] = {1.f, 1.f};
  const float mult[2] = {static_cast<float>(p.scale), static_cast<float>(p.scale)};
  store_rows<T, kD>(adv, one, head_out<T>(dv, b, h), dv.sr, r0, p.S, E);
  store_rows<T, kD>(adk, mult, head_out<T>(dk, b, h), dk.sr, r0, p.S, E);
}

// ---------------------------------------------------------------------------------------------
// Dispatch: the type, the padded width (32, 64 or 128) and whether 16-byte loads apply.

bool aligned16(const FlashOperand& o) {
  return reinterpret_cast<uintptr_t>(o.data) % 16 == 0 && o.sb % 8 == 0 && o.sh % 8 == 0 &&
         o.sr % 8 == 0;
}

template <typename F>
void with_width(int64_t E, F&& f) {
  if (E <= 32)
    f(std::integral_constant<int, 32>{});
  else if (E <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

template <typename F>
void with_type(Scalar type, F&& f) {
  if (type == Scalar::f16)
    f(__half{});
  else
    f(__nv_bfloat16{});
}

template <typename F>
void with_vec(bool vec, F&& f) {
  if (vec)
    f(std::true_type{});
  else
    f(std::false_type{});
}

dim3 grid_of(const FlashShape& p, int64_t rows) {
  return dim3(static_cast<unsigned>((rows + kRows - 1) / kRows),
              static_cast<unsigned>(p.batch * p.heads));
}

}  // namespace

bool flash_attention_supports(Scalar type, int64_t E) {
  return (type == Scalar::f16 || type == Scalar::bf16) && E > 0 && E <= 128;
}

void launch_flash_attention_forward(Scalar type, const FlashShape& p, FlashOperand q,
                                    FlashOperand k, FlashOperand v, FlashOperand o, float* lse) {
  if (p.batch * p.heads * p.L == 0) return;
  const bool vec = p.E % 8 == 0 && aligned16(q) && aligned16(k) && aligned16(v);
  with_type(type, [&](auto tv) {
    using T = decltype(tv);
    with_width(p.E, [&](auto dv) {
      with_vec(vec, [&](auto vv) {
        flash_forward_kernel<T, decltype(dv)::value, decltype(vv)::value>
            <<<grid_of(p, p.L), kThreads, 0, current_stream()>>>(p, q, k, v, o, lse);
      });
    });
  });
  check_kernel_launch("flash_attention_forward");
}

void launch_flash_attention_backward(Scalar type, const FlashShape& p, FlashOperand q,
                                     FlashOperand k, FlashOperand v, FlashOperand o,
                                     FlashOperand dout, const float* lse, FlashOperand dq,
                                     FlashOperand dk, FlashOperand dv) {
  const int64_t rows = p.batch * p.heads * p.L;
  if (p.batch * p.heads == 0) return;
  int device = 0;
  cudaGetDevice(&device);
  const size_t delta_bytes = static_cast<size_t>(rows > 0 ? rows : 1) * sizeof(float);
  float* delta = static_cast<float*>(allocate(delta_bytes, device));
  const bool vec = p.E % 8 == 0 && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout);
  with_type(type, [&](auto tv) {
    using T = decltype(tv);
    if (rows > 0) {
      flash_delta_kernel<T><<<grid_for(rows * 32), 256, 0, current_stream()>>>(p, o, dout, delta);
      check_kernel_launch("flash_attention_backward (delta)");
    }
    with_width(p.E, [&](auto dw) {
      with_vec(vec, [&](auto vv) {
        if (rows > 0)
          flash_dq_kernel<T, decltype(dw)::value, decltype(vv)::value>
              <<<grid_of(p, p.L), kThreads, 0, current_stream()>>>(p, q, k, v, dout, lse, delta,
                                                                   dq);
        check_kernel_launch("flash_attention_backward (dq)");
        if (p.S > 0)
          flash_dkdv_kernel<T, decltype(dw)::value, decltype(vv)::value>
              <<<grid_of(p, p.S), kThreads, 0, current_stream()>>>(p, q, k, v, dout, lse, delta, dk,
                                                                   dv);
        check_kernel_launch("flash_attention_backward (dk, dv)");
      });
    });
  });
  release(delta, delta_bytes, device);
}

}  // namespace mantissa::cuda::detail
