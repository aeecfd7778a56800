// The process-wide float32 matmul precision (matmul_precision.h).
#include "mantissa/ops/matmul_precision.h"

#include <atomic>

#include "mantissa/core/error.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa {
namespace {
std::atomic<Float32MatmulPrecision> g_precision{Float32MatmulPrecision::kHighest};
}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  if (precision == "highest") return set_float32_matmul_precision(Float32MatmulPrecision::kHighest);
  if (precision == "high") return set_float32_matmul_precision(Float32MatmulPrecision::kHigh);
  if (precision == "medium") return set_float32_matmul_precision(Float32MatmulPrecision::kMedium);
  fail("set_float32_matmul_precision",
       "unknown precision '{}'; valid values are: highest, high, medium", precision);
}

void set_float32_matmul_precision(Float32MatmulPrecision precision) { g_precision = precision; }

Float32MatmulPrecision float32_matmul_precision() { return g_precision.load(); }

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
  if (has_native_bf16()) return "";
  return "float32 matmul precision '" + get_float32_matmul_precision() +
         "': " + why_bf16_products_are_widened() +
         ", so the bf16 products run on the fp32 GEMM (operands "
         "rounded while packing): the numerics of '" +
         get_float32_matmul_precision() + "', but no faster than 'highest'";
}

}  // namespace mantissa
