#pragma once
// dropout's CUDA branch (dropout_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h). GPU masks come from a hash of a seed drawn once per call from the
// Generator and the element index, so they differ from the CPU's masks for the same seed.
#include <cstdint>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// A uint8 keep-mask of x's shape on x's GPU: 1 with probability 1 - p.
Tensor dropout_mask(const Tensor& x, uint64_t seed, double p);
// mask ? x * scale : 0 in x's dtype (x any layout; the mask contiguous of x's shape).
Tensor apply_mask(const Tensor& x, const Tensor& mask, double scale);

}  // namespace mantissa::kernels::gpu
