#include "train/parameter_range.h"

#include <cmath>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::train {

ParameterRange parameter_range(const nn::Module& module) {
  NoGradGuard no_grad;
  ParameterRange r;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.dtype().is_floating_point() || p.numel() == 0) continue;
    // The max of |p| is NaN when p holds a NaN and inf when it holds an inf.
    const double m = max(abs(p.detach())).to(kFloat64).item();
    if (!std::isfinite(m)) {
      if (r.non_finite_name.empty()) {
        r.non_finite_name = name;
        r.non_finite_value = m;
      }
    } else if (m > r.largest) {
      r.largest = m;
      r.largest_name = name;
    }
  }
  return r;
}

}  // namespace mantissa::train
