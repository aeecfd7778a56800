#pragma once
// embedding on a GPU (embedding_kernels.cu). Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// out[i, :] = weight[idx[i], :] for count indices into a table of num rows of dim elements of
// elem_bytes (2, 4 or 8) each; weight and out contiguous. The host checks the indices, except
// inside a CUDA graph capture: there an index out of range gives a row of NaN.
void launch_embedding_forward(const void* weight, const int64_t* idx, void* out, int64_t count,
                              int64_t num, int64_t dim, int elem_bytes);
// acc[idx[i], :] += g[i, :] with atomic adds into acc, of the arithmetic type (float for
// f32/f16/bf16, double for f64); g of `type`. Repeated indices add in no fixed order; indices
// out of range (unchecked, as above) add nothing.
void launch_embedding_backward(const void* g, Scalar type, const int64_t* idx, void* acc,
                               int64_t count, int64_t num, int64_t dim);

}  // namespace mantissa::cuda::detail
