#pragma once
// Table lookup (torch.nn.functional.embedding).
#include "mantissa/core/tensor.h"

namespace mantissa {

// weight: (num_embeddings, dim) floating; indices: any shape, kInt64 or kInt32, each in
// [0, num_embeddings) (a bad index throws naming it and its position). Returns
// indices.shape() + [dim] in weight's dtype. The gradient of weight is a scatter-add of the
// output gradient rows (repeated indices accumulate), summed in fp32 (f64 for f64) and
// rounded once.
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace mantissa
