#include "mantissa/core/quantized_tensor.h"

namespace mantissa {

namespace {
int64_t bytes_of(const Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }
}  // namespace

int64_t QuantizedTensor::stored_bytes() const {
  int64_t b = bytes_of(data) + bytes_of(absmax);
  if (has_nested) b += bytes_of(nested.absmax) + static_cast<int64_t>(sizeof(float));
  return b;
}

int64_t QuantizedTensor::total_bytes() const {
  int64_t b = stored_bytes() + bytes_of(code);
  if (has_nested) b += bytes_of(nested.code);
  return b;
}

}  // namespace mantissa
