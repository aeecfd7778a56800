// Tensor members: metadata, autograd plumbing, copies and casts. Views are in tensor_views.cpp.
#include "mantissa/core/tensor.h"

#include "mantissa/core/managed_precision.h"

#include <execinfo.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/complex_parts.h"
#include "core/cuda/tensor_transfer.h"
#include "core/inplace.h"
#include "core/strided_loops.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/op_profiler.h"

namespace mantissa {

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "Tensor::size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "Tensor::stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

namespace {
// MANTISSA_BACKTRACE=1: where host code met a GPU tensor, for finding the op that lacks a CUDA
// kernel when it runs outside any op (frames as binary(+offset): `addr2line -f -C -e BINARY
// OFFSET` names them, also for a stripped copy of the same build).
void print_backtrace_if_asked() {
  const char* v = std::getenv("MANTISSA_BACKTRACE");
  if (v == nullptr || *v == '\0' || *v == '0') return;
  void* frames[48];
  const int n = ::backtrace(frames, 48);
  ::backtrace_symbols_fd(frames, n, 2);
}
}  // namespace

void* Tensor::data_ptr() const {
  if (is_cuda()) {
    print_backtrace_if_asked();
    const std::string_view op = profiling::current_op();
    fail("Tensor::data_ptr",
         "a tensor on {} reached host code{}, which cannot read GPU memory: {} has no CUDA kernel "
         "yet (docs/cuda.md lists those that do); move the tensor with to(kCPU) for it",
         device().str(), op.empty() ? "" : fmt::format(" in {}", op),
         op.empty() ? std::string("this operation") : std::string(op));
  }
  return device_ptr();
}

void* Tensor::device_ptr() const {
  const auto& st = impl().storage;
  if (!st || st->data() == nullptr) return nullptr;
  return static_cast<char*>(st->data()) + impl().offset * static_cast<int64_t>(element_size());
}

Tensor& Tensor::requires_grad_(bool value) {
  MANTISSA_CHECK(!value || is_floating_point() || dtype().is_complex(), "requires_grad_",
                 "only tensors of floating point or complex dtype can require gradients (got {})",
                 dtype().name());
  MANTISSA_CHECK(is_leaf() || value, "requires_grad_",
                 "you can only change requires_grad of leaf tensors; use detach() on a non-leaf");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    MANTISSA_CHECK(g.shape() == shape(), "set_grad",
                   "gradient shape {} differs from tensor shape {}", shape_str(g.shape()),
                   shape_str(shape()));
  }
  impl().grad = g.impl_ptr();
}

void Tensor::reset_grad() const { impl().grad.reset(); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    MANTISSA_CHECK(numel() == 1, "backward",
                   "grad can be implicitly created only for scalar outputs (this tensor has "
                   "shape {}); pass a gradient tensor",
                   shape_str(shape()));
    g = ones(shape(), dtype(), device());
  }
  autograd::run_backward({*this}, {g}, retain_graph);
}

Tensor Tensor::detach() const {
  auto out = std::make_shared<TensorImpl>();
  out->storage = impl().storage;
  out->offset = impl().offset;
  out->shape = impl().shape;
  out->strides = impl().strides;
  out->dtype = impl().dtype;
  out->device = impl().device;
  return Tensor(out);
}

