// AVX-512F, 16 lanes level of the vector math. Compiled for the baseline target with the ISA
// enabled by pragma below (after every standard header, so no inline library code is built for it);
// vec_math.cpp calls it only when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/elementwise/vec_math.h"

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace mantissa::kernels::vm {
namespace {

using V = float __attribute__((vector_size(16 * 4)));
using VI = int32_t __attribute__((vector_size(16 * 4)));
constexpr int kW = 16;
inline VI as_i(V v) { return reinterpret_cast<VI>(v); }
inline V as_f(VI v) { return reinterpret_cast<V>(v); }
inline V to_f(VI v) { return __builtin_convertvector(v, V); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline bool all_lanes(VI m) {
  return _mm512_cmpneq_epi32_mask(reinterpret_cast<__m512i>(m), _mm512_setzero_si512()) == 0xffff;
}

// Masked loads, stores and moves for a row's tail (no buffer; on AVX-512 they are plain
// instructions).
#define MANTISSA_VM_LEVEL_LOAD_TAIL
#define MANTISSA_VM_LEVEL_STORE_TAIL
inline __mmask16 tail_mask(int64_t m) { return static_cast<__mmask16>((1u << m) - 1); }
inline V load_tail(const float* p, int64_t m, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(m), p);
}
inline void store_tail(float* p, V v, int64_t m) { _mm512_mask_storeu_ps(p, tail_mask(m), v); }
#define MANTISSA_VM_LEVEL_ZERO_TAIL
inline V zero_tail(V v, int64_t m) { return _mm512_maskz_mov_ps(tail_mask(m), v); }
// MAXPS/MINPS return their second operand when either is NaN: max(lo, x) is x < lo ? lo : x.
#define MANTISSA_VM_LEVEL_CLAMP
inline V clamp_keep_nan(V x, float lo, float hi) {
  return _mm512_max_ps(_mm512_set1_ps(lo), _mm512_min_ps(_mm512_set1_ps(hi), x));
}

#include "kernels/cpu/elementwise/vec_math_impl.h"

}  // namespace

const VecMathTable kVecMathAvx512 = kTable;

}  // namespace mantissa::kernels::vm

#pragma GCC pop_options
