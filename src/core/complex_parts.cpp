#include "core/complex_parts.h"

#include <complex>

#include "mantissa/core/error.h"

namespace mantissa {

DType complex_component_dtype(DType complex_dtype) {
  MANTISSA_CHECK(complex_dtype.is_complex(), "complex", "expected a complex dtype, got {}",
                 complex_dtype.name());
  return complex_dtype == kComplex128 ? kFloat64 : kFloat32;
}

DType complex_dtype_for(DType dtype) {
  if (dtype.is_complex()) return dtype;
  return dtype == kFloat64 ? kComplex128 : kComplex64;
}

Tensor complex_real_part(const Tensor& z) {
  const Tensor c = z.detach().contiguous();
  const DType part = complex_component_dtype(c.dtype());
  Tensor out = empty(c.shape(), part);
  const int64_t n = c.numel();
  if (part == kFloat32) {
    const auto* s = static_cast<const float*>(c.data_ptr());
    auto* d = static_cast<float*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) d[i] = s[2 * i];
  } else {
    const auto* s = static_cast<const double*>(c.data_ptr());
    auto* d = static_cast<double*>(out.data_ptr());
    for (int64_t i = 0; i < n; ++i) d[i] = s[2 * i];
  }
  return out;
}

Tensor complex_as_real_view(const Tensor& z) {
  const DType part = complex_component_dtype(z.dtype());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = z.impl().storage;
  impl->offset = 2 * z.offset();
  impl->shape = z.shape();
  impl->shape.push_back(2);
  impl->strides.clear();
  for (int64_t st : z.strides()) impl->strides.push_back(2 * st);
  impl->strides.push_back(1);
  impl->dtype = part;
  impl->device = z.impl().device;
  std::shared_ptr<TensorImpl> root = z.impl().view_base.lock();  // see make_view
  impl->view_base = root ? root : z.impl_ptr();
  return Tensor(impl);
}

}  // namespace mantissa
