#pragma once
// Joining and indexing ops (cat, stack, index_select, gather). Differentiable.
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa {
// Promotes dtypes like PyTorch's cat. Shapes must match except along `dim`; 1-D tensors with
// zero elements are skipped (PyTorch's legacy rule); 0-dim tensors are rejected.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// All tensors must have the same shape; dim may be in [-(ndim+1), ndim].
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// index: 1-D (or 0-dim) kInt64 / kInt32 indices into `dim`, each in [0, size) (negative
// indices are rejected, as in PyTorch). Backward scatter-adds; duplicates accumulate.
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// torch.gather: out[i][j] = a[index[i][j]][j] for dim 0, etc. index has a's number of
// dimensions and index.size(d) <= a.size(d) for d != dim; the output has index's shape.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
}  // namespace mantissa
