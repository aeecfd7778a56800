#pragma once
// The Adam/AdamW element update over contiguous spans of float or double, at the widest SIMD
// level this CPU has (AVX-512F, AVX2, else the SSE2 baseline of every x86-64), chosen at run
// time. All levels give bit-identical results (see adam_span_impl.h).
#include <cstdint>

#include "kernels/cpu/optim/adam_coeffs.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::optim::detail {

// Updates p, m, v (and v_max with amsgrad) in place from g, elements [0, n).
template <typename A>
using AdamSpanFn = void (*)(const AdamCoeffs<A>& c, A* p, const A* g, A* m, A* v, A* v_max,
                            int64_t n);

// The span kernel of one level (kScalar: the SSE2 baseline; kAvx512Bf16 runs the AVX-512
// one); nullptr when this CPU (after MANTISSA_DISABLE_SIMD) lacks it. The optimizers use
// adam_span_kernel(simd_level(), ...).
template <typename A>
AdamSpanFn<A> adam_span_kernel(SimdLevel level, bool l2, bool amsgrad);

// The same update for bfloat16 parameters, gradients and moments (the `bf16-true` and
// `transformer-engine` precisions without fp32 master weights): each vector is widened to fp32
// in registers, updated as adam_span<float> does, and rounded back to bf16 (RNE) before it is
// stored -- the bits of widening a block, running the float kernel and narrowing it, in one
// pass. nullptr below AVX2 (the optimizers then go through fp32 blocks); level kAvx512Bf16
// rounds with the AVX-512 BF16 instruction.
using AdamSpanBf16Fn = void (*)(const AdamCoeffs<float>& c, uint16_t* p, const uint16_t* g,
                                uint16_t* m, uint16_t* v, uint16_t* v_max, int64_t n);
AdamSpanBf16Fn adam_span_bf16_kernel(SimdLevel level, bool l2, bool amsgrad);
// native_bf16: round with VCVTNEPS2BF16 (only where the CPU has AVX-512 BF16; the same bits).
AdamSpanBf16Fn adam_span_bf16_avx512(bool l2, bool amsgrad, bool native_bf16);
AdamSpanBf16Fn adam_span_bf16_avx2(bool l2, bool amsgrad);

// Per-level entry points (one translation unit each, adam_kernels_*.cpp).
template <typename A>
AdamSpanFn<A> adam_span_baseline(bool l2, bool amsgrad);
template <typename A>
AdamSpanFn<A> adam_span_avx2(bool l2, bool amsgrad);
template <typename A>
AdamSpanFn<A> adam_span_avx512(bool l2, bool amsgrad);

}  // namespace mantissa::optim::detail
