// Printing tensors of any rank: the printer walks the dimensions with a heap stack, so a tensor
// with tens of thousands of dimensions (made in memory, or loaded from a file below the reader's
// cap) prints instead of overflowing the call stack.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {

// One recursion per dimension overflowed an 8 MiB stack near rank 60,000 (SIGSEGV).
TEST(TensorPrint, RankOfHundredThousandPrintsWithoutRecursion) {
  const int64_t rank = 100000;
  const Tensor t = zeros(Shape(rank, 1), kFloat32);
  std::ostringstream os;
  os << t;
  const std::string expected =
      "tensor(" + std::string(rank, '[') + "0.0000" + std::string(rank, ']') + ")";
  EXPECT_EQ(os.str(), expected);
}

// The layout the recursive printer gave, kept by the iterative one.
TEST(TensorPrint, NestedAndSummarizedLayoutIsKept) {
  EXPECT_EQ(arange(3, 4, 1, kInt64).reshape({}).to_string(), "tensor(3)");  // zero-dim: no brackets
  EXPECT_EQ(zeros({2, 0}, kFloat32).to_string(), "tensor([[],\n        []])");
  EXPECT_EQ(arange(0, 8, 1, kFloat32).reshape({2, 2, 2}).to_string(),
            "tensor([[[0.0000, 1.0000],\n"
            "         [2.0000, 3.0000]],\n"
            "        [[4.0000, 5.0000],\n"
            "         [6.0000, 7.0000]]])");
  // Above 1000 elements each dimension shows its first and last three items.
  EXPECT_EQ(arange(0, 2002, 1, kInt64).reshape({2, 1001}).to_string(),
            "tensor([[0, 1, 2, ..., 998, 999, 1000],\n"
            "        [1001, 1002, 1003, ..., 1999, 2000, 2001]])");
}

}  // namespace
}  // namespace mantissa
