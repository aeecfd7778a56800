#pragma once
// The default floating dtype of new parameters (torch.get_default_dtype / set_default_dtype),
// per thread. Layers whose constructor gets no dtype create their parameters in it, so a
// precision plugin's init scope (Trainer::init_module) builds a model directly in bf16 or fp16
// without an fp32 copy on the way. Factory functions (zeros, empty, ...) keep kDefaultFloat:
// only layer constructors read this.
#include "mantissa/core/dtype.h"
#include "mantissa/core/scoped_setting.h"

namespace mantissa {

DType get_default_dtype();  // float32 unless set
// Floating dtypes only (float64, float32, float16, bfloat16); throws otherwise.
void set_default_dtype(DType dtype);

// The complex dtype matching the default (torch's rule): complex128 when the default is
// float64 (64-true's init scope), complex64 otherwise. Complex layers create parameters in it;
// under a float16/bfloat16 default there is no complex dtype, and it throws saying so.
DType get_default_complex_dtype();

namespace detail {
struct DefaultDtypeSetting {
  using Value = DType;
  static DType get() { return get_default_dtype(); }
  static void set(DType dtype) { set_default_dtype(dtype); }
  static constexpr bool kProcessWide = false;
  static constexpr const char* kGuards = "default-dtype guards (DefaultDtypeGuard)";
  static constexpr const char* kValue = "the default dtype";
};
extern template class ScopedSetting<DefaultDtypeSetting>;
}  // namespace detail

// Sets the default dtype for a scope and restores the previous one on exit. Guards closed out
// of order (held by unique_ptr or optional) leave the default dtype as closing in order would
// (ScopedSetting says how).
class DefaultDtypeGuard : detail::ScopedSetting<detail::DefaultDtypeSetting> {
 public:
  explicit DefaultDtypeGuard(DType dtype)
      : detail::ScopedSetting<detail::DefaultDtypeSetting>(dtype) {}
};

}  // namespace mantissa
