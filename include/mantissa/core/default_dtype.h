#pragma once
// The default floating dtype of new parameters (torch.get_default_dtype / set_default_dtype),
// per thread. Layers whose constructor gets no dtype create their parameters in it, so a
// precision plugin's init scope (Trainer::init_module) builds a model directly in bf16 or fp16
// without an fp32 copy on the way. Factory functions (zeros, empty, ...) keep kDefaultFloat:
// only layer constructors read this.
#include "mantissa/core/dtype.h"

namespace mantissa {

DType get_default_dtype();  // float32 unless set
// Floating dtypes only (float64, float32, float16, bfloat16); throws otherwise.
void set_default_dtype(DType dtype);

// The complex dtype matching the default (torch's rule): complex128 when the default is
// float64 (64-true's init scope), complex64 otherwise. Complex layers create parameters in it;
// under a float16/bfloat16 default there is no complex dtype, and it throws saying so.
DType get_default_complex_dtype();

// Sets the default dtype for a scope and restores the previous one on exit.
class DefaultDtypeGuard {
 public:
  explicit DefaultDtypeGuard(DType dtype);
  ~DefaultDtypeGuard();
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;

 private:
  DType previous_;
};

}  // namespace mantissa
