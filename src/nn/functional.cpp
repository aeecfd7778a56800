// linear as one node: the flattened batch makes a single 2-D GEMM with the bias fused into
// oneDNN's epilogue (added to the fp32 accumulator, rounded once); backward is two GEMMs on
// transposed views (no copies) plus a row sum for the bias.
#include "mantissa/nn/functional.h"

#include <algorithm>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise_loops.h"
#include "mantissa/autograd/node.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "ops/matmul_impl.h"

namespace mantissa::nn::functional {
namespace {

// Column sums of a 2-D tensor (rows, n) in its dtype, so the bias gradient does not depend on
// the thread count: rows go in fixed chunks of kRows (whatever the threads), each chunk summed
// in row order into its own acc_t partial, and the partials are added in chunk order. Whole
// rows are widened at once and added as plain arrays (contiguous streams that vectorise).
Tensor sum_rows(const Tensor& g2) {
  const Tensor g = g2.contiguous();
  const int64_t rows = g.size(0), n = g.size(1);
  Tensor out = empty({n}, g.dtype());
  kernels::dispatch_floating(g.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    constexpr int64_t kRows = 256;
    const int64_t chunks = std::max<int64_t>(1, (rows + kRows - 1) / kRows);
    const T* src = g.data<T>();
    std::vector<A> partial(static_cast<size_t>(chunks * n), A(0));
#pragma omp parallel if (rows * n > kernels::kParallelGrain && chunks > 1)
    {
      std::vector<A> buf(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        A* acc = partial.data() + c * n;
        for (int64_t r = c * kRows; r < std::min(rows, (c + 1) * kRows); ++r) {
          const A* v = kernels::load_block(src + r * n, 1, n, buf.data());
          for (int64_t j = 0; j < n; ++j) acc[j] += v[j];
        }
      }
    }
    for (int64_t c = 1; c < chunks; ++c) {
      const A* p = partial.data() + c * n;
      for (int64_t j = 0; j < n; ++j) partial[j] += p[j];
    }
    T* dst = out.data<T>();
    for (int64_t j = 0; j < n; ++j) dst[j] = kernels::store<T>(partial[j]);
  });
  return out;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
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
  return autograd::record(y, {input, weight, bias}, "LinearBackward", [=](const Tensor& grad) {
    const Tensor g = grad.dtype() == dt ? grad : grad.to(dt);
    const Tensor g2 = g.reshape({rows, out_f});
    std::vector<Tensor> grads(3);
    if (need_x) grads[0] = detail::matmul_nograd(g2, saved_w).view(x_shape);  // (R,out)@(out,in)
    if (need_w) grads[1] = detail::matmul_nograd(g2.t(), saved_x);            // (out,R)@(R,in)
    if (need_b) grads[2] = sum_rows(g2);
    return grads;
  });
}

Tensor relu(const Tensor& input) { return mantissa::relu(input); }

Tensor gelu(const Tensor& input, std::string_view approximate) {
  return mantissa::gelu(input, approximate);
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  return mantissa::dropout(input, p, training, gen);
}

}  // namespace mantissa::nn::functional
