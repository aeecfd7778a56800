// Reductions: sum, mean, amax, max (all elements, or one dim with indices) and argmax.
// Floats accumulate in fp32 (double for f64) and are rounded once; integers and bool sum into
// int64 (as PyTorch). Kernels and the deterministic work split are in reduce_kernels.h.
#include <algorithm>
#include <type_traits>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/cpu/reduce/reduce_kernels.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa {
namespace {

using kernels::ReduceLayout;

// One flag per dim of a: reduced or not. Negative dims wrap; an empty list means every dim
// (PyTorch's dim=[]); a repeated dim is an error.
std::vector<bool> reduced_dims(const Tensor& a, const std::vector<int64_t>& dims, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(a.dim()), dims.empty());
  std::vector<bool> seen(std::max<int64_t>(a.dim(), 1), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, a.dim(), op);
    MANTISSA_CHECK(!seen[w], op, "dim {} appears multiple times in the list of dims", w);
    seen[w] = true;
    if (a.dim() > 0) mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& in, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!mask[d]) {
      out.push_back(in[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

std::vector<int64_t> dims_of(const std::vector<bool>& mask) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

int64_t reduced_count(const Shape& in, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (mask[d]) n *= in[d];
  return n;
}

// max/amax have no identity for an empty reduction.
void check_nonempty(const Tensor& a, const std::vector<bool>& mask, const char* op) {
  for (size_t d = 0; d < mask.size(); ++d) {
    MANTISSA_CHECK(!mask[d] || a.shape()[d] != 0, op,
                   "cannot reduce over dimension {} of size 0 (tensor of shape {}): the maximum "
                   "of nothing is undefined",
                   d, shape_str(a.shape()));
  }
}

// Writes acc values to a contiguous tensor of dtype TOut, each rounded once (after `finish`).
template <typename TOut, typename A, typename F>
void store_all(const std::vector<A>& acc, const Tensor& out, F finish) {
  TOut* o = static_cast<TOut*>(out.data_ptr());
  const int64_t n = static_cast<int64_t>(acc.size());
  if constexpr (kernels::kIsNarrowFloat<TOut>) {
    std::vector<float> f(acc.size());
    for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(finish(acc[i]));
    kernels::store_narrow(f.data(), o, n);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = kernels::store<TOut>(finish(acc[i]));
  }
}

// sum (divisor 0) or mean (divisor = reduced element count) into a new tensor.
Tensor sum_forward(const Tensor& a, const std::vector<bool>& mask, bool keepdim, bool mean,
                   const char* op) {
  const DType in_dt = a.dtype();
  MANTISSA_CHECK(!mean || in_dt.is_floating_point(), op,
                 "input dtype must be floating point to take a mean, got {}; cast it first",
                 in_dt.name());
  if (a.is_cuda())
    return kernels::gpu_kernels().sum(a, mask, reduced_shape(a.shape(), mask, keepdim), mean);
  const DType out_dt = in_dt.is_floating_point() ? in_dt : kInt64;
  Tensor out = empty(reduced_shape(a.shape(), mask, keepdim), out_dt);
  auto [src, layout] = kernels::reduce_layout(a, mask);
  const int64_t count = reduced_count(a.shape(), mask);
  kernels::dispatch_arith(in_dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<kernels::acc_t<T>>) {
      using A = kernels::acc_t<T>;
      std::vector<A> acc(static_cast<size_t>(layout.outer * layout.inner));
      kernels::reduce_kernel<kernels::SumOp, A>(static_cast<const T*>(src.data_ptr()), layout,
                                                acc.data());
      if (mean) {
        const A n = static_cast<A>(count);
        store_all<T>(acc, out, [n](A v) { return v / n; });
      } else {
        store_all<T>(acc, out, [](A v) { return v; });
      }
    } else {
      std::vector<int64_t> acc(static_cast<size_t>(layout.outer * layout.inner));
      kernels::reduce_kernel<kernels::SumOp, int64_t>(static_cast<const T*>(src.data_ptr()), layout,
                                                      acc.data());
      store_all<int64_t>(acc, out, [](int64_t v) { return v; });
    }
  });
  return out;
}

// The gradient of sum/mean: g broadcast back over the reduced dims (divided by `count` for
// mean, in the accumulation type), as a contiguous tensor.
Tensor spread_grad(const Tensor& g, const Shape& in_shape, const Shape& keep_shape, int64_t count) {
  const Tensor gk = g.reshape(keep_shape);
  if (g.is_cuda()) return kernels::gpu_kernels().spread(gk, in_shape, count);
  Tensor out = empty(in_shape, g.dtype());
  kernels::dispatch_floating(g.dtype(), "backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    if (count > 0) {
      const A n = static_cast<A>(count);
      kernels::pointwise<T, T>(out, {gk}, [n](A v) { return v / n; });
    } else {
      kernels::pointwise<T, T>(out, {gk}, [](A v) { return v; });
    }
  });
  return out;
}

