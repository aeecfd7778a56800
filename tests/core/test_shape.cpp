// Printing a Shape: operator<< writes what shape_str gives ("[2, 3]"), so a shape prints with
// `os << t.shape()` as a Tensor and a DType do.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "mantissa/core/shape.h"
#include "mantissa/core/tensor.h"

// Outside namespace mantissa: Shape is std::vector<int64_t>, which argument-dependent lookup
// searches std for, so the operator is brought in by name (as `using namespace mantissa;` does).
std::string printed_outside_the_namespace(const mantissa::Shape& shape) {
  using mantissa::operator<<;
  std::ostringstream os;
  os << "shape " << shape << '\n';
  return os.str();
}

namespace mantissa {
namespace {

std::string printed(const Shape& shape) {
  std::ostringstream os;
  os << shape;
  return os.str();
}

TEST(Shape, PrintsAsShapeStr) {
  EXPECT_EQ(printed({2, 3}), "[2, 3]");
  EXPECT_EQ(printed({7}), "[7]");
  EXPECT_EQ(printed({}), "[]");  // a 0-dim tensor's shape
  EXPECT_EQ(printed({4, 0, 1}), "[4, 0, 1]");
  for (const Shape& s : {Shape{2, 3}, Shape{}, Shape{1, 2, 3, 4}})
    EXPECT_EQ(printed(s), shape_str(s));
  // A tensor's shape, between other output.
  std::ostringstream os;
  os << zeros({5, 6}).shape() << " of " << kFloat32;
  EXPECT_EQ(os.str(), "[5, 6] of float32");
  EXPECT_EQ(printed_outside_the_namespace({2, 3}), "shape [2, 3]\n");
}

}  // namespace
}  // namespace mantissa
