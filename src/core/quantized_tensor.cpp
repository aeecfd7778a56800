#include "mantissa/core/quantized_tensor.h"

namespace mantissa {

std::string_view quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::kNf4:
      return "nf4";
    case QuantFormat::kFp4:
      return "fp4";
    case QuantFormat::kInt8Row:
      return "int8_row";
  }
  return "?";
}

QuantFormat quant_format_from_string(std::string_view s) {
  if (s == "nf4") return QuantFormat::kNf4;
  if (s == "fp4") return QuantFormat::kFp4;
  if (s == "int8_row") return QuantFormat::kInt8Row;
  fail("quant_format_from_string", "unknown quantized format \"{}\"; valid: nf4, fp4, int8_row", s);
}

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
