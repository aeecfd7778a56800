#pragma once
// Joining and indexing ops (cat, stack, index_select, gather). Differentiable.
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa {
// Promotes dtypes like PyTorch's cat.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// index: 1-D kInt64 (or kInt32) indices into `dim`.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// torch.gather: out[i][j] = a[index[i][j]][j] for dim 0, etc.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
}  // namespace mantissa
