// scatter, scatter_add, index_add and index_put. Each op turns its indices into element
// offsets into a contiguous copy of self, then moves or accumulates values there with the
// loops of kernels/cpu/scatter. Backward reuses the same offsets: the gradient of the values
// is the output gradient read back at the written positions, the gradient of self is the
// output gradient with overwritten positions zeroed (nothing zeroed when accumulating).
#include "mantissa/ops/scatter.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/scatter/scatter_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/ops/elementwise.h"

namespace mantissa {
namespace {

// Indices as int64 (a contiguous copy), after checking the dtype.
std::vector<int64_t> index_values(const Tensor& index, const char* name) {
  MANTISSA_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, name,
                 "index must be int64 or int32, got {}", index.dtype().name());
  return index.to(kInt64).contiguous().to_vector<int64_t>();
}

void check_in_range(const std::vector<int64_t>& idx, int64_t size, int64_t dim, const char* name) {
  for (int64_t v : idx)
    MANTISSA_CHECK(v >= 0 && v < size, name,
                   "index {} is out of bounds for dimension {} with size {}", v, dim, size);
}

void check_same_dtype(const Tensor& self, const Tensor& values, const char* what,
                      const char* name) {
  MANTISSA_CHECK(values.dtype() == self.dtype(), name,
                 "{} dtype {} must match self dtype {} (cast one of them with .to(), or run "
                 "under autocast, which widens both to float32)",
                 what, values.dtype().name(), self.dtype().name());
}

std::vector<int64_t> iota_offsets(int64_t n) {
  std::vector<int64_t> off(static_cast<size_t>(n));
  std::iota(off.begin(), off.end(), int64_t{0});
  return off;
}

// The positions one op call wrote: out_off[p] receives values[in_off[p]].
struct Writes {
  std::vector<int64_t> out_off, in_off;
  std::vector<uint8_t> last;  // non-accumulating ops: which pair's value survived
  int64_t n() const { return static_cast<int64_t>(out_off.size()); }
};

// Forward on detached contiguous tensors: out = self with the values written or added.
Tensor apply_writes(const Tensor& self, const Tensor& values_c, const Writes& w, bool accumulate,
                    double alpha) {
  Tensor out = self.detach().clone();
  if (accumulate) {
    kernels::accumulate_elements(out.dtype(), out.data_ptr(), out.numel(), w.out_off.data(),
                                 values_c.data_ptr(), w.in_off.data(), w.n(), alpha);
  } else {
    kernels::move_elements(out.data_ptr(), w.out_off.data(), values_c.data_ptr(), w.in_off.data(),
                           w.n(), out.element_size());
  }
  return out;
}

// Records the node: gradients for self and for the values (shape `values_shape` before any
// broadcast, `full_shape` after it).
Tensor record_writes(const Tensor& out, const Tensor& self, const Tensor& values,
                     std::shared_ptr<Writes> w, bool accumulate, double alpha, Shape full_shape,
                     const char* node_name) {
  if (!autograd::needs_grad(self, values)) return out;
  if (!accumulate) w->last = kernels::last_writers(w->out_off.data(), w->n(), out.numel());
  const Shape values_shape = values.shape();
  auto backward = [w, accumulate, alpha, full_shape, values_shape](const Tensor& grad) {
    Tensor g = grad.contiguous();
    Tensor dself = g;
    if (!accumulate) {
      dself = g.detach().clone();
      kernels::zero_elements(dself.data_ptr(), w->out_off.data(), w->n(), dself.element_size());
    }
    Tensor dvalues = zeros(full_shape, g.dtype());
    kernels::move_elements(dvalues.data_ptr(), w->in_off.data(), g.data_ptr(), w->out_off.data(),
                           w->n(), g.element_size(), accumulate ? nullptr : w->last.data());
    if (alpha != 1.0) dvalues = mul(dvalues, alpha);
    if (full_shape != values_shape) dvalues = sum_to(dvalues, values_shape);
    return std::vector<Tensor>{dself, dvalues};
  };
  return autograd::record(out, {self, values}, node_name, backward);
}

Tensor scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    bool accumulate, const char* name, const char* node_name) {
  const int64_t nd = self.dim();
  MANTISSA_CHECK(nd >= 1, name,
                 "self must have at least one dimension (reshape a 0-dim "
                 "tensor to [1])");
  MANTISSA_CHECK(index.dim() == nd && src.dim() == nd, name,
                 "self {}, index {} and src {} must have the same number of dimensions",
                 shape_str(self.shape()), shape_str(index.shape()), shape_str(src.shape()));
  check_same_dtype(self, src, "src", name);
  const int64_t d = wrap_dim(dim, nd, name);
  for (int64_t q = 0; q < nd; ++q) {
    MANTISSA_CHECK(index.size(q) <= src.size(q), name,
                   "index shape {} exceeds src shape {} in dimension {}", shape_str(index.shape()),
                   shape_str(src.shape()), q);
    MANTISSA_CHECK(q == d || index.size(q) <= self.size(q), name,
                   "index shape {} exceeds self shape {} in dimension {}", shape_str(index.shape()),
                   shape_str(self.shape()), q);
  }
  const std::vector<int64_t> idx = index_values(index, name);
  check_in_range(idx, self.size(d), d, name);
  auto w = std::make_shared<Writes>();
  w->out_off =
      kernels::scatter_offsets(index.shape(), idx.data(), d, contiguous_strides(self.shape()));
  w->in_off = kernels::scatter_offsets(index.shape(), nullptr, d, contiguous_strides(src.shape()));
  Tensor src_c = src.detach().contiguous();
  Tensor out = apply_writes(self, src_c, *w, accumulate, 1.0);
  return record_writes(out, self, src, std::move(w), accumulate, 1.0, src.shape(), node_name);
}

}  // namespace

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  MANTISSA_AUTOCAST("scatter", scatter, self, dim, index, src);
  return scatter_impl(self, dim, index, src, false, "scatter", "ScatterBackward");
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  MANTISSA_AUTOCAST("scatter_add", scatter_add, self, dim, index, src);
  return scatter_impl(self, dim, index, src, true, "scatter_add", "ScatterAddBackward");
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha) {
  MANTISSA_AUTOCAST("index_add", index_add, self, dim, index, source, alpha);
  constexpr const char* kName = "index_add";
  const int64_t nd = self.dim();
  MANTISSA_CHECK(nd >= 1, kName, "self must have at least one dimension");
  MANTISSA_CHECK(index.dim() <= 1, kName, "index must be 1-D, got shape {}",
                 shape_str(index.shape()));
  MANTISSA_CHECK(source.dim() == nd, kName,
                 "source shape {} must have as many dimensions as self shape {}",
                 shape_str(source.shape()), shape_str(self.shape()));
  check_same_dtype(self, source, "source", kName);
  const int64_t d = wrap_dim(dim, nd, kName);
  const std::vector<int64_t> idx = index_values(index, kName);
  const int64_t k = static_cast<int64_t>(idx.size());
  for (int64_t q = 0; q < nd; ++q) {
    MANTISSA_CHECK(source.size(q) == (q == d ? k : self.size(q)), kName,
                   "source shape {} must equal self shape {} except in dimension {}, where it "
                   "must be the number of indices ({})",
                   shape_str(source.shape()), shape_str(self.shape()), d, k);
  }
  check_in_range(idx, self.size(d), d, kName);
  // Every source element's destination index along d.
  int64_t inner = 1;
  for (int64_t q = d + 1; q < nd; ++q) inner *= source.size(q);
  const int64_t n = source.numel();
  std::vector<int64_t> idx_full(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) idx_full[p] = idx[(p / inner) % std::max<int64_t>(k, 1)];
  auto w = std::make_shared<Writes>();
  w->out_off = kernels::scatter_offsets(source.shape(), idx_full.data(), d,
                                        contiguous_strides(self.shape()));
  w->in_off = iota_offsets(n);
  Tensor source_c = source.detach().contiguous();
  Tensor out = apply_writes(self, source_c, *w, true, alpha);
  return record_writes(out, self, source, std::move(w), true, alpha, source.shape(),
                       "IndexAddBackward");
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  MANTISSA_AUTOCAST("index_put", index_put, self, indices, values, accumulate);
  constexpr const char* kName = "index_put";
  const int64_t nd = self.dim();
  const int64_t m = static_cast<int64_t>(indices.size());
  MANTISSA_CHECK(m >= 1 && m <= nd, kName,
                 "expected between 1 and {} index tensors (one per leading dimension of self "
                 "shape {}), got {}",
                 nd, shape_str(self.shape()), m);
  check_same_dtype(self, values, "values", kName);
  // The indices, each wrapped into [0, size) and broadcast to one length k.
  std::vector<std::vector<int64_t>> idx(static_cast<size_t>(m));
  int64_t k = 1;
  for (int64_t q = 0; q < m; ++q) {
    MANTISSA_CHECK(indices[q].defined() && indices[q].dim() <= 1, kName,
                   "index {} must be a 1-D integer tensor", q);
    idx[q] = index_values(indices[q], kName);
    const int64_t len = static_cast<int64_t>(idx[q].size());
    if (len != 1) {
      MANTISSA_CHECK(k == 1 || len == k, kName,
                     "index tensors must have one length (or length 1), got {} and {}", k, len);
      k = len;
    }
    const int64_t size = self.size(q);
    for (int64_t& v : idx[q]) {
      MANTISSA_CHECK(v >= -size && v < size, kName,
                     "index {} is out of bounds for dimension {} with size {}", v, q, size);
      if (v < 0) v += size;
    }
  }
  if (std::any_of(idx.begin(), idx.end(), [](const auto& v) { return v.empty(); })) k = 0;
  Shape full_shape{k};
  int64_t inner = 1;
  for (int64_t q = m; q < nd; ++q) {
    full_shape.push_back(self.size(q));
    inner *= self.size(q);
  }
  MANTISSA_CHECK(values.dim() <= static_cast<int64_t>(full_shape.size()), kName,
                 "values shape {} does not broadcast to the indexed shape {}",
                 shape_str(values.shape()), shape_str(full_shape));
  for (int64_t i = 1; i <= values.dim(); ++i) {
    const int64_t v = values.size(values.dim() - i), f = full_shape[full_shape.size() - i];
    MANTISSA_CHECK(v == f || v == 1, kName,
                   "values shape {} does not broadcast to the indexed shape {}",
                   shape_str(values.shape()), shape_str(full_shape));
  }
  const Shape strides = contiguous_strides(self.shape());
  auto w = std::make_shared<Writes>();
  w->out_off.resize(static_cast<size_t>(k * inner));
  for (int64_t j = 0; j < k; ++j) {
    int64_t base = 0;
    for (int64_t q = 0; q < m; ++q) base += idx[q][idx[q].size() == 1 ? 0 : j] * strides[q];
    for (int64_t r = 0; r < inner; ++r) w->out_off[j * inner + r] = base + r;
  }
  w->in_off = iota_offsets(k * inner);
  Tensor values_c = values.detach().expand(full_shape).contiguous();
  Tensor out = apply_writes(self, values_c, *w, accumulate, 1.0);
  return record_writes(out, self, values, std::move(w), accumulate, 1.0, full_shape,
                       accumulate ? "IndexPutAccumulateBackward" : "IndexPutBackward");
}

}  // namespace mantissa
