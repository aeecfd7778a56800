// PyTorch-like printing: nested brackets, 4 decimals for floats, "..." past 6 items per
// dimension when the tensor is large, and the dtype/grad_fn suffix.
#include <fmt/format.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

void print_value(std::string& out, double x, bool floating) {
  if (!floating)
    out += fmt::format("{}", static_cast<int64_t>(x));
  else if (std::isnan(x))
    out += "nan";
  else if (std::isinf(x))
    out += x > 0 ? "inf" : "-inf";
  else
    out += fmt::format("{:.4f}", x);
}

// Iterative, with one small frame per open bracket on the heap: a tensor may have any rank (a
// file or a program can make one of rank 100,000 holding one element), and a recursion per
// dimension ran out of stack near rank 60,000. `indent` is the column of the outermost '['.
void print_nested(std::string& out, const std::vector<double>& v, const Shape& shape, bool floating,
                  bool summarize, int64_t indent) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (ndim == 0) {
    print_value(out, v[0], floating);
    return;
  }
  const Shape strides = contiguous_strides(shape);
  struct Frame {
    int64_t base;  // offset of this bracket's first element in v
    int64_t i;     // the next index along this bracket's dimension
  };
  std::vector<Frame> open{{0, 0}};
  out += '[';
  while (!open.empty()) {
    const int64_t dim = static_cast<int64_t>(open.size()) - 1;
    Frame& f = open.back();
    const int64_t n = shape[dim];
    if (f.i == n) {
      out += ']';
      open.pop_back();
      continue;
    }
    const bool last = dim + 1 == ndim;
    // Between items: ", " inside the innermost dimension, else a newline aligned under '['.
    const auto separator = [&] {
      out += last ? ", " : fmt::format(",\n{:{}}", "", indent + dim + 1);
    };
    if (f.i > 0) separator();
    if (summarize && n > 2 * kEdgeItems && f.i == kEdgeItems) {
      out += "...";
      separator();
      f.i = n - kEdgeItems;
    }
    const int64_t child = f.base + f.i * strides[dim];
    ++f.i;
    if (last) {
      print_value(out, v[child], floating);
    } else {
      out += '[';
      open.push_back({child, 0});  // f is not used past this point (push_back may move it)
    }
  }
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
  print_nested(out, v, shape(), is_floating_point(), numel() > kSummarizeAbove, 7);
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
