#pragma once
// Tensor: a cheap value handle onto shared TensorImpl (storage + offset + shape + strides +
// dtype + autograd metadata). Copies share the same tensor; views share storage.
// Ops are free functions (mantissa/ops/*.h); the members here are metadata, views, casts and
// element access.
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/device.h"
#include "mantissa/core/dtype.h"
#include "mantissa/core/error.h"
#include "mantissa/core/float8.h"
#include "mantissa/core/half.h"
#include "mantissa/core/shape.h"
#include "mantissa/core/storage.h"

namespace mantissa {

namespace autograd {
class Node;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = kFloat32;
  Device device;
  // Autograd: a leaf with requires_grad accumulates into grad; a non-leaf has grad_fn.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  // Created lazily for a leaf and kept for its lifetime (the accumulator refers back to it
  // weakly, so there is no cycle): recreating it for every graph cost two of the ~16 heap
  // allocations of a recorded op on a leaf (docs/performance.md, "Eager ops").
  std::shared_ptr<autograd::Node> grad_accumulator;
  // For a view (view, reshape, slice, transpose, ...): the tensor it was taken of, the first of
  // a chain of views; empty otherwise (detach() and copies have none). A view taken under
  // NoGradGuard of a tensor that requires grad does not require grad itself, so the in-place
  // check (copy_, fill_, zero_ in grad mode) looks here to refuse writing it, as PyTorch does.
  // Weak: a view must not keep its base's graph alive.
  std::weak_ptr<TensorImpl> view_base;
};

// Maps a C++ element type to its DType (float -> kFloat32, Half -> kFloat16, ...).
template <typename T>
constexpr DType dtype_of();

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& sizes() const { return impl().shape; }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return impl().strides; }
  int64_t stride(int64_t dim) const;
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const { return numel_of(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  size_t element_size() const { return dtype().itemsize(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  bool is_floating_point() const { return dtype().is_floating_point(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  bool is_cuda() const { return impl().device.is_cuda(); }

  // ---- raw data (first element of this view) ----
  // For host code: an Error for a tensor on a GPU (host code cannot read GPU memory; the
  // message says to move it with to(kCPU)). Kernels of the tensor's own device use device_ptr.
  void* data_ptr() const;
  // The address on the tensor's device (a GPU address for a CUDA tensor).
  void* device_ptr() const;
  template <typename T>
  T* device_data() const {
    MANTISSA_CHECK(dtype() == dtype_of<T>(), "Tensor::device_data",
                   "tensor has dtype {}, asked for {}", dtype().name(), dtype_of<T>().name());
    return static_cast<T*>(device_ptr());
  }
  template <typename T>
  T* data() const {
    MANTISSA_CHECK(dtype() == dtype_of<T>(), "Tensor::data", "tensor has dtype {}, asked for {}",
                   dtype().name(), dtype_of<T>().name());
    return static_cast<T*>(data_ptr());
  }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  // Only floating leaves may require grad (as in PyTorch).
  Tensor& requires_grad_(bool value = true);
  Tensor& set_requires_grad(bool value) { return requires_grad_(value); }
  Tensor grad() const;
  void set_grad(const Tensor& g) const;  // const: changes the shared tensor, not the handle
  // Frees the gradient (optimizer.zero_grad(set_to_none=True) semantics).
  void reset_grad() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  // Runs the backward pass from this tensor. `gradient` may be omitted for one-element
  // tensors. retain_graph keeps saved tensors for a second backward.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Same storage, no history, requires_grad false.
  Tensor detach() const;

  // ---- views (share storage; differentiable) ----
  Tensor view(const Shape& shape) const;     // requires compatible strides
  Tensor reshape(const Shape& shape) const;  // view when possible, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- copies and casts (differentiable) ----
  Tensor contiguous() const;  // this tensor itself when already contiguous
  Tensor clone() const;
  // Cast to another dtype; a no-op (same tensor) when the dtype already matches.
  // A gradient flowing back through the cast arrives in this tensor's dtype.
  Tensor to(DType dtype) const;
  // A copy on another device (this tensor itself when already there); differentiable, the
  // gradient flows back to this tensor's device. As torch.Tensor.to(device) / .cpu() / .cuda().
  Tensor to(Device device) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(cuda_device(index)); }

  // ---- in-place (no autograd: refused in grad mode where it needs one, docs/guide.md) ----
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // broadcasting src into this, casting its dtype

  // ---- element access ----
  // The value of a one-element tensor as double (any dtype).
  double item() const;
  template <typename T>
  T item() const {
    return static_cast<T>(item());
  }
  // All elements in logical (row-major) order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  std::string to_string() const;  // PyTorch-like printing with shape and dtype

  TensorImpl& impl() const {
    MANTISSA_CHECK(impl_ != nullptr, "Tensor", "operation on an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
// A dtype's name ("bfloat16"), as DType::name() gives it.
std::ostream& operator<<(std::ostream& os, DType dtype);

template <>
constexpr DType dtype_of<double>() {
  return kFloat64;
}
template <>
constexpr DType dtype_of<float>() {
  return kFloat32;
}
template <>
constexpr DType dtype_of<Half>() {
  return kFloat16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return kBFloat16;
}
template <>
constexpr DType dtype_of<Float8E4M3>() {
  return kFloat8_e4m3fn;
}
template <>
constexpr DType dtype_of<Float8E5M2>() {
  return kFloat8_e5m2;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return kInt64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return kInt32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return kUInt8;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return kInt8;
}
template <>
constexpr DType dtype_of<bool>() {
  return kBool;
}
template <>
constexpr DType dtype_of<std::complex<float>>() {
  return kComplex64;
}
template <>
constexpr DType dtype_of<std::complex<double>>() {
  return kComplex128;
}

// ---- creation ----
// A new uninitialised contiguous tensor, on the CPU unless a device is given.
Tensor empty(Shape shape, DType dtype = kDefaultFloat, Device device = kCPU);
Tensor zeros(const Shape& shape, DType dtype = kDefaultFloat, Device device = kCPU);
Tensor ones(const Shape& shape, DType dtype = kDefaultFloat, Device device = kCPU);
Tensor full(const Shape& shape, double value, DType dtype = kDefaultFloat, Device device = kCPU);
// The *_like factories keep the tensor's device.
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// [start, end) with step, like torch.arange; integer dtype by default.
Tensor arange(double start, double end, double step = 1, DType dtype = kInt64);
Tensor arange(double end, DType dtype = kInt64);
// A scalar (0-dim) tensor.
Tensor scalar_tensor(double value, DType dtype = kDefaultFloat);
// Copies `count` elements of `src_dtype` from buffer into a new tensor of `shape`.
Tensor from_buffer(const void* buffer, DType src_dtype, const Shape& shape);
// From a vector, with an optional shape (defaults to 1-D); T decides the dtype.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {});
// From doubles converted to `dtype` (handy in tests: tensor_of({1, 2}, {2}, kBFloat16)).
Tensor tensor_of(const std::vector<double>& values, const Shape& shape, DType dtype);

}  // namespace mantissa
