#pragma once
// Shape and stride helpers shared by tensors, views and kernels.
#include <cstdint>
#include <string>
#include <vector>

namespace mantissa {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"
// Wraps a possibly negative dim into [0, ndim); throws "[where] dim d out of range".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* where);
// NumPy/PyTorch broadcasting of two shapes; throws naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where);

}  // namespace mantissa
