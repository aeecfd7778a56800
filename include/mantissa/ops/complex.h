#pragma once
// Complex tensors (complex64, complex128; docs/complex.md). Besides these ops, add, sub, mul,
// div (tensor-tensor and with a real number), matmul (2-D) and abs accept complex tensors;
// a real operand is promoted (float64 pairs with complex128). Gradients follow PyTorch's
// convention: for a real loss L of z = x + iy, z.grad() is dL/dx + i dL/dy (the conjugate
// Wirtinger derivative, times two), so `z -= lr * z.grad()` descends.
#include "mantissa/core/tensor.h"

namespace mantissa {

// torch.complex: real + i * imag; float32 parts give complex64, float64 parts complex128.
Tensor complex(const Tensor& real, const Tensor& imag);
// The real and imaginary parts (a real tensor of the component dtype; new memory).
Tensor real(const Tensor& z);
Tensor imag(const Tensor& z);
// The complex conjugate (a real tensor is returned as it is).
Tensor conj(const Tensor& z);
// The argument in (-pi, pi], a real tensor; angle(0) = 0.
Tensor angle(const Tensor& z);

}  // namespace mantissa
