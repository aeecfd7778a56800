#pragma once
// silu(gate) * up, the SwiGLU product, over n contiguous elements of one float dtype
// (float32, bfloat16, float16), with the roundings of mul(silu(gate), up): silu rounded to the
// dtype, then the product rounded (silu_mul.cpp).
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels::cpu {

void silu_mul_forward(DType dtype, const void* gate, const void* up, void* out, int64_t n);

// The gradients of mul(silu(gate), up) from the output's gradient go: dup = go * silu(gate)
// and dgate = silu'(gate) * (go * up), each product rounded to the dtype as the composed graph
// rounds it. Either output may be null (not wanted).
void silu_mul_backward(DType dtype, const void* go, const void* gate, const void* up, void* dgate,
                       void* dup, int64_t n);

}  // namespace mantissa::kernels::cpu
