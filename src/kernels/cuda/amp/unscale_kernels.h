#pragma once
// GradScaler's non-finite check and unscale on a GPU (unscale_kernels.cu), behind
// amp::foreach_non_finite_check_and_unscale_ (kernels/cpu/amp/unscale_kernel.h). Plain
// declarations: included by the .cu and by the device-neutral entry point.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// Over count contiguous tensors of one type (data[i], n[i] elements): sets *found_inf = 1.0f
// when an element is +-inf or NaN, and writes back v * inv (inv = *inv_scale converted to the
// arithmetic type, fp32 for f16/bf16; nothing written when *inv_scale == 1). Both scalars stay
// on the device: nothing is read back. Many tensors per launch (up to 64: their pointers travel
// in the kernel's parameters; each block takes a chunk of one tensor), so a step's gradients
// take one pass in a few launches. False (nothing launched) for a type other than
// f64/f32/f16/bf16.
bool launch_non_finite_check_and_unscale_multi(void* const* data, const int64_t* n, int64_t count,
                                               Scalar type, float* found_inf,
                                               const float* inv_scale);

}  // namespace mantissa::cuda::detail
