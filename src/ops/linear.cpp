// linear as one node: the flattened batch makes a single 2-D GEMM with the bias fused into
// oneDNN's epilogue (added to the fp32 accumulator, rounded once); backward is two GEMMs on
// transposed views (no copies) plus a row sum for the bias.
#include "mantissa/ops/linear.h"
#include "mantissa/core/op_profiler.h"

#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "ops/matmul_impl.h"

namespace mantissa {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  MANTISSA_PROFILE_OP("linear");
  MANTISSA_AUTOCAST("linear", linear, input, weight, bias);
  MANTISSA_CHECK(weight.dim() == 2, "linear",
                 "weight must be 2-D (out_features, in_features), got shape {}",
                 shape_str(weight.shape()));
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  MANTISSA_CHECK(input.dim() >= 1 && input.size(-1) == in_f, "linear",
                 "input of shape {} does not match weight of shape {} (expected last dim {})",
                 shape_str(input.shape()), shape_str(weight.shape()), in_f);
  detail::check_matmul_dtypes("linear", input, weight);
  if (bias.defined()) {
    MANTISSA_CHECK(bias.dim() == 1 && bias.size(0) == out_f, "linear",
                   "bias of shape {} does not match weight of shape {} (expected [{}])",
                   shape_str(bias.shape()), shape_str(weight.shape()), out_f);
    MANTISSA_CHECK(bias.dtype() == weight.dtype(), "linear",
                   "bias dtype {} differs from weight dtype {}", bias.dtype().name(),
                   weight.dtype().name());
  }
  // Explicit row count rather than -1: in_features or out_features may be 0.
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const Tensor y2 = detail::matmul_nograd(x2, w.t(), bias.defined() ? bias.detach() : Tensor());
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  Tensor y = y2.view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const Tensor saved_x = need_w ? x2 : Tensor();
  const Tensor saved_w = need_x ? w : Tensor();
  const DType dt = weight.dtype();
  return autograd::record(
      y, {input, weight, bias}, {saved_x, saved_w}, "LinearBackward", [=](const Tensor& grad) {
        const Tensor g = grad.dtype() == dt ? grad : grad.to(dt);
        const Tensor g2 = g.reshape({rows, out_f});
        std::vector<Tensor> grads(3);
        // Under autocast x is often an fp32 activation cast to bf16/f16 (after a layer norm)
        // and W the cached copy of an fp32 weight: both casts' backward widen the gradient
        // next, so it comes widened from the GEMM (autograd::widened_gradient_wanted).
        if (need_x)  // (R,out)@(out,in)
          grads[0] =
              (autograd::widened_gradient_wanted(0) ? detail::matmul_nograd_widened(g2, saved_w)
                                                    : detail::matmul_nograd(g2, saved_w))
                  .view(x_shape);
        // (out,R)@(R,in).
        if (need_w)
          grads[1] = autograd::widened_gradient_wanted(1)
                         ? detail::matmul_nograd_widened(g2.t(), saved_x)
                         : detail::matmul_nograd(g2.t(), saved_x);
        if (need_b) grads[2] = kernels::sum_rows(g2);
        return grads;
      });
}

}  // namespace mantissa
