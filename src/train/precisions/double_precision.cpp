#include "mantissa/train/precisions/double_precision.h"

namespace mantissa::train {

data::Example DoublePrecision::convert_input(const data::Example& batch) const {
  data::Example out = batch;
  if (out.input.defined() && out.input.is_floating_point()) out.input = out.input.to(kFloat64);
  if (out.target.defined() && out.target.is_floating_point()) out.target = out.target.to(kFloat64);
  return out;
}

std::unique_ptr<Precision> make_double_precision(const PrecisionOptions& options) {
  check_precision_options(options);
  return std::make_unique<DoublePrecision>();
}

}  // namespace mantissa::train
