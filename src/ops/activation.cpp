// Activations: relu and gelu (exact erf form and tanh approximation, as
// torch.nn.functional.gelu), each with its exact derivative.
#include <cmath>
#include <string>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/cpu/elementwise/relu_kernels.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {

using kernels::EwOp;
using kernels::float_map;
using kernels::grad_map;
using kernels::unary_map;
using kernels::vec_unary;

namespace {

// 1/sqrt(2), 1/sqrt(2*pi), sqrt(2/pi) and the cubic coefficient of the tanh approximation.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

}  // namespace

Tensor relu(const Tensor& a) {
  MANTISSA_PROFILE_OP("activation");
  MANTISSA_AUTOCAST("relu", relu, a);
  MANTISSA_CHECK(!a.dtype().is_bool(), "relu", "relu is not defined for bool tensors");
  // NaN passes through (as clamp_min(x, 0) does in PyTorch): x <= 0 is false for NaN. One
  // comparison and a select, so the loop vectorises instead of branching on random signs.
  // Contiguous f32/bf16/f16 run the SIMD kernels of kernels/cpu/elementwise/relu_kernels.h
  // (bit-identical).
  const auto& k = kernels::cpu::relu_kernels();
  Tensor out = unary_map("relu", EwOp::kRelu, a, a.dtype(),
                         kernels::exact_map<1>(
                             [](auto x) {
                               using A = decltype(x);
                               return x <= A(0) ? A(0) : x;
                             },
                             k.forward_f32, k.forward_bf16, k.forward_f16));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "ReluBackward", [x = a.detach()](const Tensor& g) {
    const auto& k = kernels::cpu::relu_kernels();
    return std::vector<Tensor>{grad_map(EwOp::kReluBackward, g, x,
                                        kernels::exact_map<2>(
                                            [](auto gv, auto xv) {
                                              using A = decltype(gv);
                                              return xv > A(0) ? gv : A(0);
                                            },
                                            k.backward_f32, k.backward_bf16, k.backward_f16))};
  });
}

Tensor gelu(const Tensor& a, std::string_view approximate) {
  MANTISSA_PROFILE_OP("activation");
  MANTISSA_AUTOCAST("gelu", gelu, a, approximate);
  const bool tanh_form = approximate == "tanh";
  MANTISSA_CHECK(tanh_form || approximate == "none", "gelu",
                 "approximate must be 'none' or 'tanh', got '{}'", approximate);
  Tensor out;
  if (tanh_form) {
    // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), evaluated as the identical
    // x * sigmoid(2u): one exp instead of libm's much slower tanh, and no cancellation.
    // f32/f16/bf16 run the same formula vectorised (vm::gelu_tanh_f32).
    out = float_map("gelu", EwOp::kGeluTanh, a,
                    vec_unary(
                        [](auto x) {
                          using A = decltype(x);
                          const A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
                          return x / (A(1) + std::exp(A(-2) * u));
                        },
                        &kernels::vm::gelu_tanh_f32));
  } else {
    // x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
    out = float_map("gelu", EwOp::kGeluErf, a,
                    vec_unary(
                        [](auto x) {
                          using A = decltype(x);
                          return A(0.5) * x * (A(1) + std::erf(x * A(kSqrtHalf)));
                        },
                        &kernels::vm::gelu_erf_f32));
  }
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(
      out, {a}, {a}, "GeluBackward", [x = a.detach(), tanh_form](const Tensor& g) {
        // f32/f16/bf16 run vectorised in one pass (vm::gelu_*_backward_f32); the element forms
        // below serve f64.
        if (tanh_form) {
          return std::vector<Tensor>{grad_map(
              EwOp::kGeluTanhBackward, g, x,
              kernels::vec_binary(
                  [](auto gv, auto xv) {
                    using A = decltype(gv);
                    const A x2 = xv * xv;
                    // With s = sigmoid(2u) = 0.5 (1 + tanh u):
                    // d/dx [x s] = s + 2 x s (1 - s) u'
                    const A s =
                        A(1) /
                        (A(1) + std::exp(A(-2 * kSqrt2OverPi) * (xv + A(kGeluCubic) * x2 * xv)));
                    const A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluCubic) * x2);
                    return gv * (s + A(2) * xv * s * (A(1) - s) * du);
                  },
                  &kernels::vm::gelu_tanh_backward_f32))};
        }
        return std::vector<Tensor>{grad_map(EwOp::kGeluErfBackward, g, x,
                                            kernels::vec_binary(
                                                [](auto gv, auto xv) {
                                                  using A = decltype(gv);
                                                  // Phi(x) + x phi(x)
                                                  const A cdf =
                                                      A(0.5) * (A(1) + std::erf(xv * A(kSqrtHalf)));
                                                  const A pdf =
                                                      A(kInvSqrt2Pi) * std::exp(A(-0.5) * xv * xv);
                                                  return gv * (cdf + xv * pdf);
                                                },
                                                &kernels::vm::gelu_erf_backward_f32))};
      });
}

}  // namespace mantissa
