#include "optim/adam_kernels.h"

#include "mantissa/core/cpu_features.h"

namespace mantissa::optim::detail {

AdamSimd best_adam_simd() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f ? AdamSimd::kAvx512 : f.avx2 ? AdamSimd::kAvx2 : AdamSimd::kBaseline;
}

template <typename A>
AdamSpanFn<A> adam_span_kernel(AdamSimd level, bool l2, bool amsgrad) {
  const CpuFeatures& f = cpu_features();
  switch (level) {
    case AdamSimd::kAvx512:
      return f.avx512f ? adam_span_avx512<A>(l2, amsgrad) : nullptr;
    case AdamSimd::kAvx2:
      return f.avx2 ? adam_span_avx2<A>(l2, amsgrad) : nullptr;
    case AdamSimd::kBaseline:
      break;
  }
  return adam_span_baseline<A>(l2, amsgrad);
}

template AdamSpanFn<float> adam_span_kernel<float>(AdamSimd, bool, bool);
template AdamSpanFn<double> adam_span_kernel<double>(AdamSimd, bool, bool);

}  // namespace mantissa::optim::detail
