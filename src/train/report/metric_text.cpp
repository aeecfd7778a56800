#include "mantissa/train/report/metric_text.h"

#include <fmt/format.h>

#include <cmath>

namespace mantissa::train {

std::string metric_text(double value) {
  if (std::isnan(value)) return "nan";  // fmt would print "-nan" for a negative one
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::fabs(value) >= 1e6) return fmt::format("{:.4e}", value);
  return fmt::format("{:.4f}", value);
}

}  // namespace mantissa::train
