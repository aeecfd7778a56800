// Bulk stochastic rounding for the optimizer's half-precision parameter writes.
#include "optim/stochastic_round.h"

#include "mantissa/core/error.h"

namespace mantissa::optim {

void stochastic_round_buffer(const float* src, DType to, uint16_t* dst, int64_t n, uint64_t key,
                             uint64_t first_index) {
  if (to == kBFloat16) {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = stochastic_round_bf16(src[i], sr_bits(key, first_index + static_cast<uint64_t>(i)));
  } else if (to == kFloat16) {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = stochastic_round_f16(src[i], sr_bits(key, first_index + static_cast<uint64_t>(i)));
  } else {
    fail("stochastic_round", "rounds to bfloat16 or float16, got {}", to.name());
  }
}

}  // namespace mantissa::optim
