#pragma once
// Reductions. Accumulation is in fp32 for reduced floats (double for f64) with a fixed
// partition, so results are reproducible for a given thread count.
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa {

Tensor sum(const Tensor& a);  // all elements, 0-dim result
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// amax: maximum over dims (no dims: over all of them, as torch.amax(x)); the gradient is split
// evenly between tied maxima (as PyTorch).
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a);  // maximum of all elements (gradient split between ties)
struct ValuesIndices {
  Tensor values;
  Tensor indices;  // kInt64
};
// max over one dim with the index of the first maximum; the gradient goes to that index.
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);

}  // namespace mantissa
