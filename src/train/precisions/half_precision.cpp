#include "mantissa/train/precisions/half_precision.h"

#include "mantissa/core/error.h"

namespace mantissa::train {

HalfPrecision::HalfPrecision(const std::string& precision) : precision_(precision) {
  MANTISSA_CHECK(precision == "16-true" || precision == "bf16-true", "HalfPrecision",
                 "Passed `HalfPrecision(precision='{}')`. Precision must be '16-true' or "
                 "'bf16-true'.",
                 precision);
  dtype_ = precision == "16-true" ? kFloat16 : kBFloat16;
}

data::Example HalfPrecision::convert_input(const data::Example& batch) const {
  data::Example out = batch;
  // to() returns the tensor itself when it already has the dtype (inputs converted up front).
  if (out.input.defined() && out.input.is_floating_point()) out.input = out.input.to(dtype_);
  if (out.target.defined() && out.target.is_floating_point()) out.target = out.target.to(dtype_);
  return out;
}

std::unique_ptr<Precision> make_half_precision(const PrecisionOptions& options) {
  check_precision_options(options);
  return std::make_unique<HalfPrecision>(options.precision);
}

}  // namespace mantissa::train
