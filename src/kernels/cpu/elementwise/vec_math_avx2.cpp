// AVX2 + FMA, 8 lanes level of the vector math. Compiled for the baseline target with the ISA
// enabled by pragma below (after every standard header, so no inline library code is built for it);
// vec_math.cpp calls it only when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/elementwise/vec_math.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace mantissa::kernels::vm {
namespace {

using V = float __attribute__((vector_size(8 * 4)));
using VI = int32_t __attribute__((vector_size(8 * 4)));
constexpr int kW = 8;
inline VI as_i(V v) { return reinterpret_cast<VI>(v); }
inline V as_f(VI v) { return reinterpret_cast<V>(v); }
inline V to_f(VI v) { return __builtin_convertvector(v, V); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline bool all_lanes(VI m) { return _mm256_movemask_ps(reinterpret_cast<__m256>(m)) == 0xff; }

// Short rows (vec_math_impl.h): a masked load (masked-off lanes never fault; the generic store
// stays: VMASKMOVPS stores are microcoded on Zen 3, ~30% of exp_shift_sum over the ViT's
// 17-wide rows when tried). The 16 partial sums' tree (s[j] += s[j + w], w = 8, 4, 2, 1) runs
// in vector adds, each adding the same two partial sums as the generic version; the
// NaN-propagating max of the lanes too, without branches.
#define MANTISSA_VM_LEVEL_LOAD_TAIL
#define MANTISSA_VM_LEVEL_SUM16
#define MANTISSA_VM_LEVEL_MAX_LANES
inline __m256i tail_mask(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(m)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline V load_tail(const float* p, int64_t m, float fill) {
  const __m256i mask = tail_mask(m);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask),
                          _mm256_castsi256_ps(mask));
}
// Lanes of b where b > a or b is NaN, else a's: a NaN in either stays.
inline __m128 max_nan_lanes(__m128 a, __m128 b) {
  const __m128 take = _mm_or_ps(_mm_cmpgt_ps(b, a), _mm_cmpunord_ps(b, b));
  return _mm_blendv_ps(a, b, take);
}
inline float max_lanes(V m) {
  __m128 x = max_nan_lanes(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  x = max_nan_lanes(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(max_nan_lanes(x, _mm_movehdup_ps(x)));
}
// Stores of 4, 2 and 1 lanes (no buffer, no memcpy call: one row's tail is a large part of
// a 17-wide row's time).
#define MANTISSA_VM_LEVEL_STORE_TAIL
inline void store_tail(float* p, V v, int64_t m) {
  __m128 lo = _mm256_castps256_ps128(v);
  if (m >= 4) {
    _mm_storeu_ps(p, lo);
    lo = _mm256_extractf128_ps(v, 1);
    p += 4;
    m -= 4;
  }
  if (m >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), lo);
    lo = _mm_movehl_ps(lo, lo);
    p += 2;
    m -= 2;
  }
  if (m >= 1) _mm_store_ss(p, lo);
}
#define MANTISSA_VM_LEVEL_ZERO_TAIL
inline V zero_tail(V v, int64_t m) { return _mm256_and_ps(v, _mm256_castsi256_ps(tail_mask(m))); }
// MAXPS/MINPS return their second operand when either is NaN: max(lo, x) is x < lo ? lo : x.
#define MANTISSA_VM_LEVEL_CLAMP
inline V clamp_keep_nan(V x, float lo, float hi) {
  return _mm256_max_ps(_mm256_set1_ps(lo), _mm256_min_ps(_mm256_set1_ps(hi), x));
}
inline float sum16(const V* acc) {
  const __m256 s8 = _mm256_add_ps(acc[0], acc[1]);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

#include "kernels/cpu/elementwise/vec_math_impl.h"

}  // namespace

const VecMathTable kVecMathAvx2 = kTable;

}  // namespace mantissa::kernels::vm

#pragma GCC pop_options
