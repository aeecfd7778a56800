#include "kernels/cpu/optim/adam_kernels.h"

namespace mantissa::optim::detail {

template <typename A>
AdamSpanFn<A> adam_span_kernel(SimdLevel level, bool l2, bool amsgrad) {
  if (level > simd_level()) return nullptr;
  switch (level) {
    case SimdLevel::kAvx512:
    case SimdLevel::kAvx512Bf16:
      return adam_span_avx512<A>(l2, amsgrad);
    case SimdLevel::kAvx2:
      return adam_span_avx2<A>(l2, amsgrad);
    case SimdLevel::kScalar:
      break;
  }
  return adam_span_baseline<A>(l2, amsgrad);
}

template AdamSpanFn<float> adam_span_kernel<float>(SimdLevel, bool, bool);
template AdamSpanFn<double> adam_span_kernel<double>(SimdLevel, bool, bool);

AdamSpanBf16Fn adam_span_bf16_kernel(SimdLevel level, bool l2, bool amsgrad) {
  if (level > simd_level() || level < SimdLevel::kAvx2) return nullptr;
  if (level == SimdLevel::kAvx2) return adam_span_bf16_avx2(l2, amsgrad);
  return adam_span_bf16_avx512(l2, amsgrad, level >= SimdLevel::kAvx512Bf16);
}

}  // namespace mantissa::optim::detail
