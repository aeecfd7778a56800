#pragma once
// Column sums of a 2-D tensor, the bias gradient of linear.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels {

// Sums a (rows, n) tensor over its rows into a new (n) tensor of the same floating dtype, so
// the result does not depend on the thread count: up to 256 rows are summed in row order (the
// order of sum(g, {0})); more go in chunks of 64 (whatever the threads), each chunk summed in
// row order into its own acc_t partial, and the partials are added in chunk order before one
// rounding into the dtype.
Tensor sum_rows(const Tensor& g2);

// The float32 column sums of a CPU (rows, n) float32, bfloat16 or float16 tensor, each column
// summed in row order from +0 in fp32 (the order of sum(g2.to(kFloat32), {0}) for n > 1, so its
// bits), reading g2 in its own dtype: no float32 copy of g2 is made. Columns are split between
// threads, rows never. The bias gradient of the scaled FP8 recipes (fp8/scaled_linear.h).
Tensor sum_rows_f32_in_row_order(const Tensor& g2);

}  // namespace mantissa::kernels
