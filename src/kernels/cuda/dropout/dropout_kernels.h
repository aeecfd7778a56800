#pragma once
// dropout on a GPU (dropout_kernels.cu). The keep-mask comes from a counter-based hash of
// (seed, element index), not from the CPU Generator's stream: for one seed the GPU's masks
// differ from the CPU's (as torch's CUDA and CPU dropout masks do). Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// mask[i] = u(seed, i) >= p (u uniform in [0, 1), 53 bits), 1 or 0.
void launch_dropout_mask(uint8_t* mask, uint64_t seed, double p, int64_t n);
// out[i] = mask[i] ? x[i] * scale : 0, in the arithmetic type, rounded once; x contiguous.
void launch_apply_mask(const void* x, const uint8_t* mask, double scale, void* out, Scalar type,
                       int64_t n);

}  // namespace mantissa::cuda::detail
