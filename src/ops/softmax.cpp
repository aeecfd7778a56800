// softmax / log_softmax along one dimension: checks, the graph node, and the loops of
// kernels/cpu/softmax (the input viewed as (outer, n, inner), arithmetic in fp32 or double,
// one rounding per output).
#include "mantissa/ops/softmax.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/cpu/softmax/softmax_kernels.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

template <bool kLog>
Tensor softmax_impl(const Tensor& a, int64_t dim, const char* name, const char* node_name) {
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), name,
                 "expected a floating input (float64, float32, float16, bfloat16), got {}",
                 a.dtype().name());
  // A 0-dim tensor behaves as one row of one element (dim 0 or -1), as in PyTorch.
  const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), name);
  const kernels::SoftmaxLayout l = kernels::softmax_layout(a.shape(), a.dim() == 0 ? 0 : d);
  Tensor y;
  if (a.is_cuda()) {
    y = kernels::gpu_kernels().softmax_forward(a, kLog, l.outer, l.n, l.inner);
  } else {
    Tensor x = a.detach().contiguous();
    y = empty(a.shape(), a.dtype());
    kernels::dispatch_floating(a.dtype(), name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::softmax_forward<T, kLog>(x.data<T>(), y.data<T>(), l);
    });
  }
  if (!autograd::needs_grad(a)) return y;
  Tensor saved = y.detach();
  return autograd::record(y, {a}, {saved}, node_name, [saved, l, name](const Tensor& grad) {
    // Compute in the gradient's dtype; the engine casts the result to the input's dtype.
    if (grad.is_cuda() || saved.is_cuda())
      return std::vector<Tensor>{
          kernels::gpu_kernels().softmax_backward(saved, grad, kLog, l.outer, l.n, l.inner)};
    Tensor g = grad.contiguous();
    Tensor ys = saved.to(g.dtype()).contiguous();
    Tensor dx = empty(g.shape(), g.dtype());
    kernels::dispatch_floating(g.dtype(), name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::softmax_backward<T, kLog>(ys.data<T>(), g.data<T>(), dx.data<T>(), l);
    });
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  MANTISSA_PROFILE_OP("softmax");
  MANTISSA_AUTOCAST("softmax", softmax, a, dim);
  return softmax_impl<false>(a, dim, "softmax", "SoftmaxBackward");
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  MANTISSA_PROFILE_OP("softmax");
  MANTISSA_AUTOCAST("log_softmax", log_softmax, a, dim);
  return softmax_impl<true>(a, dim, "log_softmax", "LogSoftmaxBackward");
}

}  // namespace mantissa
