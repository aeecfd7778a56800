// Tensor creation: empty/zeros/ones/full/arange and copies from user buffers.
#include <cmath>
#include <cstring>
#include <limits>

#include "mantissa/core/convert.h"
#include "mantissa/core/tensor.h"

#include "core/cuda/tensor_transfer.h"

namespace mantissa {

Tensor empty(Shape shape, DType dtype, Device device) {
  for (int64_t s : shape)
    MANTISSA_CHECK(s >= 0, "empty", "negative dimension in shape {}", shape_str(shape));
  const int64_t n = numel_of(shape);
  const auto item = static_cast<int64_t>(dtype.itemsize());
  MANTISSA_CHECK(n <= std::numeric_limits<int64_t>::max() / item, "empty",
                 "shape {} of {} needs more bytes than an int64 counts", shape_str(shape),
                 dtype.name());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = device.is_cpu()
                      ? std::make_shared<Storage>(static_cast<size_t>(n * item))
                      : std::make_shared<Storage>(static_cast<size_t>(n * item), device);
  impl->device = device;
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.is_cuda()) {
    detail::cuda_fill(t, value);
    return t;
  }
  // Convert the value once, then replicate its bytes.
  alignas(16) unsigned char one[16] = {};  // the widest element: complex128
  convert_buffer(&value, kFloat64, one, dtype, 1);
  const size_t isz = dtype.itemsize();
  auto* dst = static_cast<unsigned char*>(t.data_ptr());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    for (size_t b = 0; b < isz; ++b) dst[i * isz + b] = one[b];
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.is_cuda()) {
    detail::cuda_fill(t, 0.0);
    return t;
  }
  if (t.nbytes()) std::memset(t.data_ptr(), 0, t.nbytes());  // all dtypes: +0 is all-zero bits
  return t;
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, t.dtype(), t.device());
}
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  MANTISSA_CHECK(step != 0, "arange", "step must be nonzero");
  MANTISSA_CHECK(std::isfinite(start) && std::isfinite(end), "arange", "bounds must be finite");
  const double count = std::ceil((end - start) / step);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return tensor_of(v, {n}, dtype);
}
Tensor arange(double end, DType dtype) { return arange(0, end, 1, dtype); }

Tensor from_buffer(const void* buffer, DType src_dtype, const Shape& shape) {
  Tensor t = empty(shape, src_dtype);
  MANTISSA_CHECK(buffer != nullptr || t.nbytes() == 0, "from_buffer", "null buffer for shape {}",
                 shape_str(shape));
  if (t.nbytes()) std::memcpy(t.data_ptr(), buffer, t.nbytes());
  return t;
}

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  MANTISSA_CHECK(numel_of(s) == static_cast<int64_t>(values.size()), "tensor",
                 "{} values do not fill shape {}", values.size(), shape_str(s));
  return from_buffer(values.data(), dtype_of<T>(), s);
}
template Tensor tensor<double>(const std::vector<double>&, const Shape&);
template Tensor tensor<float>(const std::vector<float>&, const Shape&);
template Tensor tensor<Half>(const std::vector<Half>&, const Shape&);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, const Shape&);
template Tensor tensor<int8_t>(const std::vector<int8_t>&, const Shape&);
template Tensor tensor<std::complex<float>>(const std::vector<std::complex<float>>&, const Shape&);
template Tensor tensor<std::complex<double>>(const std::vector<std::complex<double>>&,
                                             const Shape&);

Tensor tensor_of(const std::vector<double>& values, const Shape& shape, DType dtype) {
  MANTISSA_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()), "tensor_of",
                 "{} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = empty(shape, dtype);
  convert_buffer(values.data(), kFloat64, t.data_ptr(), dtype, t.numel());
  return t;
}

}  // namespace mantissa
