#include "mantissa/nn/rms_norm.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/default_dtype.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/core/shape.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::nn {
namespace {

// Partial sums per lane, added in lane order at the end: the lanes vectorise (no reassociation
// needed) and the result does not depend on the thread count.
constexpr int64_t kLanes = 16;

// sum_j a[j] * b[j] * c[j] (c null: sum_j a[j] * b[j]) over j < n.
template <typename T>
T lane_dot(const T* a, const T* b, const T* c, int64_t n) {
  T acc[kLanes] = {};
  int64_t j = 0;
  if (c == nullptr) {
    for (; j + kLanes <= n; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
    for (; j < n; ++j) acc[j % kLanes] += a[j] * b[j];
  } else {
    for (; j + kLanes <= n; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l] * c[j + l];
    for (; j < n; ++j) acc[j % kLanes] += a[j] * b[j] * c[j];
  }
  T s = 0;
  for (T v : acc) s += v;
  return s;
}

// y = w * (x * r) per row of n, with r = 1 / sqrt(mean(x^2) + eps) kept per row for backward.
template <typename T>
void rms_forward(const T* x, const T* w, int64_t rows, int64_t n, T eps, T* y, T* r) {
#pragma omp parallel for schedule(static) if (rows * n > kernels::kParallelGrain)
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * n;
    T* yr = y + i * n;
    const T ri = T(1) / std::sqrt(lane_dot<T>(xr, xr, nullptr, n) / static_cast<T>(n) + eps);
    r[i] = ri;
    for (int64_t j = 0; j < n; ++j) yr[j] = w[j] * (xr[j] * ri);
  }
}

// dx = r * g * w - x * r^3 * sum_j(g_j w_j x_j) / n per row (r depends on every x_j).
template <typename T>
void rms_input_grad(const T* x, const T* w, const T* r, const T* g, int64_t rows, int64_t n,
                    T* dx) {
#pragma omp parallel for schedule(static) if (rows * n > kernels::kParallelGrain)
  for (int64_t i = 0; i < rows; ++i) {
    const T *xr = x + i * n, *gr = g + i * n;
    T* dr = dx + i * n;
    const T ri = r[i];
    const T c = ri * ri * ri * lane_dot<T>(gr, w, xr, n) / static_cast<T>(n);
    for (int64_t j = 0; j < n; ++j) dr[j] = ri * (gr[j] * w[j]) - xr[j] * c;
  }
}

// dw_j = sum over rows of g * x * r, accumulated in double row by row (one fixed order).
template <typename T>
void rms_weight_grad(const T* x, const T* r, const T* g, int64_t rows, int64_t n, T* dw) {
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const T *xr = x + i * n, *gr = g + i * n;
    const T ri = r[i];
    for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(gr[j] * (xr[j] * ri));
  }
  for (int64_t j = 0; j < n; ++j) dw[j] = static_cast<T>(acc[j]);
}

// The whole norm as one op with its own backward, for a CPU input whose dtype (fp32 or f64) the
// norm computes in and the weight shares: the composed form's arithmetic without its seven
// passes over the activations and their intermediate tensors.
template <typename T>
Tensor fused_rms_norm(const Tensor& input, const Tensor& weight, double eps) {
  MANTISSA_PROFILE_OP("rms_norm");
  const int64_t n = weight.numel(), rows = input.numel() / n;
  const DType dt = input.dtype();
  const Tensor x = input.detach().contiguous(), w = weight.detach().contiguous();
  Tensor y = empty(input.shape(), dt), r = empty({rows}, dt);
  rms_forward<T>(x.data<T>(), w.data<T>(), rows, n, static_cast<T>(eps), y.data<T>(), r.data<T>());
  if (!autograd::needs_grad(input, weight)) return y;
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  return autograd::record(
      y, {input, weight}, {input, weight}, "RMSNormBackward", [=](const Tensor& grad) {
        const Tensor g = grad.to(dt).contiguous();
        std::vector<Tensor> grads(2);
        if (need_x) {
          grads[0] = empty(x.shape(), dt);
          rms_input_grad<T>(x.data<T>(), w.data<T>(), r.data<T>(), g.data<T>(), rows, n,
                            grads[0].data<T>());
        }
        if (need_w) {
          grads[1] = empty({n}, dt);
          rms_weight_grad<T>(x.data<T>(), r.data<T>(), g.data<T>(), rows, n, grads[1].data<T>());
        }
        return grads;
      });
}

}  // namespace

RMSNorm::RMSNorm(int64_t hidden_size, double eps, std::optional<DType> dtype)
    : Module("RMSNorm"), hidden_size_(hidden_size), eps_(eps) {
  MANTISSA_CHECK(hidden_size > 0, "RMSNorm", "hidden_size must be positive, got {}", hidden_size);
  MANTISSA_CHECK(std::isfinite(eps) && eps >= 0, "RMSNorm", "eps must be finite and >= 0, got {}",
                 eps);
  weight = register_parameter("weight", ones({hidden_size}, dtype.value_or(get_default_dtype())));
}

Tensor RMSNorm::forward(const Tensor& input) {
  MANTISSA_CHECK(input.dim() >= 1 && input.size(input.dim() - 1) == hidden_size_, "RMSNorm",
                 "expected input (..., {}), got shape {}", hidden_size_, shape_str(input.shape()));
  const DType dt = input.dtype();
  if (!input.is_cuda() && !weight.is_cuda() && weight.dtype() == dt) {
    if (dt == kFloat32) return fused_rms_norm<float>(input, weight, eps_);
    if (dt == kFloat64) return fused_rms_norm<double>(input, weight, eps_);
  }
  // Other dtypes (bf16 and fp16 inputs round the normalised value before the weight) and GPU
  // tensors: the composed form.
  const Tensor x = dt == kFloat64 ? input : input.to(kFloat32);
  const Tensor variance = mean(mul(x, x), {-1}, /*keepdim=*/true);
  const Tensor normed = mul(x, rsqrt(add(variance, eps_)));
  return mul(weight, normed.to(input.dtype()));
}

std::string RMSNorm::extra_repr() const { return fmt::format("({},), eps={}", hidden_size_, eps_); }

}  // namespace mantissa::nn
