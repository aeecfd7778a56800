#include "mantissa/core/default_dtype.h"

#include "mantissa/core/error.h"

namespace mantissa {
namespace {
// Thread-local like autocast's state: a scope on one thread never changes another's layers.
thread_local DType t_default_dtype = kFloat32;
}  // namespace

DType get_default_dtype() { return t_default_dtype; }

void set_default_dtype(DType dtype) {
  MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "set_default_dtype",
                 "expected float64, float32, float16 or bfloat16, got {}", dtype.name());
  t_default_dtype = dtype;
}

DType get_default_complex_dtype() {
  if (t_default_dtype == kFloat64) return kComplex128;
  MANTISSA_CHECK(t_default_dtype == kFloat32, "get_default_complex_dtype",
                 "there is no complex dtype for the default dtype {}: complex parameters need "
                 "32-true (complex64) or 64-true (complex128), see docs/complex.md",
                 t_default_dtype.name());
  return kComplex64;
}

namespace detail {
template class ScopedSetting<DefaultDtypeSetting>;
}  // namespace detail

}  // namespace mantissa
