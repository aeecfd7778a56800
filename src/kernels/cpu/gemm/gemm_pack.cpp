// Packing for the native GEMM: copies a panel of A (kMR rows) or B (kNR columns) from any
// strides into the kernel's contiguous, zero-padded layout (gemm_native_impl.h). The layouts
// matmul and Linear produce (row-major or transposed operands) take vector paths: plain row
// copies, 16x16 transposes of 32-bit elements, or the interleave of two bf16 rows into VNNI
// pairs. Other strides fall back to element-wise copies.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm/gemm_native_impl.h"
#include "kernels/cpu/gemm/gemm_pack_avx512.h"

namespace mantissa::kernels::gemm {
namespace {

// Panel element (p, k), p < W (the panel's row of A or column of B), of the f32 layout [K][W]
// or the bf16 layout [K/2][W][2].
template <int W, bool kPairs>
constexpr int64_t slot(int p, int64_t k) {
  return kPairs ? (k >> 1) * 2 * W + 2 * p + (k & 1) : k * W + p;
}

template <int W, bool kPairs, typename T>
void zero_padding(int count, int64_t K, T* dst) {
  const int64_t Kp = kPairs ? (K + 1) / 2 * 2 : K;
  if (count < W || Kp != K) std::memset(dst, 0, sizeof(T) * static_cast<size_t>(Kp) * W);
}

// dst(p, k) = src[p * ps + k * ks] for p < count, element by element.
template <int W, bool kPairs, typename T>
void pack_any(const T* src, int64_t ps, int64_t ks, int count, int64_t K, T* dst) {
  for (int64_t k = 0; k < K; ++k)
    for (int p = 0; p < count; ++p) dst[slot<W, kPairs>(p, k)] = src[p * ps + k * ks];
}

// dst(p, k) = src[p * ps + k] for 32-bit elements (f32 values or bf16 pairs): transposed in
// 16x16 blocks.
template <int W>
void pack_transposed(const uint32_t* src, int64_t ps, int count, int64_t K, uint32_t* dst) {
  for (int p0 = 0; p0 < count; p0 += 16)
    for (int64_t k0 = 0; k0 < K; k0 += 16)
      transpose32_avx512(src + p0 * ps + k0, ps, std::min(16, count - p0),
                         static_cast<int>(std::min<int64_t>(16, K - k0)), dst + k0 * W + p0, W);
}

// f32: dst(p, k) = src[p * ps + k * ks].
template <int W>
void pack_f32(const float* src, int64_t ps, int64_t ks, int count, int64_t K, float* dst) {
  zero_padding<W, false>(count, K, dst);
  if (ps == 1) {
    for (int64_t k = 0; k < K; ++k) std::memcpy(dst + k * W, src + k * ks, sizeof(float) * count);
  } else if (ks == 1) {
    pack_transposed<W>(reinterpret_cast<const uint32_t*>(src), ps, count, K,
                       reinterpret_cast<uint32_t*>(dst));
  } else {
    pack_any<W, false>(src, ps, ks, count, K, dst);
  }
}

// bf16: dst(p, k) = src[p * ps + k * ks] in k-pairs.
template <int W>
void pack_bf16(const uint16_t* src, int64_t ps, int64_t ks, int count, int64_t K, uint16_t* dst) {
  zero_padding<W, true>(count, K, dst);
  if (ps == 1) {
    // Rows k and k+1 are contiguous along p: interleave them.
    for (int64_t k = 0; k < K; k += 2)
      interleave_bf16_avx512(src + k * ks, k + 1 < K ? src + (k + 1) * ks : nullptr, count,
                             dst + k * W);
  } else if (ks == 1 && ps % 2 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0) {
    // Each (k, k+1) pair is one aligned 32-bit word: transpose words; an odd K's last element
    // pairs with the zero padding.
    const int64_t pairs = K / 2;
    pack_transposed<W>(reinterpret_cast<const uint32_t*>(src), ps / 2, count, pairs,
                       reinterpret_cast<uint32_t*>(dst));
    if (K % 2 == 1)
      for (int p = 0; p < count; ++p) dst[slot<W, true>(p, K - 1)] = src[p * ps + K - 1];
  } else {
    pack_any<W, true>(src, ps, ks, count, K, dst);
  }
}

}  // namespace

void pack_a_f32(const float* a, int64_t rs, int64_t cs, int rows, int64_t K, float* dst) {
  pack_f32<kMR>(a, rs, cs, rows, K, dst);
}
void pack_b_f32(const float* b, int64_t rs, int64_t cs, int cols, int64_t K, float* dst) {
  pack_f32<kNR>(b, cs, rs, cols, K, dst);
}
void pack_a_bf16(const uint16_t* a, int64_t rs, int64_t cs, int rows, int64_t K, uint16_t* dst) {
  pack_bf16<kMR>(a, rs, cs, rows, K, dst);
}
void pack_b_bf16(const uint16_t* b, int64_t rs, int64_t cs, int cols, int64_t K, uint16_t* dst) {
  pack_bf16<kNR>(b, cs, rs, cols, K, dst);
}

}  // namespace mantissa::kernels::gemm
