// Packing for the native GEMM: copies a panel of A (kMR rows) or B (kNR columns) from any
// strides into the kernel's contiguous, zero-padded layout (gemm_native_impl.h). Loops are
// ordered so the unit-stride side of the source is read sequentially.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_native_impl.h"

namespace mantissa::kernels::gemm {
namespace {

// Panel element (p, k), p < width (the panel's row of A or column of B), of the f32 layout
// [K][W] or the bf16 layout [K/2][W][2].
template <int W, bool kPairs>
constexpr int64_t slot(int p, int64_t k) {
  return kPairs ? (k >> 1) * 2 * W + 2 * p + (k & 1) : k * W + p;
}

// dst(p, k) = src[p * ps + k * ks] for p < count, zero for count <= p < W and for the odd K
// of a bf16 panel.
template <int W, bool kPairs, typename T>
void pack_panel(const T* src, int64_t ps, int64_t ks, int count, int64_t K, T* dst) {
  const int64_t Kp = kPairs ? (K + 1) / 2 * 2 : K;
  if (count < W || Kp != K) std::memset(dst, 0, sizeof(T) * static_cast<size_t>(Kp) * W);
  if (ks == 1) {
    for (int p = 0; p < count; ++p) {
      const T* s = src + p * ps;
      for (int64_t k = 0; k < K; ++k) dst[slot<W, kPairs>(p, k)] = s[k];
    }
  } else {
    for (int64_t k = 0; k < K; ++k) {
      const T* s = src + k * ks;
      for (int p = 0; p < count; ++p) dst[slot<W, kPairs>(p, k)] = s[p * ps];
    }
  }
}

}  // namespace

void pack_a_f32(const float* a, int64_t rs, int64_t cs, int rows, int64_t K, float* dst) {
  pack_panel<kMR, false>(a, rs, cs, rows, K, dst);
}
void pack_b_f32(const float* b, int64_t rs, int64_t cs, int cols, int64_t K, float* dst) {
  pack_panel<kNR, false>(b, cs, rs, cols, K, dst);
}
void pack_a_bf16(const uint16_t* a, int64_t rs, int64_t cs, int rows, int64_t K, uint16_t* dst) {
  pack_panel<kMR, true>(a, rs, cs, rows, K, dst);
}
void pack_b_bf16(const uint16_t* b, int64_t rs, int64_t cs, int cols, int64_t K, uint16_t* dst) {
  pack_panel<kNR, true>(b, cs, rs, cols, K, dst);
}

}  // namespace mantissa::kernels::gemm
