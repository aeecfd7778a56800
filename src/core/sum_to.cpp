#include "mantissa/core/sum_to.h"

#include "kernels/cpu/loops.h"
#include "mantissa/autograd/node.h"

namespace mantissa {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  MANTISSA_CHECK(broadcast_shapes(shape, g.shape(), "sum_to") == g.shape(), "sum_to",
                 "shape {} does not broadcast to {}", shape_str(shape), shape_str(g.shape()));
  Tensor out = empty(shape, g.dtype());
  kernels::dispatch_floating(g.dtype(), "sum_to", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    // Accumulate in the arithmetic type into a contiguous buffer laid out like `out`; the
    // output strides broadcast to g's shape are 0 on summed dimensions. Serial on purpose:
    // outputs collide across rows, and a fixed order keeps results bit-reproducible.
    std::vector<A> acc(static_cast<size_t>(out.numel()), A(0));
    const Shape out_strides = kernels::broadcast_strides(out, g.shape());
    const Shape& gs = g.strides();
    const T* src = static_cast<const T*>(g.data_ptr());
    const int64_t nd = g.dim();
    const int64_t gi = nd ? gs.back() : 0;
    const int64_t oi = nd ? out_strides.back() : 0;
    const int64_t n = g.numel();
    const int64_t inner = nd ? g.shape().back() : 1;
    for (int64_t r = 0; r < (inner ? n / inner : 0); ++r) {
      int64_t rem = r, go = 0, oo = 0;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t idx = rem % g.shape()[d];
        rem /= g.shape()[d];
        go += idx * gs[d];
        oo += idx * out_strides[d];
      }
      for (int64_t i = 0; i < inner; ++i) acc[oo + i * oi] += kernels::load(src[go + i * gi]);
    }
    T* dst = out.data<T>();
    for (size_t i = 0; i < acc.size(); ++i) dst[i] = kernels::store<T>(acc[i]);
  });
  const Shape g_shape = g.shape();
  return autograd::record(out, {g}, "SumToBackward", [g_shape](const Tensor& grad) {
    return std::vector<Tensor>{grad.expand(g_shape).contiguous()};
  });
}

}  // namespace mantissa
