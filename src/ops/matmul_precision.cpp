// The process-wide float32 matmul precision (matmul_precision.h): torch's names for the GEMM's
// default float32 setting (mantissa/gemm/gemm.h), which holds it.
#include "mantissa/ops/matmul_precision.h"

#include "mantissa/core/error.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa {

void set_float32_matmul_precision(const std::string& precision) {
  if (precision == "highest") return set_float32_matmul_precision(Float32MatmulPrecision::kHighest);
  if (precision == "high") return set_float32_matmul_precision(Float32MatmulPrecision::kHigh);
  if (precision == "medium") return set_float32_matmul_precision(Float32MatmulPrecision::kMedium);
  fail("set_float32_matmul_precision",
       "unknown precision '{}'; valid values are: highest, high, medium", precision);
}

void set_float32_matmul_precision(Float32MatmulPrecision precision) {
  switch (precision) {
    case Float32MatmulPrecision::kHighest:
      return gemm::set_default_float32_products(gemm::Float32Products::kExact);
    case Float32MatmulPrecision::kHigh:
      return gemm::set_default_float32_products(gemm::Float32Products::kBf16x3);
    case Float32MatmulPrecision::kMedium:
      return gemm::set_default_float32_products(gemm::Float32Products::kBf16);
  }
}

Float32MatmulPrecision float32_matmul_precision() {
  switch (gemm::default_float32_products()) {
    case gemm::Float32Products::kBf16x3:
      return Float32MatmulPrecision::kHigh;
    case gemm::Float32Products::kBf16:
      return Float32MatmulPrecision::kMedium;
    case gemm::Float32Products::kExact:
      break;
  }
  return Float32MatmulPrecision::kHighest;
}

std::string get_float32_matmul_precision() {
  switch (float32_matmul_precision()) {
    case Float32MatmulPrecision::kHighest:
      return "highest";
    case Float32MatmulPrecision::kHigh:
      return "high";
    case Float32MatmulPrecision::kMedium:
      return "medium";
  }
  return "highest";
}

namespace detail {
template class ScopedSetting<Float32MatmulPrecisionSetting>;
}  // namespace detail

std::string float32_matmul_emulation_warning() {
  return gemm::float32_emulation_warning(gemm::default_float32_products());
}

}  // namespace mantissa
