#include "autograd/accumulate.h"

#include "kernels/cpu/dispatch.h"

namespace mantissa::autograd {

Tensor add_gradients(const Tensor& a, const Tensor& b) {
  MANTISSA_CHECK(a.shape() == b.shape(), "autograd", "gradient shapes differ: {} vs {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  Tensor x = a.contiguous();
  Tensor y = b.to(a.dtype()).contiguous();
  Tensor out = empty(a.shape(), a.dtype());
  kernels::dispatch_floating(a.dtype(), "autograd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    const int64_t n = out.numel();
#pragma omp parallel for if (n > kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      po[i] = kernels::store<T>(kernels::load(px[i]) + kernels::load(py[i]));
  });
  return out;
}

}  // namespace mantissa::autograd
