#include "mantissa/core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

#include "mantissa/core/error.h"

namespace mantissa {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    // A product past int64 would wrap (to 0 for [2^33, 2^31]) and every loop would then index
    // an allocation of the wrong size.
    MANTISSA_CHECK(!__builtin_mul_overflow(n, s, &n), "shape",
                   "shape {} has more elements than an int64 counts", shape_str(shape));
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    // Past int64 only for a shape with a zero dim (numel_of refuses the others): [0, 2^62, 2^62].
    MANTISSA_CHECK(!__builtin_mul_overflow(s, std::max<int64_t>(shape[i], 1), &s), "shape",
                   "shape {} is too large: its strides overflow int64", shape_str(shape));
  }
  return strides;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* where) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  if (dim < -n || dim >= n) {
    fail(where, "dimension {} out of range for a tensor with {} dimensions (expected {} to {})",
         dim, ndim, -n, n - 1);
  }
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(where, "shapes {} and {} cannot be broadcast together (dimension {}: {} vs {})",
           shape_str(a), shape_str(b), i, da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace mantissa
