// matmul: torch.matmul semantics (1-D promotion, broadcast batch dims, autograd) on the one
// GEMM entry point (mantissa/gemm/gemm.h), which chooses the engine. Backward: dA = dC @ B^T,
// dB = A^T @ dC, summed over broadcast batch dims.
#include "mantissa/ops/matmul.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/gemm/gemm.h"
#include "ops/complex_arith.h"
#include "ops/matmul_impl.h"

namespace mantissa {
namespace detail {

void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  const DType da = a.dtype(), db = b.dtype();
  auto supported = [](DType d) { return d.is_floating_point() && !d.is_float8(); };
  MANTISSA_CHECK(supported(da) && supported(db), op,
                 "expected floating dtypes (float64, float32, float16, bfloat16), got {} and {}; "
                 "integer and float8 operands are not supported",
                 da.name(), db.name());
  MANTISSA_CHECK(da == db, op,
                 "expected both operands to have the same dtype, got {} and {} (convert one "
                 "with .to(), or use autocast)",
                 da.name(), db.name());
}

Tensor matmul_nograd(const Tensor& a, const Tensor& b, const Tensor& bias) {
  gemm::Epilogue e;
  e.bias = bias;
  return gemm::gemm(gemm::dense(a), gemm::dense(b), e);
}

Tensor matmul_nograd_widened(const Tensor& a, const Tensor& b) {
  gemm::Epilogue e;
  e.round_to = a.dtype();
  return gemm::gemm(gemm::dense(a), gemm::dense(b), e);
}

}  // namespace detail

namespace {

// Both operands at least 2-D; records one MatmulBackward node.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor out = detail::matmul_nograd(a, b);
  if (!autograd::needs_grad(a, b)) return out;
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  const Shape a_shape = a.shape(), b_shape = b.shape();
  const Tensor a_saved = need_b ? a.detach() : Tensor();
  const Tensor b_saved = need_a ? b.detach() : Tensor();
  const DType dt = a.dtype();
  return autograd::record(
      out, {a, b}, {a_saved, b_saved}, "MatmulBackward", [=](const Tensor& grad) {
        const Tensor g = grad.dtype() == dt ? grad : grad.to(dt);
        Tensor ga, gb;
        if (need_a) ga = sum_to(detail::matmul_nograd(g, b_saved.transpose(-1, -2)), a_shape);
        if (need_b) {
          const int64_t K = a_shape.back(), N = b_shape.back();
          const Shape bb(b_shape.begin(), b_shape.end() - 2);
          const Shape out_batch(g.shape().begin(), g.shape().end() - 2);
          if (numel_of(bb) == 1 && numel_of(out_batch) > 1) {
            // b was broadcast over every batch entry: (K, rows) @ (rows, N) sums them inside one
            // fp32-accumulated GEMM instead of rounding each batch product separately.
            const int64_t rows = numel_of(Shape(g.shape().begin(), g.shape().end() - 1));
            const Tensor a2 = a_saved.reshape({rows, K});
            gb = detail::matmul_nograd(a2.t(), g.reshape({rows, N})).reshape(b_shape);
          } else {
            gb = sum_to(detail::matmul_nograd(a_saved.transpose(-1, -2), g), b_shape);
          }
        }
        return std::vector<Tensor>{ga, gb};
      });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  MANTISSA_PROFILE_OP("matmul");
  MANTISSA_AUTOCAST("matmul", matmul, a, b);
  if (detail::any_complex(a, b)) return detail::complex_matmul(a, b);
  MANTISSA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul",
                 "both arguments need at least 1 dimension, got shapes {} and {}",
                 shape_str(a.shape()), shape_str(b.shape()));
  detail::check_matmul_dtypes("matmul", a, b);
  const int64_t ka = a.size(-1);
  const int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  MANTISSA_CHECK(ka == kb, "matmul", "shapes {} and {} cannot be multiplied ({} != {})",
                 shape_str(a.shape()), shape_str(b.shape()), ka, kb);
  // Batch dims (all but the matrix dims) must broadcast, aligned from the right.
  const int64_t na = std::max<int64_t>(a.dim() - 2, 0), nb = std::max<int64_t>(b.dim() - 2, 0);
  for (int64_t i = 1; i <= std::min(na, nb); ++i) {
    const int64_t sa = a.size(na - i), sb = b.size(nb - i);
    MANTISSA_CHECK(sa == sb || sa == 1 || sb == 1, "matmul",
                   "batch dimensions of shapes {} and {} do not broadcast ({} vs {})",
                   shape_str(a.shape()), shape_str(b.shape()), sa, sb);
  }
  // 1-D operands are promoted to matrices through differentiable views and squeezed back.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor out = matmul_nd(a2, b2);
  if (a.dim() == 1 && b.dim() == 1) return out.reshape({});
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace mantissa
