#pragma once
// The elementwise maps of kernels/cpu/elementwise/elementwise_maps.h with an op code in front:
// on the CPU they run the lambda, and when an operand is on a GPU the GPU kernel that op code
// names (kernels/cuda/elementwise/elementwise_kernels.h, through the table of gpu_kernels.h)
// instead, with the same dtype rules. The ops call these, so a GPU branch is one argument at
// each map call.
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/device_check.h"
#include "kernels/gpu_kernels.h"

namespace mantissa::kernels {

template <typename F>
Tensor binary_map(const char* op, EwOp code, const Tensor& a, const Tensor& b, DType dt, F f,
                  double p0 = 1.0) {
  if (gpu::any_cuda({&a, &b})) return gpu_kernels().map(op, code, {a, b}, dt, dt, p0, 0, nullptr);
  return binary_map(op, a, b, dt, f);
}

template <typename F>
Tensor unary_map(const char* op, EwOp code, const Tensor& a, DType dt, F f, double p0 = 0,
                 double p1 = 0) {
  if (a.is_cuda()) return gpu_kernels().map(op, code, {a}, dt, dt, p0, p1, nullptr);
  return unary_map(op, a, dt, f);
}

template <typename F>
Tensor float_map(const char* op, EwOp code, const Tensor& a, F f) {
  if (a.is_cuda()) {
    const DType dt = float_result_type(a.dtype());
    return gpu_kernels().map(op, code, {a}, dt, dt, 0, 0, nullptr);
  }
  return float_map(op, a, f);
}

// g * f'(x) (code: the kernel's (g, x) form), in g's dtype.
template <typename F>
Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, F f, double p0 = 0, double p1 = 0) {
  if (gpu::any_cuda({&g, &x})) return gpu_kernels().unary_grad_map(code, g, x, p0, p1);
  return grad_map(g, x, f);
}

// f(g, x, y) in g's dtype, summed back to to_shape.
template <typename F>
Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, const Tensor& y, const Shape& to_shape,
                F f) {
  if (gpu::any_cuda({&g, &x, &y})) return gpu_kernels().binary_grad_map(code, g, x, y, to_shape);
  return grad_map(g, x, y, to_shape, f);
}

}  // namespace mantissa::kernels
