#pragma once
// Shape and stride helpers shared by tensors, views and kernels.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace mantissa {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"
// Writes shape_str(shape): `std::cout << t.shape()` prints "[2, 3]". Shape is an alias of
// std::vector<int64_t>, whose only associated namespace is std, so argument-dependent lookup
// does not find this operator: it is found by ordinary lookup, in code inside namespace mantissa
// (but not in a nested namespace that declares an operator<< of its own) or after
// `using namespace mantissa;` or `using mantissa::operator<<;`.
std::ostream& operator<<(std::ostream& os, const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws "[where] dim d out of range".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* where);
// NumPy/PyTorch broadcasting of two shapes; throws naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where);

}  // namespace mantissa
