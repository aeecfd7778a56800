#include "mantissa/core/sum_to.h"

#include <algorithm>

#include "core/cuda/cuda_reduce.h"
#include "core/strided_loops.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

// When `shape` (left-padded with 1s) keeps g's trailing dims and is 1 on the leading ones, the
// reduction is a column sum of g viewed as [rows, cols] (a bias gradient: [B, N] -> [N]).
// Returns cols, or 0 when the reduction has another form.
int64_t column_sum_cols(const Shape& g_shape, const Shape& shape) {
  const size_t nd = g_shape.size();
  if (shape.size() > nd || nd == 0) return 0;
  const size_t lead = nd - shape.size();
  size_t d0 = nd;  // first kept dim
  while (d0 > 0 && (d0 - 1 >= lead) && shape[d0 - 1 - lead] == g_shape[d0 - 1]) --d0;
  for (size_t d = 0; d < d0; ++d) {
    if (d >= lead && shape[d - lead] != 1) return 0;
  }
  int64_t cols = 1;
  for (size_t d = d0; d < nd; ++d) cols *= g_shape[d];
  return cols;
}

// Column sums of a contiguous [rows, cols] array. Each thread owns a fixed range of columns and
// adds the rows in order, so every output is the same sequence of additions as the serial
// loop: bit-identical for any thread count.
template <typename T, typename A>
void column_sum(const T* src, int64_t rows, int64_t cols, T* dst) {
  constexpr int64_t kCols = 64;  // a strip of accumulators that stays in registers
  const int64_t strips = (cols + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (rows * cols > kernels::kParallelGrain && strips > 1)
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t c0 = s * kCols, w = std::min(kCols, cols - c0);
    A acc[kCols] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = src + r * cols + c0;
      for (int64_t i = 0; i < w; ++i) acc[i] += kernels::load(row[i]);
    }
    for (int64_t i = 0; i < w; ++i) dst[c0 + i] = kernels::store<T>(acc[i]);
  }
}

}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  MANTISSA_CHECK(broadcast_shapes(shape, g.shape(), "sum_to") == g.shape(), "sum_to",
                 "shape {} does not broadcast to {}", shape_str(shape), shape_str(g.shape()));
#if MANTISSA_HAS_CUDA
  if (g.is_cuda()) {
    // Summed over the leading dims shape lacks and the dims where it is 1.
    MANTISSA_CHECK(g.is_floating_point(), "sum_to", "expected a floating gradient, got {}",
                   g.dtype().name());
    const size_t lead = g.shape().size() - shape.size();
    std::vector<bool> reduced(g.shape().size());
    for (size_t d = 0; d < reduced.size(); ++d)
      reduced[d] = d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1);
    Tensor out = detail::cuda_sum(g, reduced, shape, /*mean=*/false);
    return autograd::record(out, {g}, "SumToBackward", [g_shape = g.shape()](const Tensor& grad) {
      return std::vector<Tensor>{grad.expand(g_shape).contiguous()};
    });
  }
#endif
  Tensor out = empty(shape, g.dtype());
  kernels::dispatch_floating(g.dtype(), "sum_to", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    const int64_t cols = g.is_contiguous() ? column_sum_cols(g.shape(), shape) : 0;
    if (cols > 0) {
      column_sum<T, A>(static_cast<const T*>(g.data_ptr()), g.numel() / cols, cols, out.data<T>());
      return;
    }
    // Accumulate in the arithmetic type into a contiguous buffer laid out like `out`; the
    // output strides broadcast to g's shape are 0 on summed dimensions. Serial: outputs
    // collide across rows, and a fixed order keeps results bit-reproducible.
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