namespace {
// A contiguous copy of t in its own dtype (no autograd).
Tensor contiguous_copy(const Tensor& t) {
  if (t.is_cuda()) return detail::cuda_contiguous_as(t, t.dtype());
  Tensor out = empty(t.shape(), t.dtype());
  kernels::strided_copy(t.data_ptr(), t.strides(), out.data_ptr(), out.strides(), t.shape(),
                        t.element_size());
  return out;
}
}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = contiguous_copy(*this);
  return autograd::record(out, {*this}, "ContiguousBackward",
                          [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::clone() const {
  Tensor out = contiguous_copy(*this);
  return autograd::record(out, {*this}, "CloneBackward",
                          [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  if (requires_grad() && is_leaf() && managed_precision() != nullptr) {
    warn_if_cast_by_hand("parameter cast",
                         fmt::format("a parameter of shape {} was cast from {} "
                                     "to {} by hand",
                                     shape_str(shape()), dtype().name(), target.name()));
  }
  Tensor out;
  if (is_cuda()) {
    out = detail::cuda_contiguous_as(*this, target);
  } else {
    Tensor src = is_contiguous() ? *this : contiguous_copy(*this);
    out = empty(shape(), target);
    convert_buffer(src.data_ptr(), dtype(), out.data_ptr(), target, numel());
  }
  // Integer results carry no gradient.
  if (!target.is_floating_point() && !target.is_complex()) return out;
  const DType from = dtype();
  // A cast is a graph node: the gradient flows back converted to the source dtype. A real
  // source of a complex cast gets the real part of the gradient (docs/complex.md).
  autograd::record(out, {*this}, "ToCopyBackward", [from](const Tensor& g) {
    if (g.dtype().is_complex() && !from.is_complex())
      return std::vector<Tensor>{complex_real_part(g).to(from)};
    return std::vector<Tensor>{g.to(from)};
  });
  // A float32 -> bf16/f16 cast (autocast's cast of an fp32 activation) widens its gradient
  // first: it may be handed one already widened (Node::takes_widened_gradient).
  if (from == kFloat32 && (target == kBFloat16 || target == kFloat16) && out.grad_fn())
    static_cast<autograd::FunctionNode&>(*out.grad_fn()).set_takes_widened_gradient(true);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), dtype(), target);
  detail::copy_with_device(out, detach());
  if (!is_floating_point() && !dtype().is_complex()) return out;
  const Device from = device();
  return autograd::record(out, {*this}, "ToCopyBackward",
                          [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
}

namespace {
// Autograd does not record in-place writes (docs/guide.md, "Autograd"): in grad mode a
// write into a tensor that requires grad (a leaf that requires grad, a result in the graph, or a
// view of either), or a copy_ from a source that requires grad, would leave a silently wrong
// gradient, so it is refused with what to do instead. Under NoGradGuard every write is allowed.
void check_inplace_write(const Tensor& dst, const Tensor* src, const char* op) {
  if (!GradMode::is_enabled()) return;
  if (dst.requires_grad()) {
    const std::string what =
        dst.is_leaf() ? "a leaf tensor that requires grad"
                      : fmt::format(
                            "a tensor that is part of the autograd graph (grad_fn {}, or a "
                            "view of a tensor that requires grad)",
                            dst.grad_fn()->name());
    fail(op,
         "{} is being used in an in-place operation; mantissa's autograd does not record "
         "in-place writes, so the gradient would be wrong. Write it under NoGradGuard "
         "(as optimizers and initialisers do), write into t.detach() if no gradient "
         "should see the change, or use the out-of-place op (e.g. mul, add, where, cat, "
         "full_like) to build a new tensor",
         what);
  }
  // A view taken under NoGradGuard does not require grad, but writing it changes its base: a
  // leaf that requires grad (whose next step or gradient would use the silently changed
  // values) or a tensor in the graph (whose backward would). PyTorch refuses it too ("A view
  // was created in no_grad mode and is being modified inplace with grad mode enabled").
  if (const std::shared_ptr<TensorImpl> base = dst.impl().view_base.lock();
      base != nullptr && base->requires_grad) {
    const Tensor b(base);
    fail(op,
         "the tensor written is a view, taken under NoGradGuard, of {}, and is being modified "
         "in place with grad mode enabled; mantissa's autograd does not record in-place "
         "writes, so the gradient would be wrong. Write it under NoGradGuard as well, or take "
         "the view of base.detach() if no gradient should see the change",
         b.is_leaf() ? "a leaf tensor that requires grad"
                     : fmt::format("a tensor that is part of the autograd graph (grad_fn {})",
                                   b.grad_fn()->name()));
  }
  if (src != nullptr && src->requires_grad()) {
    fail(op,
         "the source requires grad, and mantissa's autograd does not record copy_, so "
         "its gradient would be lost. Build the result out of place (e.g. cat, stack, "
         "clone, to, where) to keep the gradient, or copy from src.detach() (or under "
         "NoGradGuard) if no gradient should flow");
  }
}
}  // namespace

Tensor& Tensor::zero_() {
  check_inplace_write(*this, nullptr, "zero_");
  detail::fill_unchecked(*this, 0.0);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_inplace_write(*this, nullptr, "fill_");
  detail::fill_unchecked(*this, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace_write(*this, &src, "copy_");
  detail::copy_unchecked(*this, src);
  return *this;
}

namespace detail {

Tensor fill_unchecked(const Tensor& dst, double value) {
  if (dst.is_cuda()) {
    cuda_fill(dst, value);
    if (dst.storage()) dst.storage()->bump_version();
    return dst;
  }
  Tensor one = scalar_tensor(value, dst.dtype());
  return copy_unchecked(dst, one);
}

Tensor copy_unchecked(const Tensor& dst, const Tensor& src) {
  const Shape& out_shape = dst.shape();
  bool broadcastable = src.dim() <= dst.dim();
  for (int64_t i = 0; broadcastable && i < src.dim(); ++i) {
    const int64_t s = src.shape()[src.dim() - 1 - i];
    broadcastable = s == 1 || s == out_shape[dst.dim() - 1 - i];
  }
  MANTISSA_CHECK(broadcastable, "copy_", "cannot copy a tensor of shape {} into one of shape {}",
                 shape_str(src.shape()), shape_str(out_shape));
  if (dst.is_cuda() || src.is_cuda()) {
    copy_with_device(dst, src.detach());
    if (dst.storage()) dst.storage()->bump_version();
    return dst;
  }
  // Bring src to dst's dtype first (a contiguous temporary), then scatter with broadcasting.
  Tensor s = src.detach();
  if (s.dtype() != dst.dtype()) {
    Tensor c = s.is_contiguous() ? s : contiguous_copy(s);
    Tensor conv = empty(c.shape(), dst.dtype());
    convert_buffer(c.data_ptr(), c.dtype(), conv.data_ptr(), dst.dtype(), c.numel());
    s = conv;
  }
  kernels::strided_copy(s.data_ptr(), kernels::broadcast_strides(s, out_shape), dst.data_ptr(),
                        dst.strides(), out_shape, dst.element_size());
  if (dst.storage()) dst.storage()->bump_version();
  return dst;
}

}  // namespace detail

double Tensor::item() const {
  MANTISSA_CHECK(numel() == 1, "item", "a tensor with {} elements cannot be converted to a scalar",
                 numel());
  if (is_cuda()) return to(kCPU).item();  // waits for the GPU: the value is needed now
  double v = 0;
  convert_buffer(data_ptr(), dtype(), &v, kFloat64, 1);
  return v;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  if (is_cuda()) return to(kCPU).template to_vector<T>();
  Tensor c = is_contiguous() ? *this : contiguous_copy(*this);
  std::vector<T> out(static_cast<size_t>(numel()));
  convert_buffer(c.data_ptr(), dtype(), out.data(), dtype_of<T>(), numel());
  return out;
}
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<int8_t> Tensor::to_vector<int8_t>() const;
template std::vector<Float8E4M3> Tensor::to_vector<Float8E4M3>() const;
template std::vector<Float8E5M2> Tensor::to_vector<Float8E5M2>() const;
template std::vector<std::complex<float>> Tensor::to_vector<std::complex<float>>() const;
template std::vector<std::complex<double>> Tensor::to_vector<std::complex<double>>() const;

}  // namespace mantissa
