#pragma once
// What core needs of complex tensors (docs/complex.md): the real dtype of a complex one's
// parts, and the real part of a complex gradient, which is what a real input receives
// (PyTorch's rule when a real tensor feeds a complex computation).
#include "mantissa/core/tensor.h"

namespace mantissa {

// complex64 -> float32, complex128 -> float64; throws for a real dtype.
DType complex_component_dtype(DType complex_dtype);
// float64 -> complex128; every other real floating dtype -> complex64 (complex stays).
DType complex_dtype_for(DType dtype);
// A new contiguous real tensor holding z's real parts (no graph).
Tensor complex_real_part(const Tensor& z);

// torch.view_as_real without autograd: a real view of a contiguous-or-strided complex tensor
// with a last dimension of 2 (real, imaginary), sharing its storage. Optimizers step complex
// parameters through it: their updates act on each part separately.
Tensor complex_as_real_view(const Tensor& z);

}  // namespace mantissa