Tensor sum_impl(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  const char* op = mean ? "mean" : "sum";
  const std::vector<bool> mask = reduced_dims(a, dims, op);
  Tensor out = sum_forward(a, mask, keepdim, mean, op);
  if (!autograd::needs_grad(a)) return out;
  const int64_t count = mean ? reduced_count(a.shape(), mask) : 0;
  return autograd::record(
      out, {a}, mean ? "MeanBackward" : "SumBackward",
      [in_shape = a.shape(), keep = reduced_shape(a.shape(), mask, true), count](const Tensor& g) {
        return std::vector<Tensor>{spread_grad(g, in_shape, keep, count)};
      });
}

// amax over the flagged dims; the gradient is split evenly between tied maxima.
Tensor amax_impl(const Tensor& a, const std::vector<bool>& mask, bool keepdim, const char* op,
                 const char* node_name) {
  check_nonempty(a, mask, op);
  Tensor out;
  if (a.is_cuda()) {
    out = kernels::gpu_kernels().amax(a, mask, reduced_shape(a.shape(), mask, keepdim));
  } else {
    out = empty(reduced_shape(a.shape(), mask, keepdim), a.dtype());
    auto [src, layout] = kernels::reduce_layout(a, mask);
    kernels::dispatch_arith(a.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      // bool compares as uint8 (std::vector<bool> has no contiguous storage)
      using A = std::conditional_t<std::is_same_v<T, bool>, uint8_t, kernels::acc_t<T>>;
      std::vector<A> acc(static_cast<size_t>(layout.outer * layout.inner));
      kernels::reduce_kernel<kernels::MaxOp, A>(static_cast<const T*>(src.data_ptr()), layout,
                                                acc.data());
      store_all<T>(acc, out, [](A v) { return v; });
    });
  }
  if (!autograd::needs_grad(a)) return out;
  const Shape keep = reduced_shape(a.shape(), mask, true);
  return autograd::record(
      out, {a}, {a, out}, node_name,
      [x = a.detach(), m = out.detach().reshape(keep), keep,
       dims = dims_of(mask)](const Tensor& g) {
        const Tensor xg = kernels::as_dtype(x, g.dtype());
        const Tensor mg = kernels::as_dtype(m, g.dtype());
        const Tensor gk = g.reshape(keep);
        if (g.is_cuda()) {
          // Ties (NaN ties NaN) share g evenly: g / count where tied.
          const Tensor ties = kernels::gpu_kernels().map("backward", kernels::EwOp::kTie, {xg, mg},
                                                         g.dtype(), kBool, 0, 0, &x.shape());
          const Tensor count = sum(ties, dims, /*keepdim=*/true);
          return std::vector<Tensor>{where(ties, div(gk, count.to(g.dtype())), 0.0)};
        }
        Tensor ties = empty(x.shape(), kBool);
        Tensor gx = empty(x.shape(), g.dtype());
        kernels::dispatch_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = kernels::acc_t<T>;
          // A NaN maximum ties with the NaN elements that produced it.
          kernels::pointwise<bool, T, T>(
              ties, {xg, mg}, [](A xv, A mv) { return xv == mv || (xv != xv && mv != mv); });
          const Tensor count = sum(ties, dims, /*keepdim=*/true);
          kernels::pointwise<T, bool, T, int64_t>(
              gx, {ties, gk, count},
              [](bool t, A gv, int64_t c) { return t ? gv / static_cast<A>(c) : A(0); });
        });
        return std::vector<Tensor>{gx};
      });
}

