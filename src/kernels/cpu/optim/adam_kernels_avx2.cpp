// Adam/AdamW span kernels, AVX2 (32 bytes) level. Compiled for the baseline target with the ISA
// enabled by pragma after every header; called only when cpu_features() has avx2.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/optim/adam_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2")

namespace mantissa::optim::detail {
namespace {

constexpr int kVectorBytes = 32;  // the register width
using F = float __attribute__((vector_size(kVectorBytes)));
using D = double __attribute__((vector_size(kVectorBytes)));
inline F sqrt_of(F x) { return reinterpret_cast<F>(_mm256_sqrt_ps(reinterpret_cast<__m256>(x))); }
inline D sqrt_of(D x) { return reinterpret_cast<D>(_mm256_sqrt_pd(reinterpret_cast<__m256d>(x))); }

#include "kernels/cpu/optim/adam_span_impl.h"

}  // namespace

template <typename A>
AdamSpanFn<A> adam_span_avx2(bool l2, bool amsgrad) {
  return adam_span_for<A>(l2, amsgrad);
}
template AdamSpanFn<float> adam_span_avx2<float>(bool, bool);
template AdamSpanFn<double> adam_span_avx2<double>(bool, bool);

}  // namespace mantissa::optim::detail

#pragma GCC pop_options
