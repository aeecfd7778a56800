// A complex-valued model trained by the Trainer: nn::ComplexLinear learns y = A x + b.
// Run: build/example_complex_regression [precision: 64-true (default) or 32-true] [steps]
#include <fmt/format.h>

#include <cstdlib>

#include "complex_regression.h"

int main(int argc, char** argv) {
  const std::string precision = argc > 1 ? argv[1] : "64-true";
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 200;
  mantissa::DType dtype;
  try {
    const std::vector<double> losses = complex_example::train(precision, steps, &dtype);
    fmt::print("{}: weights {}, loss {:.6f} -> {:.6f} after {} steps\n", precision, dtype.name(),
               losses.front(), losses.back(), losses.size());
    return losses.back() < losses.front() ? 0 : 1;
  } catch (const mantissa::Error& e) {  // e.g. a low-precision plugin refusing complex weights
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