// Splits `a` around one dim as [outer, size, inner] (contiguous layout).
ReduceLayout dim_layout(const Shape& shape, int64_t d) {
  ReduceLayout l;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < d) l.outer *= shape[i];
    if (i == d) l.r = shape[i];
    if (i > d) l.inner *= shape[i];
  }
  return l;
}

// Values (may be undefined: argmax) and indices of the first maximum along dim d.
void max_dim_forward(const Tensor& a, int64_t d, const Tensor& values, const Tensor& indices,
                     const char* op) {
  if (a.is_cuda()) return kernels::gpu_kernels().max_dim(a, d, values, indices);
  const Tensor src = a.detach().contiguous();
  const ReduceLayout l = a.dim() == 0 ? ReduceLayout{} : dim_layout(a.shape(), d);
  kernels::dispatch_arith(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::argmax_kernel<T>(static_cast<const T*>(src.data_ptr()), l,
                              values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr,
                              static_cast<int64_t*>(indices.data_ptr()));
  });
}

}  // namespace

Tensor sum(const Tensor& a) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("sum", sum, a);
  return sum_impl(a, {}, false, false);
}
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("sum", sum, a, dims, keepdim);
  return sum_impl(a, dims, keepdim, false);
}
Tensor mean(const Tensor& a) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("mean", mean, a);
  return sum_impl(a, {}, false, true);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("mean", mean, a, dims, keepdim);
  return sum_impl(a, dims, keepdim, true);
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("amax", amax, a, dims, keepdim);
  return amax_impl(a, reduced_dims(a, dims, "amax"), keepdim, "amax", "AmaxBackward");
}

Tensor max(const Tensor& a) {
  MANTISSA_PROFILE_OP("reduce");
  MANTISSA_AUTOCAST("max", max, a);
  return amax_impl(a, std::vector<bool>(static_cast<size_t>(a.dim()), true), false, "max",
                   "MaxBackward");
}

ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim) {
  MANTISSA_AUTOCAST("max", max, a, dim, keepdim);
  const int64_t d = wrap_dim(dim, a.dim(), "max");
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  check_nonempty(a, mask, "max");
  const Shape out_shape = reduced_shape(a.shape(), mask, keepdim);
  ValuesIndices r{empty(out_shape, a.dtype(), a.device()), empty(out_shape, kInt64, a.device())};
  max_dim_forward(a, d, r.values, r.indices, "max");
  if (!autograd::needs_grad(a)) return r;
  const Shape keep = reduced_shape(a.shape(), mask, true);
  // The backward reads the returned indices.
  autograd::record(r.values, {a}, {r.indices}, "MaxBackward",
                   [in_shape = a.shape(), idx = r.indices.reshape(keep), keep, d](const Tensor& g) {
                     // The gradient goes to the (first) maximum's position only.
                     if (g.is_cuda())
                       return std::vector<Tensor>{kernels::gpu_kernels().max_dim_backward(
                           g.reshape(keep), idx, in_shape, d)};
                     const Tensor gk = g.reshape(keep).contiguous();
                     Tensor gx = zeros(in_shape, g.dtype());
                     const ReduceLayout l =
                         in_shape.empty() ? ReduceLayout{} : dim_layout(in_shape, d);
                     const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
                     kernels::dispatch_floating(g.dtype(), "backward", [&](auto tag) {
                       using T = typename decltype(tag)::type;
                       const T* gp = static_cast<const T*>(gk.data_ptr());
                       T* op = static_cast<T*>(gx.data_ptr());
                       for (int64_t o = 0; o < l.outer; ++o)
                         for (int64_t k = 0; k < l.inner; ++k) {
                           const int64_t j = o * l.inner + k;
                           op[(o * l.r + ip[j]) * l.inner + k] = gp[j];
                         }
                     });
                     return std::vector<Tensor>{gx};
                   });
  return r;
}

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  MANTISSA_AUTOCAST("argmax", argmax, a, dim, keepdim);
  const int64_t d = wrap_dim(dim, a.dim(), "argmax");
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  check_nonempty(a, mask, "argmax");
  Tensor indices = empty(reduced_shape(a.shape(), mask, keepdim), kInt64, a.device());
  max_dim_forward(a, d, Tensor(), indices, "argmax");
  return indices;
}

}  // namespace mantissa
