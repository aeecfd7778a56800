// SiLU, x * sigmoid(x), in one pass each way: the forward and its derivative
// s (1 + x (1 - s)) run as the vector kernels of kernels/cpu/elementwise/vec_math.h (fp16 and
// bf16 widened to fp32 block by block), so no sigmoid or fp32 copy of the input is stored.
#include "mantissa/ops/silu.h"

#include <cmath>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"

namespace mantissa {

using kernels::EwOp;

Tensor silu(const Tensor& a) {
  MANTISSA_PROFILE_OP("activation");
  MANTISSA_AUTOCAST("silu", silu, a);
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), "silu",
                 "silu needs a floating tensor (fp16, bf16, fp32, fp64), got {}", a.dtype().name());
  Tensor out = kernels::float_map("silu", EwOp::kSilu, a,
                                  kernels::vec_unary(
                                      [](auto x) {
                                        using A = decltype(x);
                                        return x * (A(1) / (A(1) + std::exp(-x)));
                                      },
                                      &kernels::vm::silu_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "SiluBackward", [x = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{kernels::grad_map(EwOp::kSiluBackward, g, x,
                                                 kernels::vec_binary(
                                                     [](auto gv, auto xv) {
                                                       using A = decltype(gv);
                                                       const A s = A(1) / (A(1) + std::exp(-xv));
                                                       return gv * (s * (A(1) + xv * (A(1) - s)));
                                                     },
                                                     &kernels::vm::silu_backward_f32))};
  });
}

}  // namespace mantissa
