#pragma once
// Matrix products. f32 and bf16 run on oneDNN with fp32 accumulation; f16 operands are
// widened and multiplied in fp32; f64 uses a blocked reference kernel.
#include "mantissa/core/tensor.h"

namespace mantissa {

// torch.matmul semantics: 1-D/2-D/batched with broadcasting of batch dimensions.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace mantissa
