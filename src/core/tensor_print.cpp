// PyTorch-like printing: nested brackets, 4 decimals for floats, "..." past 6 items per
// dimension when the tensor is large, and the dtype/grad_fn suffix.
#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "mantissa/autograd/node.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

void print_rec(std::string& out, const std::vector<double>& v, const Shape& shape,
               const Shape& strides, int64_t dim, int64_t base, bool floating, bool summarize,
               int indent) {
  if (dim == static_cast<int64_t>(shape.size())) {
    const double x = v[base];
    if (!floating)
      out += fmt::format("{}", static_cast<int64_t>(x));
    else if (std::isnan(x))
      out += "nan";
    else if (std::isinf(x))
      out += x > 0 ? "inf" : "-inf";
    else
      out += fmt::format("{:.4f}", x);
    return;
  }
  out += '[';
  const int64_t n = shape[dim];
  const bool last = dim + 1 == static_cast<int64_t>(shape.size());
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      out += last ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
      i = n - kEdgeItems;
    }
    print_rec(out, v, shape, strides, dim + 1, base + i * strides[dim], floating, summarize,
              indent + 1);
    if (i + 1 < n) out += last ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
  }
  out += ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  // The values go through double, which a complex tensor refuses to become (that error would
  // name a conversion the caller never asked for).
  if (dtype().is_complex())
    fail("print", "not supported for complex tensors (dtype {}): print real() and imag()",
         dtype().name());
  const std::vector<double> v = to_vector<double>();
  std::string out = "tensor(";
  print_rec(out, v, shape(), contiguous_strides(shape()), 0, 0, is_floating_point(),
            numel() > kSummarizeAbove, 7);
  if (dtype() != kFloat32 && dtype() != kInt64) out += fmt::format(", dtype={}", dtype().name());
  if (grad_fn())
    out += fmt::format(", grad_fn=<{}>", grad_fn()->name());
  else if (requires_grad())
    out += ", requires_grad=True";
  out += ')';
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }
std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype.name(); }

}  // namespace mantissa
