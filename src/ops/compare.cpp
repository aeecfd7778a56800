// Comparisons (eq, ne, lt, le, gt, ge) and isfinite: kBool results, no gradient. Operands are
// promoted to their common dtype first (result_type) and compared in its arithmetic.
#include <cmath>
#include <type_traits>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/device_maps.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {
namespace {

using kernels::as_dtype;
using kernels::EwOp;

template <typename Cmp>
Tensor compare(const char* op, EwOp code, const Tensor& a, const Tensor& b, Cmp cmp) {
  MANTISSA_AUTOCAST(op, compare, op, code, a, b, cmp);
  const DType dt = result_type(a, b);
  if (kernels::gpu::any_cuda({&a, &b}))
    return kernels::gpu_kernels().map(op, code, {a, b}, dt, kBool, 0, 0, nullptr);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor x = as_dtype(a, dt);
  const Tensor y = as_dtype(b, dt);
  Tensor out = empty(shape, kBool);
  kernels::dispatch_arith(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::pointwise<bool, T, T>(out, {x, y}, cmp);
  });
  return out;
}

template <typename Cmp>
Tensor compare(const char* op, EwOp code, const Tensor& a, double b, Cmp cmp) {
  MANTISSA_AUTOCAST(op, compare, op, code, a, b, cmp);
  const DType dt = kernels::scalar_result_type(a.dtype(), b);
  // The number rounded to the dtype first, as below.
  if (a.is_cuda())
    return kernels::gpu_kernels().map(op, code, {a, scalar_tensor(b, dt)}, dt, kBool, 0, 0,
                                      nullptr);
  const Tensor x = as_dtype(a, dt);
  Tensor out = empty(a.shape(), kBool);
  kernels::dispatch_arith(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    // The number is first rounded to the tensor's dtype, as PyTorch casts a wrapped scalar
    // to the common dtype.
    const A s = kernels::load(kernels::store<T>(b));
    kernels::pointwise<bool, T>(out, {x}, [s, cmp](A v) { return cmp(v, s); });
  });
  return out;
}

struct Eq {
  template <typename A>
  bool operator()(A x, A y) const {
    return x == y;
  }
};
struct Ne {
  template <typename A>
  bool operator()(A x, A y) const {
    return x != y;
  }
};
struct Lt {
  template <typename A>
  bool operator()(A x, A y) const {
    return x < y;
  }
};
struct Le {
  template <typename A>
  bool operator()(A x, A y) const {
    return x <= y;
  }
};
struct Gt {
  template <typename A>
  bool operator()(A x, A y) const {
    return x > y;
  }
};
struct Ge {
  template <typename A>
  bool operator()(A x, A y) const {
    return x >= y;
  }
};

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", EwOp::kEq, a, b, Eq{}); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", EwOp::kNe, a, b, Ne{}); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", EwOp::kLt, a, b, Lt{}); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", EwOp::kLe, a, b, Le{}); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", EwOp::kGt, a, b, Gt{}); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", EwOp::kGe, a, b, Ge{}); }
Tensor eq(const Tensor& a, double b) { return compare("eq", EwOp::kEq, a, b, Eq{}); }
Tensor ne(const Tensor& a, double b) { return compare("ne", EwOp::kNe, a, b, Ne{}); }
Tensor lt(const Tensor& a, double b) { return compare("lt", EwOp::kLt, a, b, Lt{}); }
Tensor le(const Tensor& a, double b) { return compare("le", EwOp::kLe, a, b, Le{}); }
Tensor gt(const Tensor& a, double b) { return compare("gt", EwOp::kGt, a, b, Gt{}); }
Tensor ge(const Tensor& a, double b) { return compare("ge", EwOp::kGe, a, b, Ge{}); }

Tensor isfinite(const Tensor& a) {
  MANTISSA_AUTOCAST("isfinite", isfinite, a);
  if (a.is_cuda())
    return kernels::gpu_kernels().map("isfinite", EwOp::kIsFinite, {a}, a.dtype(), kBool, 0, 0,
                                      nullptr);
  Tensor out = empty(a.shape(), kBool);
  // Every dtype, float8 included: integers and bool are always finite.
  kernels::dispatch_all(a.dtype(), "isfinite", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::pointwise<bool, T>(out, {a.detach()}, [](auto v) {
      if constexpr (std::is_floating_point_v<decltype(v)>) {
        return static_cast<bool>(std::isfinite(v));
      } else {
        return true;
      }
    });
  });
  return out;
}

}  // namespace mantissa
