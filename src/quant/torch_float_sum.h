#pragma once
// float32 sum and mean of a contiguous array in the order PyTorch's CPU kernel adds (single
// thread, 8-lane AVX2 vectors): the double-quantization offset bitsandbytes stores is
// torch.mean(absmax), and reproducing its last bit makes our files byte-identical to theirs.
// With several threads torch splits arrays above 32768 elements differently, so for such
// sizes bitsandbytes' own result depends on its thread count (docs/quantization.md).
#include <cstdint>

namespace mantissa::quant::detail {

float torch_sum_f32(const float* x, int64_t n);
float torch_mean_f32(const float* x, int64_t n);  // torch_sum_f32(x, n) / float(n)

}  // namespace mantissa::quant::detail
