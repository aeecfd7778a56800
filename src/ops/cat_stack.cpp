// cat and stack. The output is allocated once in the promoted dtype and each input is copied
// (and cast) into its slice with copy_; the backward hands each input its slice of the
// gradient.
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/inplace.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/shape_ops.h"

namespace mantissa {
namespace {

// PyTorch keeps a legacy rule: 1-D tensors with zero elements are skipped whatever the other
// shapes are (so `cat({empty({0}), x})` works for any x).
bool legacy_skipped(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  MANTISSA_PROFILE_OP("cat_stack");
  MANTISSA_AUTOCAST("cat", cat, tensors, dim);
  constexpr const char* kName = "cat";
  MANTISSA_CHECK(!tensors.empty(), kName, "expected a non-empty list of tensors");
  DType dt = tensors[0].dtype();
  int64_t ref = -1;  // first tensor that takes part in the shape check
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MANTISSA_CHECK(t.defined(), kName, "tensor {} is undefined", i);
    MANTISSA_CHECK(t.dim() > 0, kName,
                   "zero-dimensional tensor (at position {}) cannot be concatenated", i);
    if (i > 0) dt = promote_types(dt, t.dtype());
    if (ref < 0 && !legacy_skipped(t)) ref = static_cast<int64_t>(i);
  }
  if (ref < 0) {
    // Every input is a legacy empty 1-D tensor: the result is one too.
    wrap_dim(dim, 1, kName);
    Tensor out = empty({0}, dt);
    return autograd::record(out, tensors, "CatBackward", [n = tensors.size()](const Tensor& g) {
      return std::vector<Tensor>(n, zeros({0}, g.dtype()));
    });
  }
  const Shape& rs = tensors[ref].shape();
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(rs.size()), kName);
  Shape out_shape = rs;
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (legacy_skipped(t)) continue;
    bool ok = t.dim() == static_cast<int64_t>(rs.size());
    for (int64_t k = 0; ok && k < t.dim(); ++k) ok = k == d || t.shape()[k] == rs[k];
    MANTISSA_CHECK(ok, kName,
                   "sizes of tensors must match except in dimension {}: tensor {} has shape {} "
                   "but tensor {} has shape {}",
                   d, ref, shape_str(rs), i, shape_str(t.shape()));
    out_shape[d] += t.shape()[d];
  }

  // The output lives on the inputs' device (a GPU cat stays on the GPU); mixing devices is
  // PyTorch's error.
  const Device device = tensors[ref].device();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (legacy_skipped(tensors[i])) continue;
    MANTISSA_CHECK(tensors[i].device() == device, kName,
                   "expected all tensors to be on the same device, but found at least two "
                   "devices, {} and {}",
                   device.str(), tensors[i].device().str());
  }
  Tensor out = empty(out_shape, dt, device);
  std::vector<int64_t> starts(tensors.size(), 0), sizes(tensors.size(), 0);
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (legacy_skipped(tensors[i])) continue;
    starts[i] = offset;
    sizes[i] = tensors[i].shape()[d];
    if (sizes[i] > 0)
      mantissa::detail::copy_unchecked(out.narrow(d, offset, sizes[i]), tensors[i]);  // casts to dt
    offset += sizes[i];
  }
  std::vector<bool> skipped(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) skipped[i] = legacy_skipped(tensors[i]);
  return autograd::record(
      out, tensors, "CatBackward", [d, starts, sizes, skipped](const Tensor& g) {
        std::vector<Tensor> grads(starts.size());
        for (size_t i = 0; i < starts.size(); ++i)
          grads[i] = skipped[i] ? zeros({0}, g.dtype()) : g.narrow(d, starts[i], sizes[i]);
        return grads;
      });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  MANTISSA_PROFILE_OP("cat_stack");
  MANTISSA_AUTOCAST("stack", stack, tensors, dim);
  constexpr const char* kName = "stack";
  MANTISSA_CHECK(!tensors.empty(), kName, "expected a non-empty list of tensors");
  const Shape& s0 = tensors[0].shape();
  for (size_t i = 1; i < tensors.size(); ++i) {
    MANTISSA_CHECK(tensors[i].shape() == s0, kName,
                   "stack expects each tensor to be equal size, but got {} at entry 0 and {} at "
                   "entry {}",
                   shape_str(s0), shape_str(tensors[i].shape()), i);
  }
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s0.size()) + 1, kName);
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
  return cat(expanded, d);
}

}  // namespace mantissa
