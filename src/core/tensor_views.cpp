// Views: new shape/strides/offset over the same storage, each recorded with its backward.
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/inplace.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  impl->device = base.device();
  // The first tensor of the chain: a view of a view still knows the parameter under both.
  std::shared_ptr<TensorImpl> root = base.impl().view_base.lock();
  impl->view_base = root ? root : base.impl_ptr();
  return Tensor(impl);
}

// Resolves one -1 entry and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel, const char* where) {
  Shape out = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MANTISSA_CHECK(infer < 0, where, "only one dimension can be inferred in shape {}",
                     shape_str(requested));
      infer = static_cast<int>(i);
    } else {
      MANTISSA_CHECK(out[i] >= 0, where, "invalid shape {}", shape_str(requested));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    MANTISSA_CHECK(known != 0 && numel % known == 0, where,
                   "shape {} is invalid for input of size {}", shape_str(requested), numel);
    out[infer] = numel / known;
  }
  MANTISSA_CHECK(numel_of(out) == numel, where, "shape {} is invalid for input of size {}",
                 shape_str(requested), numel);
  return out;
}

// Strides for viewing (shape, strides) as new_shape without copying, or empty if impossible
// (the chunk-matching rule PyTorch uses for view()).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  Shape out(new_shape.size());
  if (numel_of(shape) == 0 || shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor reshape_backward_view(const Tensor& self, Tensor out, const char* name) {
  const Shape in_shape = self.shape();
  return autograd::record(out, {self}, name, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape s = infer_shape(requested, numel(), "view");
  auto st = view_strides(shape(), strides(), s);
  MANTISSA_CHECK(st.has_value(), "view",
                 "view size {} is not compatible with input size {} and strides {}; use "
                 "reshape() (which copies) or contiguous() first",
                 shape_str(s), shape_str(shape()), shape_str(strides()));
  return reshape_backward_view(*this, make_view(*this, s, *st, offset()), "ViewBackward");
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape s = infer_shape(requested, numel(), "reshape");
  if (auto st = view_strides(shape(), strides(), s)) {
    return reshape_backward_view(*this, make_view(*this, s, *st, offset()), "ViewBackward");
  }
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten");
  const int64_t e = wrap_dim(end_dim, dim(), "flatten");
  MANTISSA_CHECK(s <= e, "flatten", "start_dim {} must not come after end_dim {}", s, e);
  Shape out(shape().begin(), shape().begin() + s);
  int64_t merged = 1;
  for (int64_t i = s; i <= e; ++i) merged *= shape()[i];
  out.push_back(merged);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  MANTISSA_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute",
                 "number of dims {} does not match the tensor's {} dimensions", dims.size(), dim());
  Shape s(dim()), st(dim());
  std::vector<int64_t> inverse(dim());
  std::vector<bool> seen(dim(), false);
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    MANTISSA_CHECK(!seen[d], "permute", "dimension {} repeated", d);
    seen[d] = true;
    s[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  Tensor out = make_view(*this, s, st, offset());
  return autograd::record(out, {*this}, "PermuteBackward", [inverse](const Tensor& g) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  if (dim() == 0) return *this;
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[wrap_dim(dim0, dim(), "transpose")], p[wrap_dim(dim1, dim(), "transpose")]);
  return permute(p);
}

Tensor Tensor::t() const {
  MANTISSA_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dimensions, got {}", dim());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  MANTISSA_CHECK(step > 0, "slice", "step must be positive, got {}", step);
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] = strides()[d] * step;
  Tensor out = make_view(*this, s, st, offset() + start * strides()[d]);
  const Shape in_shape = shape();
  return autograd::record(out, {*this}, "SliceBackward",
                          [in_shape, d, start, end, step](const Tensor& g) {
                            Tensor z = zeros(in_shape, g.dtype(), g.device());
                            mantissa::detail::copy_unchecked(z.slice(d, start, end, step), g);
                            return std::vector<Tensor>{z};
                          });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  MANTISSA_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow",
                 "start {} + length {} exceeds dimension {} of size {}", start, length, d, n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[d];
  MANTISSA_CHECK(index >= -n && index < n, "select",
                 "index {} is out of bounds for dimension {} with size {}", index, d, n);
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  MANTISSA_CHECK(static_cast<int64_t>(target.size()) >= dim(), "expand",
                 "the number of sizes {} must be >= the tensor's dimensions {}", shape_str(target),
                 shape_str(shape()));
  const size_t lead = target.size() - shape().size();
  Shape s(target.size()), st(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      MANTISSA_CHECK(target[i] >= 0, "expand", "cannot use -1 for a new leading dimension");
      s[i] = target[i];
      continue;
    }
    const int64_t cur = shape()[i - lead];
    const int64_t want = target[i] == -1 ? cur : target[i];
    MANTISSA_CHECK(cur == want || cur == 1, "expand",
                   "the expanded size {} must match the existing size {} at dimension {} "
                   "(target {}, tensor {})",
                   want, cur, i, shape_str(target), shape_str(shape()));
    s[i] = want;
    st[i] = cur == want ? strides()[i - lead] : 0;
  }
  Tensor out = make_view(*this, s, st, offset());
  const Shape in_shape = shape();
  return autograd::record(out, {*this}, "ExpandBackward", [in_shape](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t v : shape())
    if (v != 1) s.push_back(v);
  return reshape(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return reshape_backward_view(*this, make_view(*this, s, st, offset()), "SqueezeBackward");
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape(), st = strides();
  const int64_t new_stride = d < dim() ? strides()[d] * shape()[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return reshape_backward_view(*this, make_view(*this, s, st, offset()), "UnsqueezeBackward");
}

}  // namespace mantissa
