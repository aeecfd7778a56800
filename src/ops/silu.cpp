// SiLU composed of differentiable ops, so its gradient, sigmoid(x) (1 + x (1 - sigmoid(x))),
// comes from the graph of the product and the sigmoid.
#include "mantissa/ops/silu.h"

#include "amp/autocast_dispatch.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {

Tensor silu(const Tensor& a) {
  MANTISSA_AUTOCAST("silu", silu, a);
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), "silu",
                 "silu needs a floating tensor (fp16, bf16, fp32, fp64), got {}", a.dtype().name());
  if (a.dtype() == kFloat32 || a.dtype() == kFloat64) return mul(a, sigmoid(a));
  const Tensor wide = a.to(kFloat32);
  return mul(wide, sigmoid(wide)).to(a.dtype());
}

}  // namespace mantissa
