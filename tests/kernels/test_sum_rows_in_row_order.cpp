// kernels::sum_rows_f32_in_row_order (the scaled FP8 recipes' bias gradient): the bits of
// sum(g.to(kFloat32), {0}) for float32, bfloat16 and float16 inputs, with NaN, inf and -0
// among the values, column counts that split unevenly into 16-column groups per thread and row
// counts from 0 up, at 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/core/generator.h"
#include "mantissa/mantissa.h"

namespace mantissa {
namespace {

std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<uint32_t> b;
  for (float v : t.to_vector<float>()) b.push_back(std::bit_cast<uint32_t>(v));
  return b;
}

TEST(SumRowsInRowOrder, EqualsTheSumOfTheFloat32CopyBitForBit) {
  Generator gen(7);
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (int64_t rows : {0, 1, 7, 300, 1000})
      for (int64_t n : {2, 17, 256, 300, 700}) {
        SCOPED_TRACE(::testing::Message() << dt.name() << " " << rows << "x" << n);
        // Magnitudes over a wide range, so that another summation order rounds differently.
        std::vector<float> v = randn({rows, n}, kFloat32, &gen).to_vector<float>();
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = std::ldexp(v[i], static_cast<int>(i % 23) - 11);
        if (rows > 3) {
          v[static_cast<size_t>(1 * n + 1)] = std::numeric_limits<float>::quiet_NaN();
          v[static_cast<size_t>(2 * n)] = std::numeric_limits<float>::infinity();
          for (int64_t r = 0; r < rows; ++r) v[static_cast<size_t>(r * n + n - 1)] = -0.0f;
        }
        const Tensor g = tensor(v, {rows, n}).to(dt);
        const std::vector<uint32_t> want = bits_of(sum(g.to(kFloat32), {0}));
        for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
          const int before = omp_get_max_threads();
          omp_set_num_threads(threads);
#endif
          const Tensor got = kernels::sum_rows_f32_in_row_order(g);
#ifdef _OPENMP
          omp_set_num_threads(before);
#endif
          ASSERT_EQ(got.dtype(), kFloat32);
          ASSERT_EQ(bits_of(got), want) << threads << " threads";
        }
      }
}

TEST(SumRowsInRowOrder, RefusesWhatItCannotRead) {
  EXPECT_THROW((void)kernels::sum_rows_f32_in_row_order(empty({4}, kFloat32)), Error);
  EXPECT_THROW((void)kernels::sum_rows_f32_in_row_order(empty({4, 2}, kInt32)), Error);
}

}  // namespace
}  // namespace mantissa
