#include "autograd/accumulate.h"

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise_loops.h"

namespace mantissa::autograd {

Tensor add_gradients(const Tensor& a, const Tensor& b) {
  MANTISSA_CHECK(a.shape() == b.shape(), "autograd", "gradient shapes differ: {} vs {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  Tensor x = a.contiguous();
  Tensor y = b.to(a.dtype()).contiguous();
  Tensor out = empty(a.shape(), a.dtype());
  // The elementwise loop: threaded, vectorised, f16/bf16 widened and rounded in bulk.
  kernels::dispatch_floating(a.dtype(), "autograd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::pointwise<T, T, T>(out, {x, y}, [](auto u, auto v) { return u + v; });
  });
  return out;
}

}  // namespace mantissa::autograd
