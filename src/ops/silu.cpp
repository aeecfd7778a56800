// SiLU, x * sigmoid(x), in one pass each way: the forward and its derivative
// s (1 + x (1 - s)) run as the vector kernels of kernels/cpu/elementwise/vec_math.h (fp16 and
// bf16 widened to fp32 block by block), so no sigmoid or fp32 copy of the input is stored.
#include "mantissa/ops/silu.h"

#include <cmath>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/silu_mul.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {

using kernels::EwOp;

Tensor silu(const Tensor& a) {
  MANTISSA_PROFILE_OP("activation");
  MANTISSA_AUTOCAST("silu", silu, a);
  MANTISSA_CHECK(a.is_floating_point() && !a.dtype().is_float8(), "silu",
                 "silu needs a floating tensor (fp16, bf16, fp32, fp64), got {}", a.dtype().name());
  Tensor out = kernels::float_map("silu", EwOp::kSilu, a,
                                  kernels::vec_unary(
                                      [](auto x) {
                                        using A = decltype(x);
                                        return x * (A(1) / (A(1) + std::exp(-x)));
                                      },
                                      &kernels::vm::silu_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "SiluBackward", [x = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{kernels::grad_map(EwOp::kSiluBackward, g, x,
                                                 kernels::vec_binary(
                                                     [](auto gv, auto xv) {
                                                       using A = decltype(gv);
                                                       const A s = A(1) / (A(1) + std::exp(-xv));
                                                       return gv * (s * (A(1) + xv * (A(1) - s)));
                                                     },
                                                     &kernels::vm::silu_backward_f32))};
  });
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  MANTISSA_PROFILE_OP("activation");
  MANTISSA_AUTOCAST("silu_mul", silu_mul, gate, up);
  const DType dt = gate.dtype();
  const bool fused = !gate.is_cuda() && !up.is_cuda() && up.dtype() == dt &&
                     (dt == kFloat32 || dt == kBFloat16 || dt == kFloat16) &&
                     gate.shape() == up.shape() && gate.is_contiguous() && up.is_contiguous();
  if (!fused) return mul(silu(gate), up);
  Tensor out = empty(gate.shape(), dt);
  kernels::cpu::silu_mul_forward(dt, gate.data_ptr(), up.data_ptr(), out.data_ptr(), out.numel());
  if (!autograd::needs_grad(gate, up)) return out;
  const bool need_gate = gate.requires_grad(), need_up = up.requires_grad();
  return autograd::record(
      out, {gate, up}, {gate, up}, "SiluMulBackward",
      [g = gate.detach(), u = up.detach(), need_gate, need_up, dt](const Tensor& grad) {
        const Tensor go = grad.to(dt).contiguous();
        Tensor dgate = need_gate ? empty(g.shape(), dt) : Tensor();
        Tensor dup = need_up ? empty(u.shape(), dt) : Tensor();
        kernels::cpu::silu_mul_backward(dt, go.data_ptr(), g.data_ptr(), u.data_ptr(),
                                        need_gate ? dgate.data_ptr() : nullptr,
                                        need_up ? dup.data_ptr() : nullptr, go.numel());
        return std::vector<Tensor>{dgate, dup};
      });
}

}  // namespace mantissa
