// where(condition, a, b): elementwise selection with three-way broadcasting. The gradient of
// each branch is the upstream gradient where that branch was chosen, zero elsewhere.
#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {

using kernels::as_dtype;

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  MANTISSA_AUTOCAST("where", where, condition, a, b);
  MANTISSA_CHECK(condition.dtype().is_bool(), "where",
                 "condition must be a bool tensor, got {} (compare first, e.g. gt(x, 0))",
                 condition.dtype().name());
  const DType dt = result_type(a, b);
  const Shape shape =
      broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  const Tensor c = condition.detach();
  Tensor out;
  if (kernels::gpu::any_cuda({&condition, &a, &b})) {
    out = kernels::gpu_kernels().map("where", kernels::EwOp::kWhere, {c, a, b}, dt, dt, 0, 0,
                                     nullptr);
  } else {
    const Tensor x = as_dtype(a, dt);
    const Tensor y = as_dtype(b, dt);
    out = empty(shape, dt);
    kernels::dispatch_arith(dt, "where", [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::pointwise<T, bool, T, T>(out, {c, x, y},
                                        [](bool s, auto p, auto q) { return s ? p : q; });
    });
  }
  if (!autograd::needs_grad(a, b)) return out;
  // The backward reads the condition only (not a or b).
  return autograd::record(out, {a, b}, {c}, "WhereBackward",
                          [c, sa = a.shape(), sb = b.shape(), na = a.requires_grad(),
                           nb = b.requires_grad()](const Tensor& g) {
                            Tensor ga = na ? sum_to(where(c, g, 0.0), sa) : Tensor();
                            Tensor gb = nb ? sum_to(where(c, 0.0, g), sb) : Tensor();
                            return std::vector<Tensor>{ga, gb};
                          });
}

Tensor where(const Tensor& condition, const Tensor& a, double b) {
  return where(condition, a, scalar_tensor(b, kernels::scalar_result_type(a.dtype(), b)));
}

Tensor where(const Tensor& condition, double a, const Tensor& b) {
  return where(condition, scalar_tensor(a, kernels::scalar_result_type(b.dtype(), a)), b);
}

}  // namespace mantissa
