#pragma once
// Scatter-style ops: write or add values at indexed positions of a copy of `self`. They run
// in fp32 under autocast (docs/autocast.md, "Ops that stay in fp32"): accumulating many small
// values into a float16 or bfloat16 element loses them, so autocast widens fp16/bf16 inputs
// and the result is fp32. Outside autocast they run in their inputs' dtype; the accumulating
// ones still add in fp32 and round once per element. Indices are int64 or int32; every
// duplicate destination resolves in index order (bit-reproducible). Differentiable in self
// and in the values.
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa {

// torch.scatter: out = self.clone(); for dim 0, out[index[i][j]][j] = src[i][j]. index has
// self's number of dimensions, index.size(d) <= src.size(d) for every d and <= self.size(d)
// for d != dim; src has self's dtype. Duplicate destinations: the last one in index order
// wins, and only it receives a gradient (PyTorch leaves the winner unspecified).
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// torch.scatter_add: as scatter, but out[index[i][j]][j] += src[i][j]; duplicates add up.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// torch.index_add: out = self.clone(); out.select(dim, index[i]) += alpha * source.select(dim, i).
// index is 1-D (or 0-dim) with source.size(dim) entries; source has self's shape elsewhere.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);

// torch.index_put (advanced indexing with integer tensors): out = self.clone(), then
// out[indices[0][k], ..., indices[m-1][k]] = values[k] (or += with accumulate). indices are
// 1-D (or 0-dim) integer tensors indexing self's first m dimensions, all of one length K or
// of length 1 (broadcast); negative indices count from the end. values broadcasts to
// [K] + self.shape[m:]. Without accumulate, the last duplicate wins (and takes the gradient).
Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);

}  // namespace mantissa
