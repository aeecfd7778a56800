// Adam/AdamW span kernels, SSE2 (16 bytes) level. Part of every x86-64, so always available.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/optim/adam_kernels.h"
#include "mantissa/core/bfloat16.h"

namespace mantissa::optim::detail {
namespace {

constexpr int kVectorBytes = 16;  // the register width
using F = float __attribute__((vector_size(kVectorBytes)));
using D = double __attribute__((vector_size(kVectorBytes)));
inline F sqrt_of(F x) { return reinterpret_cast<F>(_mm_sqrt_ps(reinterpret_cast<__m128>(x))); }
inline D sqrt_of(D x) { return reinterpret_cast<D>(_mm_sqrt_pd(reinterpret_cast<__m128d>(x))); }

#include "kernels/cpu/optim/adam_span_impl.h"

}  // namespace

template <typename A>
AdamSpanFn<A> adam_span_baseline(bool l2, bool amsgrad) {
  return adam_span_for<A>(l2, amsgrad);
}
template AdamSpanFn<float> adam_span_baseline<float>(bool, bool);
template AdamSpanFn<double> adam_span_baseline<double>(bool, bool);

}  // namespace mantissa::optim::detail
